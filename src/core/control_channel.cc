#include "core/control_channel.h"

#include <thread>

#include "store/store.h"

namespace gang::core {

namespace {

// One control operation: `count` elements of dtype between send and recv.
Operation control_op(OpKind kind, const void* send, void* recv, size_t count,
                     DType dtype, Clock::time_point deadline) {
  Operation op;
  op.args.kind = kind;
  op.args.send = send;
  op.args.recv = recv;
  op.args.count = count;
  op.args.dtype = dtype;
  op.channel = Channel::kControl;
  op.deadline = deadline;
  return op;
}

}  // namespace

void ControlChannel::run(Operation op) {
  if (op.channel != Channel::kFingerprint && !is_p2p(op.args.kind)) {
    op.seq = seq_.fetch_add(1);
  }
  BackendWorkPtr work = post_to(*host_, op, size_);
  if (work && !work->wait(op.deadline + base::kDeadlineSlack)) {
    throw timed_out(text("the other ranks (the core's control traffic did not end before "
                         "the deadline)"));
  }
}

void ControlChannel::barrier(Clock::time_point deadline) {
  run(control_op(OpKind::kBarrier, nullptr, nullptr, 0, DType::kUInt8,
                 deadline));
}

std::vector<uint64_t> ControlChannel::all_gather_words(
    uint64_t mine, int size, Clock::time_point deadline) {
  std::vector<uint64_t> all(static_cast<size_t>(size));
  all_gather(&mine, all.data(), 1, DType::kUInt64, deadline);
  return all;
}

void ControlChannel::all_gather(const void* send, void* recv, size_t count,
                                DType dtype, Clock::time_point deadline) {
  run(control_op(OpKind::kAllGather, send, recv, count, dtype, deadline));
}

void ControlChannel::all_gatherv(const void* send, size_t send_count,
                                 void* recv, std::vector<size_t> recv_counts,
                                 Clock::time_point deadline) {
  Operation op = control_op(OpKind::kAllGatherV, send, recv, send_count,
                            DType::kUInt8, deadline);
  op.args.recv_counts = std::move(recv_counts);
  run(std::move(op));
}

void ControlChannel::broadcast(void* buf, size_t count, DType dtype, int root,
                               Clock::time_point deadline) {
  Operation op =
      control_op(OpKind::kBroadcast, buf, buf, count, dtype, deadline);
  op.args.root = root;
  run(std::move(op));
}

void ControlChannel::send(const void* buf, size_t bytes, int peer, int tag,
                          Clock::time_point deadline) {
  Operation op =
      control_op(OpKind::kSend, buf, nullptr, bytes, DType::kUInt8, deadline);
  op.args.root = peer;
  op.args.tag = tag;
  run(std::move(op));
}

void ControlChannel::recv(void* buf, size_t bytes, int peer, int tag,
                          Clock::time_point deadline) {
  Operation op =
      control_op(OpKind::kRecv, nullptr, buf, bytes, DType::kUInt8, deadline);
  op.args.root = peer;
  op.args.tag = tag;
  run(std::move(op));
}

void ControlChannel::fingerprint(const uint64_t* mine, uint64_t* all,
                                 size_t words, uint64_t seq,
                                 Clock::time_point deadline) {
  Operation op = control_op(OpKind::kAllGather, mine, all, words,
                            DType::kUInt64, deadline);
  op.seq = seq;
  op.channel = Channel::kFingerprint;
  run(std::move(op));
}

void ControlChannel::abort() noexcept {
  if (own_) own_->abort();
}

namespace {
const char kNoticeKey[] = "failed";
// In the job's store, beside every gang's keys ("gang/<name>/..."), never
// one of them: the notices posted in the job, counted.
const char kFailuresKey[] = "gang/failures";
// How long one look at the board or the count may wait for the store.
constexpr Millis kNoticeLook{20};
}  // namespace

void ControlChannel::set_notice_board(std::shared_ptr<store::Store> board,
                                      std::shared_ptr<store::Store> job) {
  board_ = std::move(board);
  job_ = std::move(job);
  try {
    job_->add(kFailuresKey, 0);
  } catch (...) {
    // The reads of a count that is missing find nothing, a little slower.
  }
}

void ControlChannel::post_failure(const std::string& message) noexcept {
  if (!board_) return;
  try {
    std::thread([board = board_, job = job_, message] {
      try {
        // The notice first: whoever sees the count move finds it.
        board->set(kNoticeKey, store::Bytes(message.begin(), message.end()));
        job->add(kFailuresKey, 1);
      } catch (...) {
        // The store is gone too: the peers' operations fail on their own.
      }
    }).detach();
  } catch (...) {
    // No thread to spare: the peers find out from their own operations.
  }
}

bool ControlChannel::peer_failure(std::string* message) noexcept {
  if (!board_) return false;
  try {
    const store::Bytes said = board_->get(kNoticeKey, kNoticeLook);
    message->assign(said.begin(), said.end());
    return true;
  } catch (...) {
    return false;  // no notice yet (a timeout), or no store to ask
  }
}

bool ControlChannel::failures_posted(store::Store& job,
                                     std::string* count) noexcept {
  try {
    const store::Bytes said = job.get(kFailuresKey, kNoticeLook);
    count->assign(said.begin(), said.end());
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace gang::core
