// Reading the TCP store's requests from a byte stream, without sockets: the
// server feeds it what it receives, the fuzzer (tests/fuzz) feeds it
// anything. Every frame is checked as soon as its header is in, against the
// protocol and the server's limits, and its bytes are buffered only as they
// arrive, under a reservation of the size the header announced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "store/server_memory.h"
#include "store/store_options.h"
#include "store/tcp_protocol.h"

namespace gang::store::tcp {

// One whole request.
struct Request {
  Op op = Op::kPing;
  std::string key;
  Buffer value;
  // The bytes announced (key, value and kEntryOverheadBytes), still drawn
  // from the budget; whoever keeps the key or value takes them over.
  Reservation reserved;
};

class RequestReader {
 public:
  enum class Result {
    kNeedMore,         // every byte given was used; the request is not whole
    kRequest,          // a request is whole: take() it
    kUnauthenticated,  // the first request is not AUTH (require_auth)
    kRefused,          // over a limit (why() says which, for the client)
    kMalformed,        // not the protocol (why() says how, for logs)
  };

  // limits and budget must outlive the reader.
  RequestReader(const Limits& limits, Budget* budget)
      : limits_(limits), budget_(budget) {}

  // While set, a header of any op but AUTH is kUnauthenticated, before any
  // of its body is read.
  void require_auth(bool on) { require_auth_ = on; }

  // Reads from data[0, n): stops after one request is whole, or at an
  // error, or when the bytes run out. *used is how many bytes it took.
  // After kUnauthenticated, kRefused or kMalformed the stream is beyond
  // repair: the caller closes the connection and feeds nothing more.
  Result feed(const uint8_t* data, size_t n, size_t* used);

  // The request after kRequest; the reader is ready for the next one.
  Request take();

  // After an error result: why, in words fit for the client (kRefused) or
  // a log (the others). Never contains the stream's bytes.
  const std::string& why() const { return why_; }

  // How many bytes the request in progress still needs at least: a caller
  // that reads no more than this from its socket never reads past one
  // request. At least 1.
  size_t wanted() const;

  // Whether part of a request has arrived and the rest has not.
  bool in_request() const { return state_ != State::kHeader || got_ > 0; }

  // Whether the request in progress has a header that passed every check
  // (its key and value may still be arriving), or is whole.
  bool header_read() const { return state_ != State::kHeader; }

  // The bytes held for the request in progress (header, key, value).
  size_t buffered() const { return got_ + key_.size() + value_.size(); }

 private:
  enum class State { kHeader, kKey, kValue };

  Result on_header();
  Result fail(Result r, std::string why);

  const Limits& limits_;
  Budget* budget_;
  bool require_auth_ = false;

  State state_ = State::kHeader;
  uint8_t header_[kRequestHeaderBytes] = {};
  size_t got_ = 0;  // of the header
  RequestHeader h_;
  std::string key_;
  Buffer value_;
  Reservation reserved_;
  bool whole_ = false;
  std::string why_;
};

}  // namespace gang::store::tcp
