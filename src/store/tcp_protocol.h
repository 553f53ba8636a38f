// The TCP store's wire format, shared by client and server.
//
// A request is one frame, integers little-endian:
//
//   offset  size  field
//        0     2  magic "gS"
//        2     1  version (kVersion)
//        3     1  op (Op)
//        4     4  key length    (at most kMaxKeyBytes)
//        8     8  value length  (at most kMaxValueBytes)
//       16        key bytes, then value bytes
//
// The server answers every request with one reply, in order:
//
//        0     2  magic "gR"
//        2     1  version
//        3     1  status (Reply)
//        4     8  value length
//       12        value bytes
//
// The magic and version make a client that reached something else (another
// program on the port, a server of another version) fail at its first reply
// rather than misread it. The server closes a connection whose frame breaks
// any rule below and keeps serving the others.
//
// Authentication: a server started with a token takes nothing but AUTH as a
// connection's first request, and the token as its key. A right token is
// answered kOk and the connection serves from then on; a wrong one, or any
// other first request, is answered kDenied and the connection closed. A
// client with a token sends AUTH first on every connection it opens (it may
// send its first request right behind it). A server without a token answers
// AUTH kOk whatever the token, so clients and servers of this version work
// together whichever of them has one; a server of the version before AUTH
// closes the connection. A server without a token answers kDenied, before
// it reads anything, a connection from a process of another user of its
// machine (store_options.h, AllowedUsers).
//
// Limits: a request over one of the server's limits (key, value or request
// size, the bytes it holds in all) is answered kRefused with a message
// saying which, and its connection closed; the frame itself is well formed.
//
// Busy: a server that cannot take a connection now (as many authenticated
// connections as it allows, or more waiting to authenticate than it keeps)
// answers kBusy with a message and closes it, having carried out none of its
// requests; the client may connect again. Servers before kBusy said
// kRefused instead.
#pragma once

#include <cstddef>
#include <cstdint>

#include "store/store_options.h"

namespace gang::store::tcp {

constexpr uint8_t kRequestMagic[2] = {'g', 'S'};
constexpr uint8_t kReplyMagic[2] = {'g', 'R'};
constexpr uint8_t kVersion = 1;
constexpr size_t kRequestHeaderBytes = 16;
constexpr size_t kReplyHeaderBytes = 12;
// An error reply carries a message, never a value.
constexpr size_t kMaxMessageBytes = 64 * 1024;

enum class Op : uint8_t {
  kSet = 1,     // key, value          -> kOk
  kGet = 2,     // key                 -> kOk + value, once the key exists
  kAdd = 3,     // key, i64 delta (8)  -> kOk + i64 sum (8) | kBadAdd + message
  kWait = 4,    // key                 -> kOk, once the key exists
  kDelete = 5,  // key                 -> kOk
  kCheck = 6,   // key                 -> kOk if it exists, else kMissing
  kPing = 7,    // (nothing)           -> kOk
  kAuth = 8,    // key: the token      -> kOk | kDenied + message
};

enum class Reply : uint8_t {
  kOk = 0,
  kMissing = 1,  // kCheck only
  kBadAdd = 2,   // kAdd only: the stored value is not an integer, or overflow
  // Any op, with a message; the server closes the connection after it.
  kDenied = 3,   // no token, a wrong one, or another user's process
  kRefused = 4,  // over a limit of the server's
  kBusy = 5,     // no room for the connection now; nothing was done
};

// GET and WAIT park on the server until the key is set; only the client's
// timeout ends them, by closing its connection. One WAIT names one key: a
// client waits for several in turn, which is as fast for keys already there
// and lets it name the key that never came.

struct RequestHeader {
  uint8_t version = kVersion;
  Op op = Op::kPing;
  uint32_t key_len = 0;
  uint64_t value_len = 0;
};

struct ReplyHeader {
  uint8_t version = kVersion;
  Reply status = Reply::kOk;
  uint64_t value_len = 0;
};

inline void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}
inline uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

inline void encode_request(const RequestHeader& h,
                           uint8_t out[kRequestHeaderBytes]) {
  out[0] = kRequestMagic[0];
  out[1] = kRequestMagic[1];
  out[2] = h.version;
  out[3] = static_cast<uint8_t>(h.op);
  put_u32(out + 4, h.key_len);
  put_u64(out + 8, h.value_len);
}

// Decodes and checks a request header; returns why it is malformed, or
// nullptr when it is a frame the server may read on.
inline const char* decode_request(const uint8_t in[kRequestHeaderBytes],
                                  RequestHeader* h) {
  if (in[0] != kRequestMagic[0] || in[1] != kRequestMagic[1]) {
    return "bad magic";
  }
  h->version = in[2];
  h->op = static_cast<Op>(in[3]);
  h->key_len = get_u32(in + 4);
  h->value_len = get_u64(in + 8);
  if (h->version != kVersion) return "unsupported version";
  if (h->key_len > kMaxKeyBytes) return "key over the limit";
  if (h->value_len > kMaxValueBytes) return "value over the limit";
  const bool has_key = h->key_len > 0;
  switch (h->op) {
    case Op::kSet:
      return has_key ? nullptr : "SET without a key";
    case Op::kAdd:
      if (!has_key) return "ADD without a key";
      return h->value_len == 8 ? nullptr : "ADD delta is not 8 bytes";
    case Op::kGet:
    case Op::kWait:
    case Op::kDelete:
    case Op::kCheck:
      if (!has_key) return "request without a key";
      return h->value_len == 0 ? nullptr : "unexpected value";
    case Op::kPing:
      return !has_key && h->value_len == 0 ? nullptr : "PING with a payload";
    case Op::kAuth:
      if (!has_key) return "AUTH without a token";
      if (h->key_len > kMaxTokenBytes) return "AUTH token over the limit";
      return h->value_len == 0 ? nullptr : "AUTH with a value";
  }
  return "unknown op";
}

inline void encode_reply(const ReplyHeader& h, uint8_t out[kReplyHeaderBytes]) {
  out[0] = kReplyMagic[0];
  out[1] = kReplyMagic[1];
  out[2] = h.version;
  out[3] = static_cast<uint8_t>(h.status);
  put_u64(out + 4, h.value_len);
}

// Decodes a reply header and checks it answers `op`; returns why not, or
// nullptr.
inline const char* decode_reply(Op op, const uint8_t in[kReplyHeaderBytes],
                                ReplyHeader* h) {
  if (in[0] != kReplyMagic[0] || in[1] != kReplyMagic[1]) return "bad magic";
  h->version = in[2];
  h->status = static_cast<Reply>(in[3]);
  h->value_len = get_u64(in + 4);
  if (h->version != kVersion) return "unsupported version";
  if (h->status == Reply::kDenied || h->status == Reply::kRefused ||
      h->status == Reply::kBusy) {
    return h->value_len <= kMaxMessageBytes ? nullptr : "message too long";
  }
  const bool ok = h->status == Reply::kOk;
  switch (op) {
    case Op::kGet:
      if (!ok) return "unexpected status";
      return h->value_len <= kMaxValueBytes ? nullptr : "value over the limit";
    case Op::kAdd:
      if (ok) return h->value_len == 8 ? nullptr : "sum is not 8 bytes";
      if (h->status != Reply::kBadAdd) return "unexpected status";
      return h->value_len <= kMaxMessageBytes ? nullptr : "message too long";
    case Op::kCheck:
      if (!ok && h->status != Reply::kMissing) return "unexpected status";
      return h->value_len == 0 ? nullptr : "unexpected value";
    case Op::kSet:
    case Op::kWait:
    case Op::kDelete:
    case Op::kPing:
    case Op::kAuth:
      if (!ok) return "unexpected status";
      return h->value_len == 0 ? nullptr : "unexpected value";
  }
  return "reply to an unknown op";
}

inline const char* op_name(Op op) {
  switch (op) {
    case Op::kSet:
      return "set";
    case Op::kGet:
      return "get";
    case Op::kAdd:
      return "add";
    case Op::kWait:
      return "wait";
    case Op::kDelete:
      return "remove";
    case Op::kCheck:
      return "check";
    case Op::kPing:
      return "ping";
    case Op::kAuth:
      return "auth";
  }
  return "?";
}

}  // namespace gang::store::tcp
