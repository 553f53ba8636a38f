#include "base/error.h"

namespace gang {

const char* status_name(Status status) {
  switch (static_cast<int>(status)) {
#define GANG_STATUS_NAME_(name, value, msg) \
  case value:                               \
    return #name;
    GANG_STATUS_MAP(GANG_STATUS_NAME_)
#undef GANG_STATUS_NAME_
  }
  return "GANG_STATUS_UNKNOWN";
}

namespace {

const char* phase_text(Phase phase) {
  switch (phase) {
    case Phase::kWithinHost:
      return " (within this host)";
    case Phase::kBetweenHosts:
      return " (between hosts)";
    case Phase::kNone:
    case Phase::kCreation:
    case Phase::kMembership:
      break;
  }
  return "";
}

}  // namespace

std::string Text::str() const {
  std::string s = texts[0];
  for (size_t i = 0; i < ranks.size(); ++i) {
    s += std::to_string(ranks[i]);
    s += texts[i + 1];
  }
  return s;
}

void Text::add(const Text& t) {
  texts.back() += t.texts[0];
  for (size_t i = 0; i < t.ranks.size(); ++i) {
    ranks.push_back(t.ranks[i]);
    texts.push_back(t.texts[i + 1]);
  }
}

void Text::add(const Error& e) {
  add(e.message());
  texts.back() += phase_text(e.phase());
}

// The one place an error's message is built from its facts.
Error::Error(Status status, Text message, Phase phase)
    : std::runtime_error(message.str() + phase_text(phase)),
      status_(status),
      message_(std::move(message)),
      phase_(phase) {}

Error Error::renumbered(const std::vector<int>& map, Phase phase) const {
  Text t = message_;
  for (int& r : t.ranks) {
    if (r >= 0 && static_cast<size_t>(r) < map.size()) r = map[static_cast<size_t>(r)];
  }
  return Error(status_, std::move(t), phase);
}

std::ostream& operator<<(std::ostream& os, const Ranks& r) {
  for (size_t i = 0; i < r.values.size(); ++i) os << (i ? ", " : "") << r.values[i];
  return os;
}

}  // namespace gang
