// The C++ inside's error mechanism: gang::Error carries a status and a
// message built from facts (the ranks it names, the phase). The C shim
// turns it into a gang_status_t and the thread's last error. Every layer
// may throw it; it depends on nothing but the standard library and the
// public list of statuses.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gang/gang_status.h"

namespace gang {

// The statuses of gang_status_t under C++ names, with the same values. The
// C shim and the module host map between the two through GANG_STATUS_MAP
// (interop/public_enums.cc), and the assertions below keep the lists equal.
enum class Status : int {
  kOk = 0,
  kInProgress = 1,
  kInvalidArgument = -1,
  kUnsupported = -2,
  kUnavailable = -3,
  kTimeout = -4,
  kPeerLost = -5,
  kMismatch = -6,
  kAborted = -7,
  kStore = -8,
  kNoMemory = -9,
  kSystem = -10,
  kInternal = -11,
};

namespace detail {
#define GANG_STATUS_COUNT_(name, value, msg) +1
constexpr int kPublicStatuses = 0 GANG_STATUS_MAP(GANG_STATUS_COUNT_);
#undef GANG_STATUS_COUNT_
// Every public value lies in [kInternal, kInProgress], and there are as many
// public statuses as values in that range: the lists are the same.
#define GANG_STATUS_IN_RANGE_(name, value, msg)                        \
  static_assert((value) >= static_cast<int>(Status::kInternal) &&      \
                    (value) <= static_cast<int>(Status::kInProgress),  \
                "gang_status.h has a status Status does not");
GANG_STATUS_MAP(GANG_STATUS_IN_RANGE_)
#undef GANG_STATUS_IN_RANGE_
static_assert(kPublicStatuses == static_cast<int>(Status::kInProgress) -
                                     static_cast<int>(Status::kInternal) + 1,
              "Status and GANG_STATUS_MAP list different statuses");
}  // namespace detail

// "GANG_ERR_TIMEOUT", from GANG_STATUS_MAP.
const char* status_name(Status status);

// Facts an error carries beside its status, from which its message is
// built (Error::what), so that nobody reads them back out of the text.
//
// A rank a message names: written into fail(...) as Rank{r} (or Ranks{v}
// for a list), it prints as the number and is kept as a fact, in the
// numbering of the gang that failed. A gang made of parts (two levels)
// renumbers its parts' errors into its own (Error::renumbered).
struct Rank {
  int value;
};
struct Ranks {
  const std::vector<int>& values;  // printed "1, 4"
};

inline std::ostream& operator<<(std::ostream& os, Rank r) { return os << r.value; }
std::ostream& operator<<(std::ostream& os, const Ranks& r);

// Where a failure happened, for gangs of several parts and for messages.
enum class Phase : uint8_t {
  kNone,
  kWithinHost,    // among the ranks of one host (two levels)
  kBetweenHosts,  // among the hosts' leaders (two levels)
  kCreation,
  kMembership,
};

class Error;

// A message being built: text, with the ranks it names kept apart as
// facts. texts.size() == ranks.size() + 1: texts[0] ranks[0] texts[1] ...
struct Text {
  std::vector<std::string> texts{std::string()};
  std::vector<int> ranks;

  template <typename T>
  void add(const T& v) {
    std::ostringstream os;
    os << v;
    texts.back() += os.str();
  }
  void add(Rank r) {
    ranks.push_back(r.value);
    texts.emplace_back();
  }
  void add(const Ranks& r) {
    for (size_t i = 0; i < r.values.size(); ++i) {
      if (i > 0) texts.back() += ", ";
      add(Rank{r.values[i]});
    }
  }
  void add(const Text& t);
  void add(const Error& e);  // another error's message, its facts kept

  bool empty() const { return ranks.empty() && texts.size() == 1 && texts[0].empty(); }
  // As a string, each rank as its number.
  std::string str() const;
};

inline std::ostream& operator<<(std::ostream& os, const Text& t) { return os << t.str(); }

// The Text of its arguments, concatenated (Rank and Ranks kept as facts).
template <typename... Args>
Text text(Args&&... args) {
  Text t;
  (t.add(args), ...);
  return t;
}

class Error : public std::runtime_error {
 public:
  // A message with no rank facts.
  Error(Status status, const std::string& message) : Error(status, text(message)) {}
  Error(Status status, Text message, Phase phase = Phase::kNone);

  Status status() const noexcept { return status_; }
  // The message with its facts (Text::ranks: the ranks it names, in order).
  const Text& message() const noexcept { return message_; }
  Phase phase() const noexcept { return phase_; }

  // The same error in a whole gang's numbering: each rank r named becomes
  // map[r] (one outside the map stays as it is), in `phase`.
  Error renumbered(const std::vector<int>& map, Phase phase) const;

 private:
  Status status_;
  Text message_;
  Phase phase_;
};

// Concatenates its arguments with operator<<.
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}



// The Error of its arguments, concatenated (Rank and Ranks kept as facts).
template <typename... Args>
Error error(Status status, Args&&... args) {
  return Error(status, text(std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail(Status status, Args&&... args) {
  throw error(status, std::forward<Args>(args)...);
}

}  // namespace gang
