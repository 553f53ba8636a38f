// The wire protocols of PyTorch's TCPStore (torch.distributed.TCPStore), as
// a client speaks them: which bytes gang sends, nothing about sockets (that
// is torch_store.cc).
//
// Every request is a query-type byte followed by its arguments. Integers are
// little-endian (PyTorch writes them in host order, which is little-endian
// on every platform it supports; gang writes them little-endian explicitly).
// A string or value is a u64 length and its bytes. Two generations are in
// use, and they number their query types differently:
//
//   query        1.x-2.0  2.1  2.2+  arguments           reply
//   VALIDATE        -      -     0   u32 magic           (none)
//   SET             0      0     1   key, value          (none)
//   GET             2      2     3   key                 value
//   ADD             3      3     4   key, i64 delta      i64 sum
//   CHECK           4      4     5   u64 n, n keys       u8: 0 all exist, 1 not
//   WAIT            5      5     6   u64 n, n keys       u8 0 once all exist
//   GETNUMKEYS      6      6     7   -                   i64 number of keys
//   DELETE_KEY      8      7     8   key                 i64 number deleted
//   CANCEL_WAIT     -     11    12   -                   u8 1 (after any 0)
//
// (1.x and 2.0 have WATCH_KEY at 7; 2.1 dropped it, shifting DELETE_KEY.)
//
// Current generation (PyTorch 2.2 and later): a connection's first request
// must be VALIDATE with the magic number 0x3C85F7CE, which has no reply.
// The classic server closes a connection that starts with anything else;
// the libuv server (the default since 2.4) silently ignores it and never
// answers on that connection. The libuv server answers GET of a missing key
// with an empty value, takes keys of at most 8 KiB and values of at most
// 8 MiB, and closes the connection on anything it cannot parse.
//
// Legacy generation (PyTorch 1.x to 2.1): no handshake. The server closes a
// connection on anything it does not expect (an unknown type byte, GET of a
// missing key, ADD on a value that is not an integer). Its reads block its
// only thread until a request is complete, and it allocates a string's
// length before reading it, so a client must never send it a request of
// another generation whose bytes it would read as a huge string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gang::store::torch_wire {

using Bytes = std::vector<uint8_t>;

enum class Generation {
  kLegacy,   // PyTorch 1.x to 2.1
  kCurrent,  // PyTorch 2.2 and later
};

// "PyTorch 2.2 and later (validation handshake)", "PyTorch 1.x to 2.1".
const char* generation_name(Generation g);

// The queries gang sends.
enum class Query {
  kSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kGetNumKeys,
  kDeleteKey,
  kCancelWait,
};

// The type byte of q in generation g. For kDeleteKey in the legacy
// generation, which depends on the version, ask legacy_delete_key().
uint8_t query_type(Generation g, Query q);

// DELETE_KEY's type byte in 1.x-2.0 (with_watch_key) or 2.1.
inline uint8_t legacy_delete_key(bool with_watch_key) {
  return with_watch_key ? 8 : 7;
}

constexpr uint8_t kCheckReady = 0;
constexpr uint8_t kCheckNotReady = 1;
constexpr uint8_t kStopWaiting = 0;
constexpr uint8_t kWaitCanceled = 1;

// The libuv server's limits: it closes the connection on a longer key or
// value.
constexpr size_t kCurrentMaxKeyBytes = 8 * 1024;
constexpr size_t kCurrentMaxValueBytes = 8 * 1024 * 1024;

void put_u64(Bytes* out, uint64_t v);
void put_string(Bytes* out, const std::string& s);
uint64_t get_u64(const uint8_t* p);

// A request of one key: SET (followed by the value), GET, ADD (followed by
// the delta), DELETE_KEY; CHECK and WAIT of that one key.
Bytes request(Generation g, Query q, const std::string& wire_key);
// A request of no arguments: GETNUMKEYS, CANCEL_WAIT.
Bytes request(Generation g, Query q);

// What a connection of the current generation sends before its first
// request.
Bytes validate();

// Opening a store asks the current generation first: the handshake, two
// GETNUMKEYS and a CHECK of 128 copies of `wire_key`. A current server
// answers with two i64 and a CHECK byte (kCurrentProbeReplyBytes in all).
// A legacy server reads the handshake's type byte as SET and the next 8
// bytes as the key's length: the magic and the 4 bytes that follow it,
// chosen here (GETNUMKEYS, GETNUMKEYS, CHECK and the count's low byte 0x80)
// so that length is at least 2^63, which std::vector refuses before
// allocating anything. The server then drops the connection, at once and
// harmlessly, and gang asks again in the legacy generation.
Bytes current_probe(const std::string& wire_key);
constexpr size_t kCurrentProbeReplyBytes = 8 + 8 + 1;

// Asked when the current probe found no current server: a CHECK of
// wire_key, answered by one CHECK byte. (The libuv server would ignore it,
// which is why it is not asked first.)
Bytes legacy_probe(const std::string& wire_key);

// Tells 1.x-2.0 from 2.1 (which number DELETE_KEY differently), asked the
// first time a legacy store deletes a key: type 9 with a u64 0, then a
// CHECK of wire_key. 2.1 reads MULTI_GET of no keys (no reply) and answers
// the CHECK; 1.x and 2.0 know no type 9 and drop the connection.
Bytes legacy_dialect_probe(const std::string& wire_key);

}  // namespace gang::store::torch_wire
