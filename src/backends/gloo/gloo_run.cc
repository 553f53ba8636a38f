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
  }
  return "unknown";
}

std::vector<int> merged(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

std::vector<Frame> agree(const Run& r, const std::vector<int>& partners,
                         const std::vector<uint64_t>* to_you,
                         const std::vector<uint64_t>* from_you,
                         const std::vector<const void*>* inline_out,
                         size_t inline_len) {
  std::vector<Frame> out(static_cast<size_t>(r.n)), in(static_cast<size_t>(r.n));
  for (int p : partners) {
    const auto i = static_cast<size_t>(p);
    out[i] = make_frame(r.op, to_you ? (*to_you)[i] : 0,
                        from_you ? (*from_you)[i] : 0);
    out[i].algorithm = static_cast<uint8_t>(r.chosen);
    if (inline_out && (*inline_out)[i] && inline_len <= kInlineBytes) {
      out[i].inline_len = static_cast<uint16_t>(inline_len);
      copy_bytes(out[i].data, (*inline_out)[i], inline_len);
    }
  }
  exchange_frames(r.ctx, r.waits, r.op.deadline, r.tag, partners, out, in);
  for (int p : partners) {
    const uint8_t theirs = in[static_cast<size_t>(p)].algorithm;
    if (theirs != static_cast<uint8_t>(r.chosen)) {
      fail(Status::kInternal, core::op_api_name(r.a.kind), ": rank ", r.me, " chose the ",
           algorithm_name(r.chosen), " algorithm but rank ", p, " chose the ",
           algorithm_name(static_cast<Algorithm>(theirs)),
           " (a choice that must be made from what every rank knows)");
    }
  }
  return in;
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
