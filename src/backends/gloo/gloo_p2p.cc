#include "backends/gloo/gloo_p2p.h"

#include <chrono>
#include <algorithm>
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

uint64_t AnyOrder::any_posted(Key key) {
  std::lock_guard<std::mutex> lock(mu_);
  State& st = states_[key];
  const uint64_t ticket = st.next_ticket++;
  st.waiting.push_back(ticket);
  return ticket;
}

// A key is in states_ only while a receive from any peer with it waits or
// a named one is held back: every other receive posts at once, with no
// entry made, and a job that uses many tags keeps none of them here.
void AnyOrder::named(Key key, uint64_t id, std::function<void()> post) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(key);
  if (it == states_.end()) {
    post();
    return;
  }
  it->second.held.push_back({id, it->second.next_ticket, std::move(post)});
}

void AnyOrder::withdraw(Key key, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(key);
  if (it == states_.end()) return;
  auto& held = it->second.held;
  held.erase(std::remove_if(held.begin(), held.end(),
                            [id](const State::Held& h) { return h.id == id; }),
             held.end());
  forget_if_idle_locked(it);
}

void AnyOrder::forget_if_idle_locked(std::map<Key, State>::iterator it) {
  if (it->second.waiting.empty() && it->second.held.empty()) states_.erase(it);
}

void AnyOrder::settle_locked(State& st, uint64_t ticket) {
  st.waiting.erase(std::remove(st.waiting.begin(), st.waiting.end(), ticket),
                   st.waiting.end());
  // A held receive goes once every receive from any peer posted before it
  // has its message; later ones it precedes.
  while (!st.held.empty() &&
         (st.waiting.empty() || st.waiting.front() >= st.held.front().before)) {
    std::function<void()> post = std::move(st.held.front().post);
    st.held.pop_front();
    post();
  }
}

bool AnyOrder::framed(Key key, uint64_t ticket, const std::function<void()>& post_payload,
                      std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto it = states_.find(key);  // there: this receive's ticket waits
  State& st = it->second;
  const bool turn = cv_.wait_until(lock, until, [&] {
    return !st.waiting.empty() && st.waiting.front() == ticket;
  });
  if (turn) {
    try {
      post_payload();
    } catch (...) {
      settle_locked(st, ticket);
      forget_if_idle_locked(it);
      cv_.notify_all();
      throw;
    }
  }
  settle_locked(st, ticket);
  forget_if_idle_locked(it);
  cv_.notify_all();
  return turn;
}

void AnyOrder::gave_up(Key key, uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(key);
  if (it == states_.end()) return;
  settle_locked(it->second, ticket);
  forget_if_idle_locked(it);
  cv_.notify_all();
}

GlooP2PWork::GlooP2PWork(std::shared_ptr<::gloo::Context> ctx,
                         std::shared_ptr<Waits> waits, std::shared_ptr<AnyOrder> order,
                         const core::Operation& op)
    : ctx_(std::move(ctx)),
      is_send_(op.args.kind == OpKind::kSend),
      any_(!is_send_ && op.args.root == core::kAnySource),
      peer_(op.args.root),
      source_(op.args.source),
      tag_(op.args.tag),
      channel_(op.channel),
      dtype_(op.args.dtype),
      count_(op.args.count),
      bytes_(op.args.count * core::dtype_size(op.args.dtype)),
      data_(is_send_ ? const_cast<void*>(op.args.send) : op.args.recv),
      deadline_(op.deadline),
      waits_(std::move(waits)),
      order_(std::move(order)),
      order_key_(AnyOrder::key(static_cast<int>(op.channel), op.args.tag)),
      frame_(new uint8_t[sizeof(Frame)]) {
  const bool control = channel_ == core::Channel::kControl;
  const uint64_t tag = static_cast<uint32_t>(tag_);
  frame_slot_ = (uint64_t{control ? kControlP2PFramePrefix : kP2PFramePrefix} << 56) | tag;
  payload_prefix_ = uint64_t{control ? kControlP2PPayloadPrefix : kP2PPayloadPrefix} << 56;
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
      (*frame_buf_)->send(peer_, frame_slot_);
      post_payload();
    } else if (peer_ == core::kAnySource) {
      // From whichever rank's frame comes first (Gloo gives one sender's
      // frames in order, and receives from any peer in the order they were
      // posted); its payload once the frame names the sender, in turn
      // (AnyOrder). Its own thread waits for the frame from the start:
      // named receives may be held back behind it, whoever waits on them.
      ticket_ = order_->any_posted(order_key_);
      std::vector<int> others;
      for (int r = 0; r < ctx_->size; ++r) {
        if (r != ctx_->rank) others.push_back(r);
      }
      try {
        (*frame_buf_)->recv(others, frame_slot_);
      } catch (...) {
        order_->gave_up(order_key_, ticket_);
        throw;
      }
      std::lock_guard<std::mutex> lock(mu_);
      claimed_ = true;
      waiter_ = std::thread([this] { await(); });
    } else {
      order_id_ = order_->next_id();
      order_->named(order_key_, order_id_, [this] { post_frame_and_payload(); });
      std::lock_guard<std::mutex> lock(mu_);
      if (post_error_) std::rethrow_exception(post_error_);
    }
  } catch (const ::gloo::Exception& e) {
    rethrow_gloo(e, deadline_, waits_->aborted(), *ctx_, peer_);
  }
}

// A named receive's transfers, now or once the receives from any peer
// before it have their messages (AnyOrder). Gloo's errors are kept for
// await: this may run on another receive's thread.
void GlooP2PWork::post_frame_and_payload() {
  std::exception_ptr error;
  try {
    (*frame_buf_)->recv(peer_, frame_slot_);
    post_payload();
  } catch (...) {
    error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  posted_ = true;
  post_error_ = error;
  cv_.notify_all();
}

// Chunks of kChunkBytes, then one per set bit of the rest, largest first,
// each on a slot that names its size (as a power of two): a chunk only ever
// meets a receive of its own size, even between ranks that disagree on the
// count, where a longer message than the receive would make Gloo abort the
// process; the frame reports the disagreement.
void GlooP2PWork::post_payload() {
  if (bytes_ <= kInlineBytes) return;
  const uint64_t tag = static_cast<uint32_t>(tag_);
  payload_buf_ = std::make_unique<WaitableBuffer>(ctx_, waits_, data_, bytes_);
  size_t off = 0;
  auto post = [&](size_t n, unsigned log2) {
    const uint64_t sl = payload_prefix_ | (uint64_t{log2} << 31) | tag;
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

GlooP2PWork::~GlooP2PWork() {
  if (waiter_.joinable()) waiter_.join();
  // A transfer that never completed (failed, or never waited for) closes
  // its connection before its buffers go (gloo_view.h).
  bool completed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    completed = done_ && status_ == Status::kOk;
  }
  if (!is_send_ && !any_) {
    order_->withdraw(order_key_, order_id_);  // a post not made is never made now
    std::lock_guard<std::mutex> lock(mu_);
    if (!posted_) return;  // nothing was posted: nothing to fence
  }
  if (!completed && frame_buf_) {
    if (View* view = as_view(*ctx_)) {
      if (peer_ != core::kAnySource) {
        view->fence({peer_});
      } else {  // a frame receive posted to every other rank
        std::vector<int> others;
        for (int r = 0; r < ctx_->size; ++r) {
          if (r != ctx_->rank) others.push_back(r);
        }
        view->fence(others);
      }
    }
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
      bool frame_ok;
      if (is_send_) {
        frame_ok = (*frame_buf_)->waitSend(left());
      } else if (any_) {
        int sender = -1;
        try {
          frame_ok = (*frame_buf_)->waitRecv(&sender, left());
          if (frame_ok) {
            // Gloo names the mesh's rank; the gang's is what counts here.
            if (View* view = as_view(*ctx_)) sender = view->view_rank(sender);
            if (sender < 0 || sender >= ctx_->size) {
              fail(Status::kInternal, "gang_recv_any: a frame from a rank outside the gang");
            }
            {
              std::lock_guard<std::mutex> lock(mu_);
              peer_ = sender;
            }
            // Its payload only once the frame says it is the message
            // asked for (a payload of another size would never match).
            check_received_frame();
          }
        } catch (...) {
          order_->gave_up(order_key_, ticket_);
          throw;
        }
        if (frame_ok &&
            !order_->framed(order_key_, ticket_, [this] { post_payload(); }, deadline_)) {
          throw core::timed_out(text(rank_list({peer_}), " (its payload's turn did not come "
                                                         "before the deadline)"));
        }
        if (!frame_ok) order_->gave_up(order_key_, ticket_);
      } else {
        {
          // A named receive held back behind receives from any peer.
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_until(lock, deadline_, [this] { return posted_; })) {
            lock.unlock();
            throw core::timed_out(text(rank_list({peer_}), " (the receive waited behind "
                                                           "receives from any rank)"));
          }
          if (post_error_) std::rethrow_exception(post_error_);
        }
        frame_ok = (*frame_buf_)->waitRecv(left());
        if (frame_ok) check_received_frame();
      }
      if (!frame_ok) fail(Status::kAborted, "the gang was aborted");
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
  if (status == Status::kOk && source_ != nullptr) *source_ = peer_;
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
