#include "core/control_channel.h"

namespace gang::core {

void ControlChannel::run(Operation op) {
  if (op.channel != Channel::kFingerprint && !is_p2p(op.args.kind)) {
    op.seq = seq_.fetch_add(1);
  }
  BackendWorkPtr work = host_->post(op);
  if (work && !work->wait(op.deadline + Millis(50))) {
    fail(Status::kTimeout, "the core's control traffic timed out");
  }
}

void ControlChannel::barrier(Clock::time_point deadline) {
  Operation op;
  op.args.kind = OpKind::kBarrier;
  op.channel = Channel::kControl;
  op.deadline = deadline;
  run(std::move(op));
}

std::vector<uint64_t> ControlChannel::all_gather_words(
    uint64_t mine, int size, Clock::time_point deadline) {
  std::vector<uint64_t> all(static_cast<size_t>(size));
  all_gather(&mine, all.data(), 1, DType::kUInt64, deadline);
  return all;
}

void ControlChannel::all_gather(const void* send, void* recv, size_t count,
                                DType dtype, Clock::time_point deadline) {
  Operation op;
  op.args.kind = OpKind::kAllGather;
  op.args.send = send;
  op.args.recv = recv;
  op.args.count = count;
  op.args.dtype = dtype;
  op.channel = Channel::kControl;
  op.deadline = deadline;
  run(std::move(op));
}

void ControlChannel::all_gatherv(const void* send, size_t send_count,
                                 void* recv, std::vector<size_t> recv_counts,
                                 Clock::time_point deadline) {
  Operation op;
  op.args.kind = OpKind::kAllGatherV;
  op.args.send = send;
  op.args.recv = recv;
  op.args.count = send_count;
  op.args.dtype = DType::kUInt8;
  op.args.recv_counts = std::move(recv_counts);
  op.channel = Channel::kControl;
  op.deadline = deadline;
  run(std::move(op));
}

void ControlChannel::broadcast(void* buf, size_t count, DType dtype, int root,
                               Clock::time_point deadline) {
  Operation op;
  op.args.kind = OpKind::kBroadcast;
  op.args.send = buf;
  op.args.recv = buf;
  op.args.count = count;
  op.args.dtype = dtype;
  op.args.root = root;
  op.channel = Channel::kControl;
  op.deadline = deadline;
  run(std::move(op));
}

void ControlChannel::send(const void* buf, size_t bytes, int peer, int tag,
                          Clock::time_point deadline) {
  Operation op;
  op.args.kind = OpKind::kSend;
  op.args.send = buf;
  op.args.count = bytes;
  op.args.dtype = DType::kUInt8;
  op.args.root = peer;
  op.args.tag = tag;
  op.channel = Channel::kControl;
  op.deadline = deadline;
  run(std::move(op));
}

void ControlChannel::recv(void* buf, size_t bytes, int peer, int tag,
                          Clock::time_point deadline) {
  Operation op;
  op.args.kind = OpKind::kRecv;
  op.args.recv = buf;
  op.args.count = bytes;
  op.args.dtype = DType::kUInt8;
  op.args.root = peer;
  op.args.tag = tag;
  op.channel = Channel::kControl;
  op.deadline = deadline;
  run(std::move(op));
}

void ControlChannel::fingerprint(const uint64_t* mine, uint64_t* all,
                                 size_t words, uint64_t seq,
                                 Clock::time_point deadline) {
  Operation op;
  op.args.kind = OpKind::kAllGather;
  op.args.send = mine;
  op.args.recv = all;
  op.args.count = words;
  op.args.dtype = DType::kUInt64;
  op.seq = seq;
  op.channel = Channel::kFingerprint;
  op.deadline = deadline;
  run(std::move(op));
}

void ControlChannel::abort() noexcept {
  if (own_) own_->abort();
}

}  // namespace gang::core
