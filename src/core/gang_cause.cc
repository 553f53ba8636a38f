// Naming the cause of a failure. A rank's own view of a failure is often
// second-hand: when rank 3 dies in a ring, rank 2 loses its connection to
// it, fails and closes its own connections, and rank 1 then reads only
// that rank 2 went away. So every rank that fails records its failure in
// the gang's store before it closes its transport: <prefix>failures counts
// them and failure/<i> holds "<rank> <message>" of the i-th. A rank that
// reports a failure reads the first record, written by the rank nearest
// the cause, and names it.
//
// Device gangs have their notice board for this (control_channel.h); the
// records are for gangs whose control channel is their own backend. The
// store is asked only on the way to failing, never on the way of an
// operation that succeeds, and never for long: a thread of its own talks to
// it, and the failing rank waits for that thread only briefly (the store
// may be slow, gone, or busy with another thread's wait), so closing the
// transport, which is what tells the peers, is never held up for long.
#include <cstdlib>
#include <string>
#include <thread>

#include "core/briefly.h"
#include "core/control_channel.h"
#include "core/gang.h"
#include "store/store.h"

namespace gang::core {
namespace {

constexpr Millis kRecordWait{100};
constexpr Millis kRecordLook{200};
// A timed-out rank waits this long for the others' records to stop coming,
// at most kSilentLook in all, before naming the ranks that recorded none.
constexpr Millis kSilentSettle{150};
constexpr Millis kSilentLook{600};
constexpr int kSilentMaxSize = 64;  // past this, reading every rank costs too much

}  // namespace

bool Gang::records_failures() const {
  return store_ != nullptr && size_ > 1 && control_ != nullptr &&
         !control_->has_notice_board();
}

void Gang::record_failure(const std::string& message) noexcept {
  if (!records_failures()) return;
  briefly(
      [store = store_, prefix = store_prefix_, rank = rank_,
       record = str_cat(rank_, " ", message)] {
        store->add(str_cat(prefix, "failed/", rank), 1);
        const int64_t i = store->add(prefix + "failures", 1);
        store->set(str_cat(prefix, "failure/", i),
                   store::Bytes(record.begin(), record.end()));
        return std::string();
      },
      kRecordWait);
}

std::string Gang::first_failure(const std::string& mine) noexcept {
  if (!records_failures()) return "";
  const std::string record = briefly(
      [store = store_, prefix = store_prefix_] {
        if (store->add(prefix + "failures", 0) == 0) return std::string();
        const store::Bytes b = store->get(prefix + "failure/1", kRecordLook);
        return std::string(b.begin(), b.end());
      },
      kRecordLook + kRecordWait);
  const size_t space = record.find(' ');
  if (space == std::string::npos) return "";
  const int rank = std::atoi(record.substr(0, space).c_str());
  const std::string said = record.substr(space + 1);
  // Nothing to add when this rank failed first, or already says it.
  if (rank == rank_ || mine.find(said) != std::string::npos) return "";
  return str_cat("; the first rank of the gang to fail was rank ", rank, ": ",
                 said);
}

// After a timeout every live rank fails within moments of the others and
// records it; the ranks that record nothing are the ones stuck, frozen or
// gone, wherever in a chain of waits this rank sat.
std::string Gang::silent_ranks() noexcept {
  if (!records_failures() || size_ > kSilentMaxSize) return "";
  return briefly(
      [store = store_, prefix = store_prefix_, size = size_] {
        const Clock::time_point until = Clock::now() + kSilentLook;
        int64_t seen = store->add(prefix + "failures", 0);
        Clock::time_point moved = Clock::now();
        while (seen < size && Clock::now() < until &&
               Clock::now() - moved < kSilentSettle) {
          std::this_thread::sleep_for(Millis(10));
          const int64_t now = store->add(prefix + "failures", 0);
          if (now != seen) {
            seen = now;
            moved = Clock::now();
          }
        }
        if (seen >= size) return std::string();
        std::string silent;
        int n = 0;
        for (int r = 0; r < size; ++r) {
          if (store->add(str_cat(prefix, "failed/", r), 0) == 0) {
            silent += str_cat(n++ ? ", " : "", r);
          }
        }
        if (n == 0) return std::string();
        return n == 1 ? str_cat("; rank ", silent, " recorded no failure of its "
                                "own: it is stuck, frozen or gone")
                      : str_cat("; ranks ", silent, " recorded no failure of "
                                "their own: they are stuck, frozen or gone");
      },
      kSilentLook + Millis(300));
}

}  // namespace gang::core
