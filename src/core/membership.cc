// Membership changes: gang_shrink. The survivors of a failed (or aborted)
// gang agree on who is left through the gang's store, not its backend
// (which is broken), and make a new gang of themselves.
//
// Agreement, in rounds under <store prefix>shrink<n>/<round>/:
//  - Each survivor counts itself in: add(here/<rank>, 1), then
//    add(count, 1). The first to arrive (count 1) is the round's decider.
//  - The decider waits until every rank of the gang has arrived, or until
//    no new one came for the settle time (GANG_SHRINK_SETTLE_MS, default
//    300 ms), or the timeout. Then it seals the round: add(seal, 1) == 1
//    makes it the round's one writer, and it writes members = the ranks that
//    counted themselves in, in rank order.
//  - Every other survivor waits for members. If none comes within the settle
//    time plus a grace (the decider died, or froze), it tries to seal the
//    round itself: winning the seal, it writes members = "abandoned" and
//    everyone goes on to the next round; losing it, the decider sealed first
//    and members comes.
// The seal is won once, so every survivor reads the same members of a
// round, and a round's outcome never changes. A survivor that counts
// itself in after the seal (it was frozen, or merely late) reads members
// without itself: it is excluded, and its gang_shrink says so rather than
// entering the new gang, which meets under a prefix only members use.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/env.h"
#include "core/gang.h"
#include "core/log.h"
#include "store/store.h"

namespace gang::core {
namespace {

constexpr const char* kApi = "gang_shrink";
constexpr const char* kAbandoned = "abandoned";

Millis settle_time() {
  const char* v = std::getenv("GANG_SHRINK_SETTLE_MS");
  if (v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long ms = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && ms >= 0) return Millis(ms);
  }
  return Millis(300);
}

store::Bytes as_bytes(const std::string& s) { return store::Bytes(s.begin(), s.end()); }

std::string members_text(const std::vector<int>& members) {
  std::string text;
  for (int m : members) text += str_cat(text.empty() ? "" : ",", m);
  return text;
}

std::vector<int> parse_members(const std::string& text) {
  std::vector<int> members;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = text.find(',', at);
    members.push_back(std::atoi(text.substr(at, comma - at).c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return members;
}

// The members of a round, or "" while there are none yet (after `wait`).
std::string read_members(store::Store& s, const std::string& key, Millis wait) {
  try {
    const store::Bytes b = s.get(key, std::max(wait, Millis(1)));
    return std::string(b.begin(), b.end());
  } catch (const Error& e) {
    if (e.status() != Status::kTimeout) throw;
    return "";
  }
}

}  // namespace

std::vector<int> Gang::agree_survivors(uint64_t id, Millis timeout) {
  if (!store_) {
    fail(Status::kUnsupported, kApi, ": gang \"", name_,
         "\" was made without a store (a fake gang or one rank)");
  }
  store::Store& s = *store_;
  const Millis settle = settle_time();
  const Millis grace = settle + Millis(2000);
  const Clock::time_point deadline = deadline_after(timeout);
  for (int round = 0;; ++round) {
    if (Clock::now() >= deadline) {
      fail(Status::kTimeout, kApi, ": the survivors of gang \"", name_,
           "\" did not agree within ", timeout.count(), " ms (", round,
           " round(s))");
    }
    const std::string p = str_cat(store_prefix_, "shrink", id, "/", round, "/");
    s.add(str_cat(p, "here/", rank_), 1);
    const int64_t arrival = s.add(p + "count", 1);
    std::string text;
    if (arrival == 1) {
      // The decider: wait for everyone, or for the arrivals to settle.
      int64_t seen = 1;
      Clock::time_point last = Clock::now();
      while (seen < size_ && Clock::now() < deadline &&
             Clock::now() - last < settle) {
        std::this_thread::sleep_for(Millis(5));
        const int64_t now = s.add(p + "count", 0);
        if (now != seen) {
          seen = now;
          last = Clock::now();
        }
      }
      if (s.add(p + "seal", 1) == 1) {
        std::vector<int> members;
        for (int r = 0; r < size_; ++r) {
          if (s.add(str_cat(p, "here/", r), 0) > 0) members.push_back(r);
        }
        text = members_text(members);
        s.set(p + "members", as_bytes(text));
      }
    }
    if (text.empty()) {
      text = read_members(s, p + "members",
                          std::min(grace, std::chrono::duration_cast<Millis>(
                                              deadline - Clock::now())));
    }
    if (text.empty() && s.add(p + "seal", 1) == 1) {
      // The decider is gone or frozen: this round is over for everyone.
      text = kAbandoned;
      s.set(p + "members", as_bytes(text));
      GANG_LOG(kWarn, "gang \"", name_, "\" rank ", rank_, ": ", kApi,
               " round ", round, " had no decision within ", grace.count(),
               " ms; trying again");
    }
    if (text.empty()) {
      text = read_members(s, p + "members", std::chrono::duration_cast<Millis>(
                                                deadline - Clock::now()));
    }
    if (text.empty() || text == kAbandoned) continue;
    return parse_members(text);
  }
}

std::shared_ptr<Gang> Gang::shrink(Millis timeout) {
  refuse_in_group(kApi);
  if (timeout <= Millis(0)) timeout = this->timeout();
  const uint64_t id = shrinks_++;
  const Clock::time_point start = Clock::now();
  const std::vector<int> members = agree_survivors(id, timeout);
  if (std::find(members.begin(), members.end(), rank_) == members.end()) {
    fail(Status::kAborted, kApi, ": rank ", rank_, " of gang \"", name_,
         "\" was excluded: the survivors (ranks ", members_text(members),
         ") agreed without it, and it cannot join their gang (use gang_join "
         "to come back as a new member)");
  }
  std::string lost;
  for (int r = 0, i = 0; r < size_; ++r) {
    if (i < static_cast<int>(members.size()) && members[i] == r) {
      ++i;
    } else {
      lost += str_cat(lost.empty() ? "" : ",", r);
    }
  }
  const std::string label = str_cat("shrink", id);
  Setup setup = child_setup(members, label, label + "/gang", 0, rank_);
  // A fresh backend: the failed gang's is broken and must not be asked.
  setup.config.parent = nullptr;
  setup.control_parent = nullptr;
  setup.config.deadline = deadline_after(timeout);
  auto child = make_child(std::move(setup));
  GANG_LOG(kInfo, "gang \"", name_, "\" shrank to \"", child->name(), "\": ",
           members.size(), " of ", size_, " ranks (lost: ",
           lost.empty() ? "none" : lost, ") in ",
           std::chrono::duration_cast<Millis>(Clock::now() - start).count(),
           " ms");
  return child;
}

}  // namespace gang::core
