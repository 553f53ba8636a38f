// libFuzzer target: the TCP store server's request reader
// (src/store/tcp_request.h), the code that reads whatever a connection
// sends before anything is authenticated or checked.
//
// The first three bytes of an input choose the limits, whether AUTH is
// required, and how the rest is cut into the pieces the server would
// receive; the rest is the byte stream. Besides the sanitizers' findings it
// checks what the server relies on:
//   - every byte handed over is used, unless a request completes or fails;
//   - no more is buffered than one request within the limits may hold;
//   - a whole request has exactly the sizes its header announced, within
//     the limits, and nothing but AUTH comes first while AUTH is required;
//   - every byte drawn from the budget is given back once the reader and
//     its requests are gone, and SETs never take the budget past its limit.
//
// Build: cmake -DGANG_BUILD_FUZZERS=ON with CXX=clang++ (see .ci/run);
// run: fuzz_store_request [-max_total_time=60] CORPUS_DIR
// tests/fuzz/corpus/store
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "store/server_memory.h"
#include "store/store_options.h"
#include "store/tcp_protocol.h"
#include "store/tcp_request.h"

namespace {

using gang::store::Budget;
using gang::store::Limits;
using gang::store::tcp::Op;
using gang::store::tcp::RequestReader;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_store_request: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  Limits limits;
  // Small limits, so that bodies complete and every refusal is reachable.
  limits.max_key_bytes = 1 + data[0] % 64;
  limits.max_value_bytes = (data[1] & 0x7f) * 64;
  limits.max_request_bytes = 1 + (data[1] >> 7 ? 256 : 8192);
  limits.max_total_bytes = 4096 + size_t{data[2]} * 64;
  const bool need_auth = data[0] & 0x80;
  // Pieces of 1 to 64 bytes, or everything at once.
  const size_t piece = data[2] & 0x40 ? size : 1 + (data[2] & 0x3f);
  data += 3;
  size -= 3;

  const size_t most =
      gang::store::tcp::kRequestHeaderBytes + limits.max_request_bytes;
  Budget budget(limits.max_total_bytes);
  {
    RequestReader reader(limits, &budget);
    reader.require_auth(need_auth);
    bool authenticated = !need_auth;
    size_t pos = 0;
    while (pos < size) {
      const size_t n = size - pos < piece ? size - pos : piece;
      size_t used = 0;
      const RequestReader::Result r = reader.feed(data + pos, n, &used);
      if (used > n) broken("used more bytes than it was given");
      pos += used;
      if (reader.buffered() > most) broken("buffered past the limits");
      if (reader.wanted() == 0) broken("wants nothing");
      if (r == RequestReader::Result::kNeedMore) {
        if (used != n) broken("needs more but left bytes unused");
        continue;
      }
      if (r != RequestReader::Result::kRequest) {
        if (reader.why().empty()) broken("an error without a reason");
        if (r == RequestReader::Result::kUnauthenticated && authenticated) {
          broken("unauthenticated after AUTH");
        }
        break;  // the server closes the connection
      }
      gang::store::tcp::Request req = reader.take();
      if (!authenticated && req.op != Op::kAuth)
        broken("a request before AUTH");
      if (req.op == Op::kAuth) {
        authenticated = true;
        reader.require_auth(false);
      } else if (req.key.size() > limits.max_key_bytes) {
        broken("a key over the limit");
      }
      if (req.value.size() > limits.max_value_bytes) {
        broken("a value over the limit");
      }
      if (req.key.size() + req.value.size() > limits.max_request_bytes) {
        broken("a request over the limit");
      }
      if (req.op == Op::kAdd && req.value.size() != 8)
        broken("ADD without 8 bytes");
      if (req.op == Op::kSet && budget.held() > budget.limit()) {
        broken("a SET past the total limit");
      }
      if (reader.in_request()) broken("still in a request after take()");
    }
  }
  if (budget.held() != 0)
    broken("bytes drawn from the budget were not given back");

  // The client's reply decoder sees bytes from the server: the same input,
  // read as a reply header to each op, must never be accepted with a length
  // past the protocol's limits.
  if (size >= gang::store::tcp::kReplyHeaderBytes) {
    for (int op = 1; op <= 8; ++op) {
      gang::store::tcp::ReplyHeader h;
      if (gang::store::tcp::decode_reply(static_cast<Op>(op), data, &h) ==
              nullptr &&
          h.value_len > gang::store::kMaxValueBytes) {
        broken("a reply longer than any value accepted");
      }
    }
  }
  return 0;
}
