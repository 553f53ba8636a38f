// A c10d Store (TCPStore, FileStore, HashStore, a PrefixStore around one)
// as a gang store: the gangs of a process group meet their peers in the
// keys torch handed the backend, with no port or server of their own.
#pragma once

#include <memory>
#include <string>

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

// A gang of the process group, met through `store` (collective): on the
// CPU, or on CUDA device `cuda_device` (gang's NCCL backend). Throws as
// errors.h does.
gang_t* meet(const StoreHandle& store, int rank, int size, int64_t timeout_ms,
             const std::string& name, int cuda_device = -1);

}  // namespace gang_torch
