// The failed state of a gang: see failure.h.
#include "core/failure.h"

#include <utility>

#include "core/log.h"

namespace gang::core {

FailureState::FailureState(std::string gang, int rank, bool debug,
                           Attribution attribution, FailureHooks hooks)
    : gang_(std::move(gang)),
      rank_(rank),
      debug_(debug),
      attribution_(std::move(attribution)),
      hooks_(std::move(hooks)) {}

void FailureState::mark(Status status, const std::string& message,
                        bool from_peer) {
  int expected = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.compare_exchange_strong(expected, static_cast<int>(status))) {
      failure_ = message;
    }
  }
  if (expected != 0) return;
  if (!from_peer) {
    hooks_.post_notice(message);
    // Before the transport closes: a peer that sees it close finds why.
    attribution_.record(message);
  }
  GANG_LOG(kWarn, "gang \"", gang_, "\" rank ", rank_, " failed: ", message);
  hooks_.abort(message);
}

void FailureState::exclude(const std::string& why) {
  // Aborts the backend if nothing had failed it yet, so calls blocked in it
  // end now; then every call says why.
  mark(Status::kAborted, why);
  std::lock_guard<std::mutex> lock(mu_);
  excluded_ = true;
  failure_ = why;
  failed_.store(static_cast<int>(Status::kAborted));
}

bool FailureState::excluded(std::string* why) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (excluded_ && why) *why = failure_;
  return excluded_;
}

std::string FailureState::earlier(const char* api) const {
  std::lock_guard<std::mutex> lock(mu_);
  return str_cat(api, ": gang \"", gang_, "\" failed earlier: ", failure_);
}

void FailureState::throw_failed(const char* api) {
  hooks_.note_fence();
  fail(Status::kAborted, earlier(api));
}

std::string FailureState::report(const std::string& op, Status* status,
                                 const std::string& what,
                                 const std::function<void(Status)>& ending) {
  std::string message = str_cat(op, " rank ", rank_, ": ", what);
  if (*status == Status::kTimeout && !debug_) {
    message += "; GANG_DEBUG=detail compares every collective's arguments "
               "across ranks before it runs and would name a mismatch behind "
               "this wait";
  }
  // A failure recorded meanwhile (an abort from another thread, an overdue
  // wait) is why the backend gave up: report that first error.
  const bool first = !failed();
  if (!first) {
    std::lock_guard<std::mutex> lock(mu_);
    *status = this->status();
    message = str_cat(op, ": ", failure_);
  }
  ending(*status);
  mark(*status, message);
  // What this rank saw may be second-hand: name the first failure.
  const std::string cause = !first ? std::string()
                            : *status == Status::kTimeout
                                ? attribution_.silent()
                                : attribution_.first(message);
  if (!cause.empty()) {
    // Later calls quote the first error: the cause with it.
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_ == message) failure_ += cause;
    message += cause;
  }
  // Failing because the others went on without this rank says so.
  hooks_.note_fence();
  std::lock_guard<std::mutex> lock(mu_);
  if (excluded_) {
    *status = this->status();
    message = str_cat(op, ": ", failure_);
  }
  return message;
}

std::string FailureState::overdue(const std::string& why) {
  const std::string message =
      str_cat(why, " on gang \"", gang_, "\" rank ", rank_);
  mark(Status::kTimeout, message);
  return message;
}

}  // namespace gang::core
