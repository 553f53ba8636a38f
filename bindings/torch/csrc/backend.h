// GangBackend: torch.distributed's backend "gang", a c10d::Backend whose
// collectives are gang's, through gang's C ABI.
//
// The CPU gang is made with the backend, through the store c10d hands it;
// every c10d entry point on CPU tensors is planned on it (work.h) and
// issued blocking when c10d says the caller waits (opts.asyncOp false),
// else asynchronous. CUDA tensors go to a CUDA gang of their device, made
// on first use through the same store, in stream order (cuda.h).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gang/gang.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "cuda.h"
#include "store.h"
#include "work.h"

namespace gang_torch {

class GangBackend : public c10d::Backend {
 public:
  // A new gang of `size` ranks met through `store` (collective).
  GangBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout, std::string group_name);
  // A backend on a gang that already exists: owned (a split's) or not (a
  // gang of gang's own API that the caller keeps alive).
  GangBackend(gang_t* gang, bool owned, std::shared_ptr<StoreHandle> store,
              std::chrono::milliseconds timeout, std::string group_name);
  ~GangBackend() override;

  // Written without `override` where older releases' Backend lacks the
  // virtual (torch 2.8 has no getBackendOptions, setTimeout or split):
  // they override where it exists.
  const std::string getBackendName() const override { return "gang"; }
  c10::intrusive_ptr<Options> getBackendOptions() { return options_; }
  bool supportsSplitting() const override { return true; }
  // The calls between startCoalescing and endCoalescing (c10d's
  // _coalescing_manager: batch_isend_irecv) are issued at the end, together,
  // as one gang group: an exchange whose sends and receives meet only when
  // posted together (NCCL's) completes. Each call returns a Work that is
  // done at once; endCoalescing's is the group's.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setTimeout(std::chrono::milliseconds timeout);
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  void abort() override;
  void shutdown() override;
  // init_process_group(device_id=...): the device's CUDA gang now, before
  // the program holds the device's streams (its first collective waits
  // for them).
  void eagerConnectSingleDevice(at::Device device) override;

  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts);

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  // This rank's side of a split that leaves it out (collective).
  void split_out();

  // The CPU gang (for gang's own API on the same ranks).
  gang_t* gang() const { return gang_; }

  // Aborts, then stops, every backend still alive: nothing may wait on a
  // collective once the interpreter exits.
  static void shutdown_all();

 private:
  template <typename Opts>
  c10::intrusive_ptr<c10d::Work> issue(Plan plan, std::vector<at::Tensor> outputs,
                                       const Opts& opts, c10d::OpType type, const char* name);
  c10::intrusive_ptr<c10d::Work> issue_now(Plan plan, std::vector<at::Tensor> outputs,
                                           bool async_op, c10d::OpType type, const char* name,
                                           std::shared_ptr<int> source = nullptr);
  // A call made while coalescing: its plan joins the group's.
  c10::intrusive_ptr<c10d::Work> coalesce(Plan plan, std::vector<at::Tensor> outputs,
                                          c10d::OpType type, const char* name);
  c10::intrusive_ptr<c10d::Work> issue_cuda(Plan plan, std::vector<at::Tensor> outputs,
                                            bool async_op, c10d::OpType type, const char* name);
  void stop(std::chrono::milliseconds grace);
  // Aborts the CPU gang and every CUDA one.
  void abort_gangs();
  // Issues step and waits for it (Ctrl-C aborts it: see BlockingCall).
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts);
  void run_blocking(const Step& step, const char* name);
  // The gang for t's device (the CPU gang, or its CUDA device's), which
  // must be every other tensor's of the plan.
  gang_t* gang_for(const at::Tensor& t, Plan& plan);
  void plan_reduce(Plan& plan, const at::Tensor& t, const c10d::ReduceOp& op, int root);
  void plan_reduce_scatter(Plan& plan, at::Tensor input, const at::Tensor& output,
                           const c10d::ReduceOp& op, std::vector<size_t> counts);
  void plan_gather_list(Plan& plan, std::vector<at::Tensor> outputs, const at::Tensor& input);
  void plan_gather_single(Plan& plan, const at::Tensor& output, const at::Tensor& input);

  gang_t* gang_ = nullptr;
  bool owned_ = true;
  std::shared_ptr<StoreHandle> store_;
  c10::intrusive_ptr<Options> options_;
  std::string name_;
  std::atomic<uint64_t> seq_{0};
  std::unique_ptr<CudaSide> cuda_;  // destroyed before the store
  bool coalescing_ = false;
  Plan coalesced_;  // the calls since startCoalescing
  std::vector<at::Tensor> coalesced_outputs_;
  Completer completer_;
  std::mutex orphans_mutex_;
  std::vector<gang_work_t*> orphans_;  // a failed monitored barrier's
  std::vector<uint8_t> monitor_tokens_;
  bool shut_ = false;
};

}  // namespace gang_torch
