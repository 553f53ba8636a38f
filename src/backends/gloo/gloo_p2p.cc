#include "backends/gloo/gloo_p2p.h"

#include <chrono>
#include <cstring>

#include "backends/gloo/gloo_errors.h"
#include "backends/gloo/gloo_view.h"
#include "base/copy.h"
#include "base/error.h"
#include "core/collective.h"

namespace gang::backends::gloo_impl {

namespace {

using base::copy_bytes;
using core::DType;
using core::OpKind;
using Millis = std::chrono::milliseconds;

// Slot prefixes of point-to-point traffic, the user's and the core's
// control channel's apart (the collectives' are in gloo_run.h): a user's
// tag never meets a collective's sequence number.
constexpr uint8_t kP2PPayloadPrefix = 0x40;
constexpr uint8_t kControlP2PPayloadPrefix = 0x43;
constexpr uint8_t kP2PFramePrefix = 0x46;
constexpr uint8_t kControlP2PFramePrefix = 0x47;

}  // namespace

GlooP2PWork::GlooP2PWork(std::shared_ptr<::gloo::Context> ctx,
                         std::shared_ptr<Waits> waits,
                         const core::Operation& op)
    : ctx_(std::move(ctx)),
      is_send_(op.args.kind == OpKind::kSend),
      peer_(op.args.root),
      tag_(op.args.tag),
      channel_(op.channel),
      dtype_(op.args.dtype),
      count_(op.args.count),
      bytes_(op.args.count * core::dtype_size(op.args.dtype)),
      data_(is_send_ ? const_cast<void*>(op.args.send) : op.args.recv),
      deadline_(op.deadline),
      waits_(std::move(waits)),
      frame_(new uint8_t[sizeof(Frame)]) {
  const bool control = channel_ == core::Channel::kControl;
  const uint64_t tag = static_cast<uint32_t>(tag_);
  const uint64_t frame_slot =
      (uint64_t{control ? kControlP2PFramePrefix : kP2PFramePrefix} << 56) | tag;
  const uint64_t payload_prefix =
      uint64_t{control ? kControlP2PPayloadPrefix : kP2PPayloadPrefix} << 56;
  try {
    frame_buf_ = std::make_unique<WaitableBuffer>(ctx_, waits_, frame_.get(),
                                                  sizeof(Frame));
    if (is_send_) {
      Frame f = make_frame(op, bytes_, 0);
      if (bytes_ <= kInlineBytes) {
        f.inline_len = static_cast<uint16_t>(bytes_);
        copy_bytes(f.data, data_, bytes_);
      }
      std::memcpy(frame_.get(), &f, sizeof f);
      (*frame_buf_)->send(peer_, frame_slot);
    } else {
      (*frame_buf_)->recv(peer_, frame_slot);
    }
    if (bytes_ > kInlineBytes) {
      payload_buf_ = std::make_unique<WaitableBuffer>(ctx_, waits_, data_, bytes_);
      // Chunks of kChunkBytes, then one per set bit of the rest, largest
      // first, each on a slot that names its size (as a power of two): a
      // chunk only ever meets a receive of its own size, even between ranks
      // that disagree on the count, where a longer message than the receive
      // would make Gloo abort the process; the frame reports the
      // disagreement.
      size_t off = 0;
      auto post = [&](size_t n, unsigned log2) {
        const uint64_t sl = payload_prefix | (uint64_t{log2} << 31) | tag;
        if (is_send_) {
          (*payload_buf_)->send(peer_, sl, off, n);
        } else {
          (*payload_buf_)->recv(peer_, sl, off, n);
        }
        off += n;
        ++chunks_;
      };
      while (bytes_ - off >= kChunkBytes) post(kChunkBytes, kChunkLog2);
      for (unsigned b = kChunkLog2; b-- > 0;) {
        if (((bytes_ - off) >> b) & 1) post(size_t{1} << b, b);
      }
    }
  } catch (const ::gloo::Exception& e) {
    rethrow_gloo(e, deadline_, waits_->aborted(), *ctx_, peer_);
  }
}

GlooP2PWork::~GlooP2PWork() {
  if (waiter_.joinable()) waiter_.join();
  // A transfer that never completed (failed, or never waited for) closes
  // its connection before its buffers go (gloo_view.h).
  bool completed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    completed = done_ && status_ == Status::kOk;
  }
  if (!completed && frame_buf_) {
    if (View* view = as_view(*ctx_)) view->fence({peer_});
  }
}

void GlooP2PWork::check_received_frame() {
  Frame theirs;
  std::memcpy(&theirs, frame_.get(), sizeof theirs);
  core::Operation expected;
  expected.args.kind = OpKind::kSend;
  expected.args.dtype = dtype_;
  expected.args.count = count_;
  expected.args.tag = tag_;
  expected.channel = channel_;
  const Frame want = make_frame(expected, bytes_, 0);
  if (!theirs.sig.same(want.sig) || theirs.to_you != want.to_you ||
      theirs.channel != want.channel) {
    const bool sane = theirs.sig.kind == want.sig.kind &&
                      theirs.sig.dtype <= static_cast<uint8_t>(core::kLastDType);
    fail(Status::kMismatch, "gang_recv: rank ", ctx_->rank, " receives ",
         count_, " x ", core::dtype_name(dtype_), " from rank ", peer_,
         " with tag ", tag_, ", but rank ", peer_,
         sane ? str_cat(" sent ", theirs.sig.count, " x ",
                        core::dtype_name(static_cast<DType>(theirs.sig.dtype)))
              : std::string(" sent something else"));
  }
  if (bytes_ <= kInlineBytes && bytes_ != 0) {
    copy_bytes(data_, theirs.data, bytes_);
  }
}

void GlooP2PWork::await() {
  Status status = Status::kOk;
  std::string what;
  try {
    try {
      auto left = [this] {
        const auto l = std::chrono::duration_cast<Millis>(
            deadline_ - core::Clock::now());
        if (l.count() <= 0) {
          throw core::timed_out(text(rank_list({peer_}), " (the deadline passed)"));
        }
        return l;
      };
      const bool frame_ok = is_send_ ? (*frame_buf_)->waitSend(left())
                                     : (*frame_buf_)->waitRecv(left());
      if (!frame_ok) fail(Status::kAborted, "the gang was aborted");
      if (!is_send_) check_received_frame();
      for (size_t i = 0; i < chunks_; ++i) {
        const bool ok = is_send_ ? (*payload_buf_)->waitSend(left())
                                 : (*payload_buf_)->waitRecv(left());
        if (!ok) fail(Status::kAborted, "the transfer was aborted");
      }
    } catch (const ::gloo::Exception& e) {
      rethrow_gloo(e, deadline_, waits_->aborted(), *ctx_, peer_);
    }
  } catch (const Error& e) {
    status = e.status();
    what = e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  status_ = status;
  what_ = what;
  cv_.notify_all();
}

bool GlooP2PWork::outcome_locked() {
  if (!done_) return false;
  if (status_ != Status::kOk) throw Error(status_, what_);
  return true;
}

bool GlooP2PWork::test() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!claimed_) {
    claimed_ = true;
    waiter_ = std::thread([this] { await(); });
  }
  return outcome_locked();
}

bool GlooP2PWork::wait(core::Clock::time_point until) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!claimed_) {
    claimed_ = true;
    if (until >= deadline_) {
      // Nothing to give up before the deadline: wait right here.
      lock.unlock();
      await();
      lock.lock();
      return outcome_locked();
    }
    waiter_ = std::thread([this] { await(); });
  }
  cv_.wait_until(lock, until, [this] { return done_; });
  return outcome_locked();
}

}  // namespace gang::backends::gloo_impl
