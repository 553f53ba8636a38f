// Membership changes: gang_shrink, gang_grow and gang_join. The survivors
// of a failed (or aborted) gang agree on who is left through the gang's
// store, not its backend (which is broken), and make a new gang of
// themselves; a running gang admits new processes that asked to join.
//
// Who is left is decided by liveness, not punctuality (liveness.h): a rank
// that is alive is waited for, up to the shrink's timeout; only a rank known
// to have failed is left out. Agreement, in rounds under
// <store prefix>shrink<n>/<round>/:
//  - Each survivor counts itself in: add(here/<rank>, 1), then
//    add(count, 1). The first to arrive (count 1) is the round's decider and
//    says so (decider = its rank).
//  - The decider waits until every rank of the gang has arrived or is known
//    to have failed (at once when its process ended; else when its
//    heartbeat stood still for GANG_FAILURE_DETECT_MS), or until its cut,
//    shortly before its timeout. The members are the ranks that arrived and
//    have not failed since.
//  - It writes them as its proposal, then commits: add(fate, 1). A commit
//    that comes first makes the proposal the round's outcome, written as
//    members; one that finds the round abandoned writes members =
//    "abandoned".
//  - Every other survivor waits for members, and watches the decider. When
//    the decider is known to have failed (or never said who it is within
//    the detection interval), it abandons the round: add(fate, 2^32). The
//    first of commit and abandon wins, and each side learns which from the
//    sum it gets back: an abandon that finds a commit before it reads the
//    proposal (written before the commit); a commit that finds an abandon
//    before it gives up. An abandoned round is over for everyone, who go on
//    to the next.
// So every survivor reads the same outcome of a round, and a round's outcome
// never changes, whoever dies at whichever step. A survivor that counts
// itself in after the commit reads members without itself: it is excluded,
// and its gang_shrink says so rather than entering the new gang, which meets
// under a prefix only members use.
#include "core/membership.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/briefly.h"
#include "core/control_channel.h"
#include "core/env.h"
#include "core/failure.h"
#include "core/fault_point.h"
#include "core/forget.h"
#include "core/liveness.h"
#include "core/gang.h"
#include "core/log.h"
#include "core/rendezvous.h"
#include "store/store.h"

namespace gang::core {
namespace {

constexpr const char* kApi = "gang_shrink";
constexpr const char* kAbandoned = "abandoned";

store::Bytes as_bytes(const std::string& s) { return store::Bytes(s.begin(), s.end()); }

std::string members_text(const std::vector<int>& members) {
  std::string text;
  for (int m : members) text += str_cat(text.empty() ? "" : ",", m);
  return text;
}

// Whether the last segment of `name` is a membership change ("shrink3",
// "grow1"); *base (may be null) gets the name without it.
bool ends_in_change(const std::string& name, std::string* base) {
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos) return false;
  for (const char* k : {"shrink", "grow"}) {
    const size_t len = std::strlen(k);
    const size_t digits = slash + 1 + len;
    if (name.compare(slash + 1, len, k) == 0 && digits < name.size() &&
        name.find_first_not_of("0123456789", digits) == std::string::npos) {
      if (base) *base = name.substr(0, slash);
      return true;
    }
  }
  return false;
}

// The name of the gang after membership change n: "<base>/<kind><n>", where
// base is `name` without its own last change ("bench/grow2" shrinks to
// "bench/shrink3"), so names stay short however often a job shrinks and
// grows.
std::string changed_name(const std::string& name, const char* kind, uint64_t n) {
  std::string base = name;
  ends_in_change(name, &base);
  return str_cat(base, "/", kind, n);
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

// The text at `key`, or "" while there is none yet (after `wait`).
std::string read_text(store::Store& s, const std::string& key, Millis wait) {
  try {
    const store::Bytes b = s.get(key, std::max(wait, Millis(1)));
    return std::string(b.begin(), b.end());
  } catch (const Error& e) {
    if (e.status() != Status::kTimeout) throw;
    return "";
  }
}

}  // namespace

namespace {

constexpr int64_t kAbandon = int64_t{1} << 32;  // fate: an abandon
constexpr int64_t kCommits = kAbandon - 1;       // fate: the commits' bits
constexpr Millis kPoll{10};

int64_t counter(store::Store& s, const std::string& key) { return s.add(key, 0); }

// The decider's wait: until every rank arrived or is known to have failed,
// or the cut. Returns the members: arrived and not failed since. At the
// cut, the ranks that came must be more than those alive that did not: a
// minority never goes on alone under the gang's next name (it would shut
// the majority out); *alone then names the absent, and nothing is returned.
std::vector<int> wait_for_survivors(store::Store& s, const std::string& p, PeerWatch& watch,
                                    int size, int me, Clock::time_point cut,
                                    const std::string& gang, std::string* alone) {
  std::vector<bool> here(static_cast<size_t>(size), false);
  std::vector<std::string> why(static_cast<size_t>(size));
  here[static_cast<size_t>(me)] = true;
  int64_t seen = 0;
  for (;;) {
    const int64_t count = counter(s, p + "count");
    if (count != seen) {
      seen = count;
      for (int r = 0; r < size; ++r) {
        if (!here[static_cast<size_t>(r)]) here[static_cast<size_t>(r)] = counter(s, str_cat(p, "here/", r)) > 0;
      }
    }
    bool waiting = false;
    for (int r = 0; r < size; ++r) {
      const auto i = static_cast<size_t>(r);
      if (!here[i] && why[i].empty() && !watch.failed(r, &why[i])) waiting = true;
    }
    if (!waiting) break;
    if (Clock::now() >= cut) {
      std::string late, came;
      int absent = 0, arrived = 0;
      for (int r = 0; r < size; ++r) {
        const auto i = static_cast<size_t>(r);
        if (here[i]) {
          came += str_cat(came.empty() ? "" : ", ", r);
          ++arrived;
        } else if (why[i].empty()) {
          late += str_cat(late.empty() ? "" : ", ", r);
          ++absent;
        }
      }
      if (arrived <= absent) {
        *alone = str_cat("only rank(s) ", came, " came before the timeout, while rank(s) ",
                         late, " are alive and did not call gang_shrink: a minority of the "
                         "living does not go on alone");
        return {};
      }
      GANG_LOG(kWarn, "gang \"", gang, "\" rank ", me, ": ", kApi, " went on without rank(s) ",
               late, ", alive but not in gang_shrink before the timeout");
      break;
    }
    std::this_thread::sleep_for(kPoll);
  }
  std::vector<int> members;
  for (int r = 0; r < size; ++r) {
    const auto i = static_cast<size_t>(r);
    if (!here[i]) continue;
    // One that arrived and died since would hold the new gang up.
    std::string died;
    if (r != me && watch.failed(r, &died)) {
      GANG_LOG(kInfo, "gang \"", gang, "\": rank ", r, " counted itself in but ", died);
      continue;
    }
    members.push_back(r);
  }
  return members;
}

}  // namespace

Membership::Membership(MemberGang gang) : gang_(std::move(gang)) {}

std::vector<int> Membership::agree_survivors(uint64_t id, Millis timeout, int* rounds) {
  if (!gang_.store) {
    fail(Status::kUnsupported, kApi, ": gang \"", gang_.name,
         "\" was made without a store (a fake gang or one rank)");
  }
  store::Store& s = *gang_.store;
  const Clock::time_point deadline = deadline_after(timeout);
  // The decider commits this long before its own deadline, so the others
  // (whose calls began about when its did) read the outcome within theirs.
  const Clock::time_point cut = deadline - std::min(Millis(2000), timeout / 4);
  PeerWatch watch(gang_.store, gang_.prefix, gang_.size);
  // Ranks on this host that died are told to deciders on other hosts.
  watch.mark_ended_neighbours();
  const Millis detect = env::failure_detect();
  for (int round = 0;; ++round) {
    if (Clock::now() >= deadline) {
      fail(Status::kTimeout, kApi, ": the survivors of gang \"", gang_.name,
           "\" did not agree within ", timeout.count(), " ms (", round,
           " round(s))");
    }
    // The survivors may have gone on without this rank already (and
    // cleared their rounds): their fence says so, whatever the rounds say.
    check_fence(s);
    const std::string p = str_cat(gang_.prefix, "shrink", id, "/", round, "/");
    *rounds = round + 1;
    s.add(str_cat(p, "here/", gang_.rank), 1);
    fault_point("shrink.arrive");
    if (s.add(p + "count", 1) == 1) {
      s.set(p + "decider", as_bytes(str_cat(gang_.rank)));
      fault_point("shrink.decide");
      std::string alone;
      const std::vector<int> members =
          wait_for_survivors(s, p, watch, gang_.size, gang_.rank, cut, gang_.name, &alone);
      if (members.empty()) {
        // No outcome but "abandoned": the others try again, and fail alike
        // unless a majority of the living comes.
        if (s.add(p + "fate", kAbandon) == kAbandon) s.set(p + "members", as_bytes(kAbandoned));
        fail(Status::kTimeout, kApi, ": gang \"", gang_.name, "\": ", alone);
      }
      const std::string text = members_text(members);
      s.set(p + "proposal", as_bytes(text));
      fault_point("shrink.propose");
      const int64_t before = s.add(p + "fate", 1) - 1;
      fault_point("shrink.commit");
      if (before == 0) {
        s.set(p + "members", as_bytes(text));
        return members;
      }
      s.set(p + "members", as_bytes(kAbandoned));
      continue;
    }
    // Wait for the outcome, watching the decider.
    const Clock::time_point arrived = Clock::now();
    int decider = -1;
    std::string text;
    while (text.empty()) {
      text = read_text(s, p + "members", kPoll * 5);
      if (!text.empty()) break;
      if (Clock::now() >= deadline) {
        fail(Status::kTimeout, kApi, ": the survivors of gang \"", gang_.name,
             "\" did not agree within ", timeout.count(), " ms (round ", round,
             " had no outcome)");
      }
      const int64_t fate = counter(s, p + "fate");
      if (fate >= kAbandon && (fate & kCommits) == 0) {
        text = kAbandoned;  // another survivor gave the decider up
        break;
      }
      if (decider < 0) {
        const std::string d = read_text(s, p + "decider", Millis(1));
        if (!d.empty()) decider = std::atoi(d.c_str());
      }
      std::string why;
      const bool gone = decider >= 0 ? watch.failed(decider, &why)
                                     : Clock::now() - arrived >= detect;
      if (!gone) continue;
      const int64_t before = s.add(p + "fate", kAbandon) - kAbandon;
      if (before >= kAbandon) {
        // Another survivor gave the decider up first, and knows the
        // outcome: abandoned unless a commit came before it, which it
        // writes as members.
        text = (before & kCommits) == 0
                   ? std::string(kAbandoned)
                   : read_text(s, p + "members", std::chrono::duration_cast<Millis>(
                                                        deadline - Clock::now()));
      } else {
        // The first to give the decider up: a commit before this is the
        // outcome (its proposal was written before it); otherwise the
        // round is abandoned, and a commit after this finds so. Either
        // way the others read it in members.
        if (before == 0) {
          GANG_LOG(kWarn, "gang \"", gang_.name, "\" rank ", gang_.rank, ": ", kApi,
                   " round ", round, ": its decider, rank ", decider, ", ",
                   decider >= 0 ? why : std::string("never said who it is"),
                   "; agreeing again");
          text = kAbandoned;
        } else {
          text = read_text(s, p + "proposal", Millis(1000));
        }
        s.set(p + "members", as_bytes(text));
      }
    }
    if (text == kAbandoned) continue;
    return parse_members(text);
  }
}

std::shared_ptr<Gang> Membership::shrink(Millis timeout) {
  note_fence();
  if (std::string why; gang_.failure->excluded(&why)) fail(Status::kAborted, kApi, ": ", why);
  if (timeout <= Millis(0)) timeout = gang_.timeout();
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = deadline_after(timeout);
  for (;;) {
    const uint64_t id = shrinks_++;
    const auto left = [&] {
      return std::max(Millis(1), std::chrono::duration_cast<Millis>(
                                     deadline - Clock::now()));
    };
    int rounds = 0;
    const std::vector<int> members = agree_survivors(id, left(), &rounds);
    const std::string label = str_cat("shrink", id);
    const std::string new_name = changed_name(gang_.name, "shrink", lineage_.changes + 1);
    if (std::find(members.begin(), members.end(), gang_.rank) == members.end()) {
      fail(Status::kAborted, kApi, ": ", excluded_text(members, new_name));
    }
    if (gang_.rank == members[0]) post_fence(members, new_name);
    std::string lost;
    for (int r = 0, i = 0; r < gang_.size; ++r) {
      if (i < static_cast<int>(members.size()) && members[i] == r) {
        ++i;
      } else {
        lost += str_cat(lost.empty() ? "" : ",", r);
      }
    }
    // A member that dies between counting itself in and meeting the others
    // would hold the new gang until the timeout: meet within a window, and
    // agree again without it when the window passes.
    const Millis window = std::min(env::shrink_form(), left());
    try {
      auto child = gang_.survivors(members, label, new_name, window,
                                   Lineage{lineage_.changes + 1, "", gang_.prefix});
      // Every member has read the outcome and met: the rounds' keys, and
      // this gang's records of who its ranks were, are nobody's now (the
      // fence stays, for ranks left out, until the next shrink).
      if (child->rank() == 0) forget_shrink(id, rounds, members);
      GANG_LOG(kInfo, "gang \"", gang_.name, "\" shrank to \"", child->name(),
               "\": ", members.size(), " of ", gang_.size, " ranks (lost: ",
               lost.empty() ? "none" : lost, ") in ",
               std::chrono::duration_cast<Millis>(Clock::now() - start).count(),
               " ms");
      return child;
    } catch (const Error& e) {
      const bool again = (e.status() == Status::kTimeout ||
                          e.status() == Status::kPeerLost) &&
                         Clock::now() < deadline;
      if (!again) throw;
      GANG_LOG(kWarn, "gang \"", gang_.name, "\" rank ", gang_.rank, ": ", kApi,
               ": the survivors (ranks ", members_text(members),
               ") did not all meet as \"", new_name, "\" (", e.what(),
               "); agreeing again without the missing");
    }
  }
}

// Fencing: <store prefix>fence holds "<members> <new name>" of the latest
// shrink, and <store prefix>fenced counts its posts, so a look costs one
// add until there is something to read.
void Membership::post_fence(const std::vector<int>& members,
                            const std::string& new_name) {
  try {
    gang_.store->set(gang_.prefix + "fence",
                     as_bytes(members_text(members) + " " + new_name));
    gang_.store->add(gang_.prefix + "fenced", 1);
  } catch (const Error& e) {
    GANG_LOG(kWarn, "gang \"", gang_.name, "\" rank ", gang_.rank,
             ": could not post the survivors for ranks left out: ", e.what());
  }
}

void Membership::note_fence() {
  if (!gang_.store) return;
  if (gang_.failure->excluded()) return;
  // The store is asked briefly: when it is gone too, or slow, the failure
  // stands as it is.
  const std::string text = briefly(
      [store = gang_.store, prefix = gang_.prefix] {
        if (store->add(prefix + "fenced", 0) == 0) return std::string();
        const store::Bytes b = store->get(prefix + "fence", Millis(200));
        return std::string(b.begin(), b.end());
      },
      Millis(300));
  const size_t space = text.find(' ');
  if (space == std::string::npos) return;
  const std::vector<int> members = parse_members(text.substr(0, space));
  if (std::find(members.begin(), members.end(), gang_.rank) != members.end()) return;
  gang_.failure->exclude(excluded_text(members, text.substr(space + 1)));
}

void Membership::check_fence(store::Store& s) {
  if (s.add(gang_.prefix + "fenced", 0) == 0) return;
  const std::string text = read_text(s, gang_.prefix + "fence", Millis(1000));
  const size_t space = text.find(' ');
  if (space == std::string::npos) return;
  const std::vector<int> members = parse_members(text.substr(0, space));
  if (std::find(members.begin(), members.end(), gang_.rank) != members.end()) return;
  fail(Status::kAborted, kApi, ": ", excluded_text(members, text.substr(space + 1)));
}

void Membership::forget_shrink(uint64_t id, int rounds, const std::vector<int>& members) {
  std::vector<std::string> keys;
  for (int round = 0; round < rounds; ++round) {
    const std::string p = str_cat(gang_.prefix, "shrink", id, "/", round, "/");
    for (const char* k : {"count", "decider", "proposal", "fate", "members"}) keys.push_back(p + k);
    for (int r = 0; r < gang_.size; ++r) keys.push_back(str_cat(p, "here/", r));
  }
  for (int r = 0; r < gang_.size; ++r) {
    if (!std::binary_search(members.begin(), members.end(), r)) {
      // A rank left out is known failed: its process's heartbeat goes too
      // (a stopped one that comes back beats anew).
      try {
        Who who;
        if (parse_who(read_text(*gang_.store, str_cat(gang_.prefix, "who/", r), Millis(1)), &who)) {
          keys.push_back(beat_key(who));
        }
      } catch (const Error&) {
        // The store is failing: what is left stays.
      }
    }
    for (const char* k : {"who/", "dead/", "failed/", "lasting/"}) {
      keys.push_back(str_cat(gang_.prefix, k, r));
    }
  }
  // The fence of the shrink before this one.
  if (!lineage_.fence_kept.empty()) {
    for (const char* k : {"fence", "fenced"}) keys.push_back(lineage_.fence_kept + k);
  }
  for (std::string& k : meet_keys()) keys.push_back(std::move(k));
  forget(gang_.store, std::move(keys), {{gang_.prefix + "failures", gang_.prefix + "failure/"}});
}

std::vector<std::string> Membership::meet_keys() const {
  if (lineage_.changes == 0 || lineage_.meet_base.empty()) return {};
  const std::string& b = lineage_.meet_base;
  return {b + "generations", b + "open", b + "joined"};
}

std::string Membership::excluded_text(const std::vector<int>& members,
                                      const std::string& new_name) const {
  return str_cat("rank ", gang_.rank, " of gang \"", gang_.name,
                 "\" was excluded: the survivors (ranks ", members_text(members),
                 ") went on without it as gang \"", new_name,
                 "\", and its calls on this gang fail (use gang_join to come "
                 "back as a new member)");
}

// Joining, under gang/<base name>/join/ in the job's store (the base name is
// the gang's name without its last membership change, "root/shrink3" ->
// "root", so joiners find a gang however often it shrank or grew, and a
// sub-gang's joiners are its own):
//  - A joiner takes a ticket t = add(count, 1), says what it asks for and
//    who it is (asks/<t> = "<backend>/<device> <liveness record>"), and
//    waits for ticket/<t>.
//  - gang_grow: every member reads count; all take the largest seen. Rank 0
//    claims each ticket after the last decided one (add(claim/<t>, 1) == 1)
//    and looks at its joiner: one whose process ended, or that never said
//    what it asks for within the detection interval, is skipped (ticket/<t>
//    = "skipped <why>"); one that asks for another backend or device than
//    the gang's is refused (ticket/<t> = "refused <the gang's>"); the rest
//    are admitted: ticket/<t> = "<rank> <size> <lineage> <backend> <name>".
//    It moves decided on and broadcasts how many it admitted. Everyone then
//    creates the new gang "<name>/grow<n>" on the gang's backend: members
//    first, in their order, then the joiners in ticket order.
//  - A joiner that times out claims its own ticket: winning, it withdrew
//    (no grow will count it); losing, rank 0 decided it first, and it reads
//    its ticket after all.
namespace {

std::string join_prefix(const std::string& name) {
  std::string base = name;
  ends_in_change(name, &base);
  return str_cat("gang/", base, "/join/");
}

std::string device_word(DeviceType d) { return d == DeviceType::kCuda ? "cuda" : "cpu"; }

}  // namespace

std::string Membership::admit(store::Store& s, const std::string& jp, int64_t t,
                              const std::string& wants, Who* who_out) {
  // The joiner says what it asks for right after taking its ticket.
  const Millis detect = env::failure_detect();
  const std::string asks = read_text(s, str_cat(jp, "asks/", t), detect);
  if (asks.empty()) {
    return str_cat("skipped: the joiner with ticket ", t, " did not say what it asks for within ",
                   detect.count(), " ms (it died after taking its ticket)");
  }
  const size_t space = asks.find(' ');
  const std::string asked = asks.substr(0, space);
  Who& who = *who_out;
  if (space != std::string::npos && parse_who(asks.substr(space + 1), &who) &&
      ended_here(who)) {
    return str_cat("skipped: the joiner with ticket ", t, " (pid ", who.pid, ") has died");
  }
  const std::string asked_backend = asked.substr(0, asked.find('/'));
  const std::string asked_device = asked.substr(asked.find('/') + 1);
  const std::string want_backend = wants.substr(0, wants.find('/'));
  if (asked_device != device_word(gang_.device_type) ||
      (asked_backend != "auto" && asked_backend != want_backend)) {
    return str_cat("refused: the joiner with ticket ", t, " asks for ", asked,
                   " but gang \"", gang_.name, "\" is on ", wants);
  }
  return "";
}

std::shared_ptr<Gang> Membership::grow(Millis timeout) {
  static const char* const api = "gang_grow";
  if (gang_.failure->failed()) gang_.failure->throw_failed(api);
  if (!gang_.store) {
    fail(Status::kUnsupported, api, ": gang \"", gang_.name,
         "\" was made without a store (a fake gang or one rank)");
  }
  if (timeout <= Millis(0)) timeout = gang_.timeout();
  store::Store& s = *gang_.store;
  const std::string jp = join_prefix(gang_.name);
  const int64_t seen = s.add(jp + "count", 0);
  std::vector<int64_t> all(static_cast<size_t>(gang_.size));
  int64_t admitted = 0;
  std::vector<int64_t> won;  // rank 0: the tickets admitted
  std::vector<Who> whos;     // rank 0: their joiners
  const std::string new_name = changed_name(gang_.name, "grow", lineage_.changes + 1);
  const std::string wants = str_cat(gang_.asked, "/", device_word(gang_.device_type));
  // Rank 0: tells each admitted joiner its place in attempt `attempt`.
  const auto tell = [&](int attempt) {
    for (size_t i = 0; i < won.size(); ++i) {
      s.set(str_cat(jp, "ticket/", won[i]),
            as_bytes(str_cat(gang_.size + static_cast<int>(i), " ",
                             gang_.size + static_cast<int>(admitted), " ", lineage_.changes + 1,
                             " ", gang_.asked, " ", attempt, " ", new_name)));
    }
  };
  gang_.control(api, [&](ControlChannel& control, Clock::time_point deadline) {
    control.all_gather(&seen, all.data(), 1, DType::kInt64, deadline);
    const int64_t upto = *std::max_element(all.begin(), all.end());
    if (gang_.rank == 0) {
      const int64_t decided = s.add(jp + "decided", 0);
      for (int64_t t = decided + 1; t <= upto; ++t) {
        if (s.add(str_cat(jp, "claim/", t), 1) != 1) continue;  // withdrew
        Who who;
        const std::string no = admit(s, jp, t, wants, &who);
        if (no.empty()) {
          won.push_back(t);
          whos.push_back(who);
        } else {
          GANG_LOG(kWarn, "gang \"", gang_.name, "\": ", api, " ", no);
          s.set(str_cat(jp, "ticket/", t), as_bytes(no));
          if (who.pid > 0 && ended_here(who)) {
            forget(gang_.store, {beat_key(who), str_cat(jp, "asks/", t), str_cat(jp, "claim/", t)});
          }
        }
      }
      admitted = static_cast<int64_t>(won.size());
      tell(0);
      if (upto > decided) s.add(jp + "decided", upto - decided);
    }
    control.broadcast(&admitted, 1, DType::kInt64, 0, deadline);
  });
  if (admitted > 0) fault_point("grow.decided");
  std::shared_ptr<Gang> grown;
  int attempts = 0;  // that lost a rank
  for (int attempt = 0; admitted > 0; ++attempt) {
    attempts = attempt;
    GangOptions o;
    o.backend = gang_.asked;
    o.device_type = gang_.device_type;
    o.device_index = gang_.device_index;
    o.rank = gang_.rank;
    o.size = gang_.size + static_cast<int>(admitted);
    o.store = gang_.store;
    o.timeout_ms = timeout.count();
    o.name = new_name;
    o.debug = gang_.debug ? 1 : -1;
    o.attempt = attempt;
    o.lineage = Lineage{lineage_.changes + 1, "", lineage_.fence_kept};
    // A rank lost before the grown gang met (a joiner that died after it
    // was admitted, or a member) ends the attempt within the detection
    // interval: rank 0 watches the ranks it waits for, the others rank 0.
    PeerWatch watch(gang_.store, gang_.prefix, o.size);
    for (size_t i = 0; i < whos.size(); ++i) watch.know(gang_.size + static_cast<int>(i), whos[i]);
    o.lost = [&watch](int r, std::string* why) { return watch.failed(r, why); };
    try {
      grown = Gang::create(o);
      break;
    } catch (const CreationLost& e) {
      const int lost = e.rank();
      if (lost < gang_.size) {
        // A member: the gang lost it (its next call says so), and the
        // joiners are told to ask again.
        if (gang_.rank == 0) {
          for (int64_t t : won) {
            s.set(str_cat(jp, "ticket/", t),
                  as_bytes(str_cat("aborted: member rank ", lost, " of gang \"", gang_.name,
                                   "\" was lost while it grew; join again")));
          }
        }
        throw;
      }
      // A joiner: every member has this (rank 0 found it and said so in
      // its go); the others go on without it, under the next attempt.
      const size_t j = static_cast<size_t>(lost - gang_.size);
      if (gang_.rank == 0) {
        GANG_LOG(kWarn, "gang \"", gang_.name, "\": ", api,
                 " goes on without the joiner with ticket ", won[j], " (pid ", whos[j].pid,
                 "), which was lost after it was admitted: ", e.what());
        s.set(str_cat(jp, "ticket/", won[j]), as_bytes("skipped: lost after it was admitted"));
        forget(gang_.store, {beat_key(whos[j]), str_cat(jp, "asks/", won[j]),
                             str_cat(jp, "claim/", won[j])});
        won.erase(won.begin() + static_cast<std::ptrdiff_t>(j));
        whos.erase(whos.begin() + static_cast<std::ptrdiff_t>(j));
        admitted = static_cast<int64_t>(won.size());
        tell(attempt + 1);
      }
      gang_.control(api, [&](ControlChannel& control, Clock::time_point deadline) {
        control.broadcast(&admitted, 1, DType::kInt64, 0, deadline);
      });
    }
  }
  if (admitted == 0) return nullptr;
  if (gang_.rank == 0) {
    // The admitted joiners are in: their tickets are nobody's now; nor are
    // the meeting places of attempts that lost a rank.
    std::vector<std::string> keys;
    for (int64_t t : won) {
      for (const char* k : {"claim/", "asks/", "ticket/"}) keys.push_back(str_cat(jp, k, t));
    }
    for (int a = 0; a < attempts; ++a) {
      const std::string b = a == 0 ? str_cat("gang/", new_name, "/")
                                   : str_cat("gang/", new_name, "#", a, "/");
      for (const char* k : {"generations", "open", "joined", "1/go"}) keys.push_back(b + k);
      for (int r = 1; r < gang_.size + static_cast<int>(admitted) + attempts; ++r) {
        keys.push_back(str_cat(b, "1/hello/", r));
      }
    }
    forget(gang_.store, std::move(keys));
  }
  GANG_LOG(kInfo, "gang \"", gang_.name, "\" grew to \"", new_name, "\": ", gang_.size,
           " members and ", admitted, " joiner(s)");
  return grown;
}

std::shared_ptr<Gang> Membership::join(const GangOptions& options) {
  static const char* const api = "gang_join";
  const std::string name = options.name.empty() ? "root" : options.name;
  if (options.backend == "fake") {
    fail(Status::kInvalidArgument, api, ": a fake gang cannot join gang \"", name,
         "\" (it has no peers); ask for its backend, or \"auto\"");
  }
  const Millis timeout =
      options.timeout_ms > 0 ? Millis(options.timeout_ms) : env::timeout();
  std::shared_ptr<store::Store> store = options.store;
  // A client of the job's store, never its server (rank 1 of 2 says so).
  if (!store) store = open_rendezvous(options.init_method, 1, 2, timeout, nullptr);
  store::Store& s = *store;
  const std::string jp = join_prefix(name);
  keep_beating(store);
  const int64_t ticket = s.add(jp + "count", 1);
  fault_point("join.ticket");
  const std::string asks =
      str_cat(options.backend.empty() ? "auto" : options.backend, "/",
              device_word(options.device_type), " ", self_record());
  s.set(str_cat(jp, "asks/", ticket), as_bytes(asks));
  fault_point("join.asked");
  const std::string key = str_cat(jp, "ticket/", ticket);
  const base::Deadline deadline(timeout);
  std::string text = read_text(s, key, timeout);
  if (text.empty()) {
    if (s.add(str_cat(jp, "claim/", ticket), 1) == 1) {
      fail(Status::kTimeout, api, ": no member of gang \"", name,
           "\" admitted this process (ticket ", ticket, ") within ",
           timeout.count(), " ms: the members call gang_grow to admit joiners");
    }
    text = read_text(s, key, timeout);  // decided just now
    if (text.empty()) {
      fail(Status::kTimeout, api, ": admitted to gang \"", name,
           "\" (ticket ", ticket, ") but its details never came");
    }
  }
  for (;;) {
    if (text.rfind("refused", 0) == 0 || text.rfind("skipped", 0) == 0 ||
        text.rfind("aborted", 0) == 0) {
      fail(text[0] == 'r' ? Status::kInvalidArgument : Status::kAborted, api, ": gang \"",
           name, "\" ", text);
    }
    GangOptions o = options;
    // "<rank> <size> <lineage> <backend> <attempt> <name>": the name is the
    // rest, whatever its characters.
    int rank = -1, size = -1, attempt = -1, name_at = -1;
    unsigned long long lineage = 0;
    char backend[128] = {};
    if (std::sscanf(text.c_str(), "%d %d %llu %127s %d %n", &rank, &size, &lineage, backend,
                    &attempt, &name_at) != 5 ||
        name_at <= 0 || static_cast<size_t>(name_at) >= text.size()) {
      fail(Status::kStore, api, ": ticket ", ticket, " of gang \"", name,
           "\" reads \"", text, "\"");
    }
    fault_point("join.admitted");
    o.rank = rank;
    o.size = size;
    o.backend = backend;
    o.name = text.substr(static_cast<size_t>(name_at));
    o.store = store;
    o.timeout_ms = std::max<int64_t>(1, deadline.remaining_ms().count());
    o.attempt = attempt;
    o.lineage.changes = lineage;
    try {
      return Gang::create(o);
    } catch (const CreationLost&) {
      // Another rank was lost before the grown gang met: rank 0 says what
      // becomes of this one (its place in the next attempt, or why not).
    }
    const std::string was = text;
    while (text == was) {
      if (deadline.expired()) {
        fail(Status::kTimeout, api, ": the growth of gang \"", name, "\" that admitted ticket ",
             ticket, " lost a rank, and its members never said what comes next within ",
             timeout.count(), " ms");
      }
      text = read_text(s, key, std::min(Millis(50), deadline.remaining_ms()));
      if (text.empty()) text = was;
      std::this_thread::sleep_for(Millis(20));
    }
  }
}

}  // namespace gang::core
