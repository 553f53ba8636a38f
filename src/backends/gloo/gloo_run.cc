#include "backends/gloo/gloo_run.h"

#include <algorithm>

#include "base/copy.h"
#include "base/error.h"

namespace gang::backends::gloo_impl {

using base::copy_bytes;
using base::move_bytes;

void post_early(Transfers& t, ::gloo::transport::UnboundBuffer* b, bool send,
                int peer, uint32_t tag, size_t offset, size_t n) {
  for (size_t done = 0; done < n;) {
    const size_t c = std::min(n - done, kEarlyChunkBytes);
    const uint64_t sl = slot(kEarlyPayloadPrefix, tag, static_cast<uint32_t>(c));
    if (send) {
      t.send(b, peer, sl, offset + done, c);
    } else {
      t.recv(b, peer, sl, offset + done, c);
    }
    done += c;
  }
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto:
      return "automatic";
    case Algorithm::kDirect:
      return "direct";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kDoubling:
      return "recursive doubling";
  }
  return "unknown";
}

std::vector<int> merged(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

namespace {

// This rank's frame for a peer, `inline_out` riding in it when it fits.
Frame frame_for(const Run& r, uint64_t to_you, uint64_t from_you, const void* inline_out,
                size_t inline_len) {
  Frame f = make_frame(r.op, to_you, from_you);
  f.algorithm = static_cast<uint8_t>(r.chosen);
  if (inline_out && inline_len <= kInlineBytes) {
    f.inline_len = static_cast<uint16_t>(inline_len);
    copy_bytes(f.data, inline_out, inline_len);
  }
  return f;
}

// Fails unless every frame in `in` (from the ranks in `from`) names the
// algorithm this rank chose.
void check_algorithms(const Run& r, const std::vector<int>& from, const std::vector<Frame>& in) {
  for (size_t k = 0; k < from.size(); ++k) {
    const uint8_t theirs = in[k].algorithm;
    if (theirs != static_cast<uint8_t>(r.chosen)) {
      fail(Status::kInternal, core::op_api_name(r.a.kind), ": rank ", r.me, " chose the ",
           algorithm_name(r.chosen), " algorithm but rank ", from[k], " chose the ",
           algorithm_name(static_cast<Algorithm>(theirs)),
           " (a choice that must be made from what every rank knows)");
    }
  }
}

}  // namespace

Agreed agree(const Run& r, const std::vector<int>& partners,
             const std::vector<uint64_t>* to_you,
             const std::vector<uint64_t>* from_you,
             const std::vector<const void*>* inline_out,
             size_t inline_len, uint32_t step) {
  std::vector<Frame> out(partners.size()), in(partners.size());
  for (size_t k = 0; k < partners.size(); ++k) {
    const auto i = static_cast<size_t>(partners[k]);
    out[k] = frame_for(r, to_you ? (*to_you)[i] : 0, from_you ? (*from_you)[i] : 0,
                       inline_out ? (*inline_out)[i] : nullptr, inline_len);
  }
  exchange_frames(r.ctx, r.waits, r.op.deadline, r.tag, partners, out, in, step);
  check_algorithms(r, partners, in);
  return Agreed(partners, std::move(in));
}

Agreed agree_from_root(const Run& r, const std::vector<const void*>* inline_out,
                       size_t inline_len) {
  const bool root = r.me == r.a.root;
  const std::vector<int> to = root ? r.everyone_else() : std::vector<int>{r.right()};
  // The left's frame first: it always comes, the root's only from a root.
  std::vector<int> from = {r.left()};
  if (!root && r.left() != r.a.root) from.push_back(r.a.root);
  const Frame mine = frame_for(r, 0, 0, nullptr, 0);
  std::vector<Frame> out(to.size(), mine), in(from.size());
  if (root && inline_out) {
    for (size_t k = 0; k < to.size(); ++k) {
      out[k] = frame_for(r, 0, 0, (*inline_out)[static_cast<size_t>(to[k])], inline_len);
    }
  }
  route_frames(r.ctx, r.waits, r.op.deadline, r.tag, to, out, from, in, mine);
  check_algorithms(r, from, in);
  return Agreed(std::move(from), std::move(in));
}

Agreed::Agreed(std::vector<int> partners, std::vector<Frame> frames)
    : partners_(std::move(partners)),
      frames_(std::move(frames)),
      sorted_(std::is_sorted(partners_.begin(), partners_.end())) {}

const Frame& Agreed::from(int rank) const {
  // Partners are sorted (everyone else, merged lists), or one or two.
  const auto at = sorted_
                      ? std::lower_bound(partners_.begin(), partners_.end(), rank)
                      : std::find(partners_.begin(), partners_.end(), rank);
  if (at == partners_.end() || *at != rank) {
    fail(Status::kInternal, "gloo: no frame from rank ", rank, " in this agreement");
  }
  return frames_[static_cast<size_t>(at - partners_.begin())];
}

std::vector<const void*> same_for_all(const Run& r, const void* data) {
  return std::vector<const void*>(static_cast<size_t>(r.n), data);
}

std::vector<size_t> even_chunks(size_t count, int n) {
  std::vector<size_t> c(static_cast<size_t>(n), count / static_cast<size_t>(n));
  for (size_t i = 0; i < count % static_cast<size_t>(n); ++i) ++c[i];
  return c;
}

size_t total_of(const std::vector<size_t>& counts) {
  size_t t = 0;
  for (size_t c : counts) t += c;
  return t;
}

size_t largest_of(const std::vector<size_t>& counts) {
  size_t largest = 0;
  for (size_t c : counts) largest = std::max(largest, c);
  return largest;
}

uint8_t* place_own_block(const Run& r, const std::vector<size_t>& counts,
                         const std::vector<size_t>& offsets) {
  const size_t me = static_cast<size_t>(r.me);
  uint8_t* out = bytes_of(r.a.recv);
  if (counts[me] != 0 && r.a.send != out + offsets[me] * r.es) {
    move_bytes(out + offsets[me] * r.es, r.a.send, counts[me] * r.es);
  }
  return out;
}

uint8_t* Scratch::get(int part, size_t bytes) {
  const auto i = static_cast<size_t>(part);
  if (bytes > cap_[i]) {
    buf_[i].reset();  // the old block goes before the new one comes
    buf_[i].reset(new uint8_t[bytes]);
    cap_[i] = bytes;
  }
  return buf_[i].get();
}

}  // namespace gang::backends::gloo_impl
