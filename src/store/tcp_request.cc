#include "store/tcp_request.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/error.h"

namespace gang::store::tcp {

RequestReader::Result RequestReader::fail(Result r, std::string why) {
  why_ = std::move(why);
  reserved_.reset();
  return r;
}

RequestReader::Result RequestReader::on_header() {
  if (const char* bad = decode_request(header_, &h_)) {
    return fail(Result::kMalformed, bad);
  }
  if (require_auth_ && h_.op != Op::kAuth) {
    return fail(Result::kUnauthenticated,
                str_cat("a ", op_name(h_.op), " request before AUTH"));
  }
  // An AUTH's key is a token, bounded by the protocol instead.
  if (h_.op != Op::kAuth && h_.key_len > limits_.max_key_bytes) {
    return fail(Result::kRefused,
                str_cat("a key of ", h_.key_len,
                        " bytes is over the server's limit of ",
                        limits_.max_key_bytes, " (GANG_STORE_MAX_KEY_BYTES)"));
  }
  if (h_.value_len > limits_.max_value_bytes) {
    return fail(
        Result::kRefused,
        str_cat("a value of ", h_.value_len,
                " bytes is over the server's limit of ",
                limits_.max_value_bytes, " (GANG_STORE_MAX_VALUE_BYTES)"));
  }
  // Both are within the protocol's limits (decode_request), so no overflow.
  const size_t body = size_t{h_.key_len} + static_cast<size_t>(h_.value_len);
  if (body > limits_.max_request_bytes) {
    return fail(
        Result::kRefused,
        str_cat("a request of ", body, " bytes is over the server's limit of ",
                limits_.max_request_bytes, " (GANG_STORE_MAX_REQUEST_BYTES)"));
  }
  // Taken as announced, before any of it arrives, so that requests still
  // arriving can never add up past the limit. Only a SET must fit here:
  // the others work in a full store (an ADD to a new key is checked when it
  // is served), their keys (a few KiB per connection) counted past the
  // limit.
  reserved_ = h_.op == Op::kSet
                  ? Reservation(budget_, body + kEntryOverheadBytes)
                  : Reservation::forced(budget_, body);
  if (!reserved_.valid()) {
    return fail(Result::kRefused,
                str_cat("the server is full: it holds ", budget_->held(),
                        " bytes, and a request of ", body,
                        " more would pass its limit of ", budget_->limit(),
                        " (GANG_STORE_MAX_TOTAL_BYTES)"));
  }
  if (h_.key_len > 0) {
    state_ = State::kKey;
  } else if (h_.value_len > 0) {
    state_ = State::kValue;
  } else {
    state_ = State::kKey;  // whole already; not a header any more
    whole_ = true;
    return Result::kRequest;
  }
  return Result::kNeedMore;
}

RequestReader::Result RequestReader::feed(const uint8_t* data, size_t n,
                                          size_t* used) {
  *used = 0;
  if (whole_) return Result::kRequest;  // take() it first
  for (;;) {
    const size_t left = n - *used;
    const uint8_t* p = data + *used;
    switch (state_) {
      case State::kHeader: {
        const size_t k = std::min(left, kRequestHeaderBytes - got_);
        if (k > 0) std::memcpy(header_ + got_, p, k);
        got_ += k;
        *used += k;
        if (got_ < kRequestHeaderBytes) return Result::kNeedMore;
        const Result r = on_header();
        if (r != Result::kNeedMore) return r;
        break;
      }
      case State::kKey: {
        const size_t k = std::min<size_t>(left, h_.key_len - key_.size());
        key_.append(reinterpret_cast<const char*>(p), k);
        *used += k;
        if (key_.size() < h_.key_len) return Result::kNeedMore;
        if (h_.value_len == 0) {
          whole_ = true;
          return Result::kRequest;
        }
        state_ = State::kValue;
        break;
      }
      case State::kValue: {
        const auto total = static_cast<size_t>(h_.value_len);
        const size_t k = std::min(left, total - value_.size());
        value_.append(p, k, total);
        *used += k;
        if (value_.size() < total) return Result::kNeedMore;
        whole_ = true;
        return Result::kRequest;
      }
    }
  }
}

Request RequestReader::take() {
  Request r;
  r.op = h_.op;
  r.key = std::move(key_);
  r.value = std::move(value_);
  r.reserved = std::move(reserved_);
  key_ = std::string();
  value_ = Buffer();
  state_ = State::kHeader;
  got_ = 0;
  whole_ = false;
  return r;
}

size_t RequestReader::wanted() const {
  size_t n = 1;  // whole (take() it) or failed: nothing more is read
  if (!whole_) {
    switch (state_) {
      case State::kHeader:
        n = kRequestHeaderBytes - got_;
        break;
      case State::kKey:
        n = h_.key_len - key_.size();
        break;
      case State::kValue:
        n = static_cast<size_t>(h_.value_len) - value_.size();
        break;
    }
  }
  return n > 0 ? n : 1;
}

}  // namespace gang::store::tcp
