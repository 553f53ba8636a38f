// Lets Gloo's rendezvous read and write a gang store.
#pragma once

#include <gloo/rendezvous/store.h>

#include <memory>

#include "store/store.h"

namespace gang::backends::gloo_impl {

class GlooStore final : public ::gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<store::Store> store)
      : store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  // The gang store's own timeout bounds every wait; Gloo's is not used.
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<store::Store> store_;
};

}  // namespace gang::backends::gloo_impl
