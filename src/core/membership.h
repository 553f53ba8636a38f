// Membership changes of a gang: gang_shrink (the survivors of a failed gang
// agree on who is left and go on as a new gang), the fence that tells a rank
// left out, gang_grow (a running gang admits processes that asked to join)
// and gang_join. The protocols are described in membership.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/deadline.h"
#include "core/types.h"

namespace gang::store {
class Store;
}

namespace gang::core {

class ControlChannel;
class FailureState;
class Gang;
struct GangOptions;
struct Who;

// Where a gang stands in its line of membership changes, given to it when
// it is made (GangOptions, Gang's Setup) and taken on once it met.
struct Lineage {
  // Membership changes behind the gang: 0 for a gang made by creation or
  // split, n for "<base>/shrink<n>" and "<base>/grow<n>".
  uint64_t changes = 0;
  // Where a gang made by gang_create (and so by gang_grow and gang_join)
  // met: "gang/<name>/", whose counters (generations, open, joined) a gang
  // of a membership change's name no longer needs once it met.
  std::string meet_base;
  // The store prefix of the gang whose shrink's fence (for the ranks left
  // out) is still kept in this lineage; the next shrink forgets it.
  std::string fence_kept;
};

// What membership changes need of their gang, which gives it.
struct MemberGang {
  std::string name;
  int rank = 0;
  int size = 1;
  DeviceType device_type = DeviceType::kCpu;
  int device_index = -1;
  bool debug = false;
  // The backend the gang's creator asked for: what a grown gang asks for
  // again, and what a joiner must ask for too.
  std::string asked = "auto";
  // The store the gang met in, and its prefix there; null for a gang made
  // without one (fake, or of one rank).
  std::shared_ptr<store::Store> store;
  std::string prefix;
  FailureState* failure = nullptr;
  // The gang's timeout now.
  std::function<base::Millis()> timeout;
  // Runs f as control traffic of the public call `api`, on the gang's
  // control channel (Gang::control: refused on a failed gang; an error fails
  // the gang).
  std::function<void(const char* api,
                     const std::function<void(ControlChannel&,
                                              base::Clock::time_point deadline)>& f)>
      control;
  // Makes the gang of the survivors `members` (ranks of this gang, this rank
  // among them) of shrink `label`, named `name`, on a fresh backend, meeting
  // within `window`; it goes on with `lineage`.
  std::function<std::shared_ptr<Gang>(
      const std::vector<int>& members, const std::string& label,
      const std::string& name, base::Millis window, Lineage lineage)>
      survivors;
};

class Membership {
 public:
  explicit Membership(MemberGang gang);
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Once the gang met: until then, a failed creation forgets nothing of
  // where it met.
  void set_lineage(Lineage lineage) { lineage_ = std::move(lineage); }

  // gang_shrink: collective over the survivors of this (failed) gang; the
  // new gang of the survivors, in rank order.
  std::shared_ptr<Gang> shrink(base::Millis timeout);
  // gang_grow: collective over the members; the gang of the members and
  // the joiners admitted now, or null when none waits.
  std::shared_ptr<Gang> grow(base::Millis timeout);
  // gang_join: a new process's place in the gang named options.name, once
  // admitted.
  static std::shared_ptr<Gang> join(const GangOptions& options);

  // Fencing. After the survivors of a failed gang shrank, they post the new
  // membership on the gang's store (post_fence); a rank left out learns it
  // there on its next failed call on this gang (note_fence), and from then
  // on every call of it fails saying it was excluded.
  void note_fence();
  // The keys of gang "<name>"'s rendezvous that are nobody's once it met
  // (a gang of a membership change: nobody creates its name again).
  std::vector<std::string> meet_keys() const;

 private:
  // The survivors' agreement of gang_shrink number `id`: the ranks of this
  // gang that take part, the same on every one of them. *rounds: how many
  // rounds the agreement took (their keys, to forget).
  std::vector<int> agree_survivors(uint64_t id, base::Millis timeout, int* rounds);
  void post_fence(const std::vector<int>& members, const std::string& new_name);
  // Fails kAborted, saying so, when the survivors' fence leaves this rank
  // out.
  void check_fence(store::Store& s);
  // The message of a rank left out of `members`, which went on as new_name.
  std::string excluded_text(const std::vector<int>& members,
                            const std::string& new_name) const;
  // Rank 0 of the new gang: forgets shrink `id`'s rounds and this gang's
  // records of its ranks (forget.h).
  void forget_shrink(uint64_t id, int rounds, const std::vector<int>& members);
  // Rank 0 of a grow: "" when the joiner with ticket t may come in, else
  // why not ("skipped: ..." or "refused: ..."). `wants`: "<backend>/<device>".
  // *who gets the joiner's liveness record, as it said it.
  std::string admit(store::Store& s, const std::string& jp, int64_t t,
                    const std::string& wants, Who* who);

  const MemberGang gang_;
  uint64_t shrinks_ = 0;  // gang_shrink calls so far, the same on every rank
  Lineage lineage_;
};

}  // namespace gang::core
