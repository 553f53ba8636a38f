// A backend module's C table (gang/gang_backend.h) behind the Backend
// interface, so a module takes the same path as a built-in backend: the
// registry hands out its BackendInfo, the core posts validated operations
// to it. Everything C++ stops here: C structs and statuses go in, statuses
// and messages come out, and nothing thrown crosses into the module.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/registry.h"
#include "gang/gang_backend.h"

namespace gang::plugin {

using core::Backend;
using core::BackendConfig;
using core::BackendInfo;
using core::BackendWorkPtr;
using core::Capabilities;
using core::DType;
using core::Operation;
using core::ReduceOp;

class PluginBackend final : public Backend {
 public:
  // Creates the module's instance for one gang (collective, like every
  // backend's creation). `module` keeps the module loaded while this
  // instance or any of its works lives. Throws gang::Error with the
  // module's status and "<name>: <message>".
  PluginBackend(const gang_backend_t* table, std::shared_ptr<void> module,
                const BackendConfig& config);
  ~PluginBackend() override;

  const char* name() const override;
  const Capabilities& capabilities() const override { return caps_; }
  bool supports(ReduceOp op, DType dtype) const override;
  int device_index() const override;
  BackendWorkPtr post(const Operation& op) override;
  BackendWorkPtr post_group(const std::vector<Operation>& ops) override;
  Status poll_error(std::string* message) override;
  std::unique_ptr<Backend> split(const BackendConfig& config) override;
  void finalize() override;
  void abort() noexcept override;

  // For splits: the child's config names the parent's instance only when it
  // comes from the same table.
  const gang_backend_t* table() const;
  void* handle() const;

  // The module's instance and what its config points to; shared with the
  // works, which must not outlive it (see the .cc).
  struct Instance;

 private:
  // Fills the instance's config from `config`; create: also runs the
  // module's create.
  PluginBackend(const gang_backend_t* table, std::shared_ptr<void> module,
                const BackendConfig& config, bool create);
  BackendWorkPtr post_ops(const Operation* ops, size_t n);

  std::shared_ptr<Instance> instance_;
  Capabilities caps_;
};

// The registry entry of a loaded module: checks the table and throws
// gang::Error(kUnavailable, "<path>: <reason>") when it is too small, of
// another ABI version, nameless, serves no known device, or lacks a
// mandatory entry point (named). The probe runs the table's probe (if any)
// and answers "" or "<path>: <why>"; create makes PluginBackends. Both
// hold `module`, so the module stays loaded while the entry is kept.
BackendInfo make_plugin_info(const gang_backend_t* table,
                             std::shared_ptr<void> module,
                             const std::string& path);

}  // namespace gang::plugin
