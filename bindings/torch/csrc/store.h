// A c10d Store (TCPStore, FileStore, HashStore, a PrefixStore around one)
// as a gang store: the gangs of a process group meet their peers in the
// keys torch handed the backend, with no port or server of their own.
#pragma once

#include <memory>

#include <gang/gang.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace gang_torch {

// Owns a gang_store_t of callbacks into `store`; gangs made with it (and
// their splits) must be destroyed first.
class StoreHandle {
 public:
  StoreHandle(c10::intrusive_ptr<c10d::Store> store, int64_t timeout_ms);
  ~StoreHandle();
  StoreHandle(const StoreHandle&) = delete;
  StoreHandle& operator=(const StoreHandle&) = delete;

  gang_store_t* get() const { return handle_; }

 private:
  gang_store_t* handle_ = nullptr;
};

}  // namespace gang_torch
