// Naming the cause of a failure: see attribution.h.
#include "core/attribution.h"

#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "base/deadline.h"
#include "base/error.h"
#include "core/briefly.h"
#include "store/store.h"

namespace gang::core {
namespace {

using base::Clock;

constexpr Millis kRecordWait{100};
constexpr Millis kRecordLook{200};
// A timed-out rank waits this long for the others' records to stop coming,
// at most kSilentLook in all, before naming the ranks that recorded none.
constexpr Millis kSilentSettle{150};
constexpr Millis kSilentLook{600};
constexpr int kSilentMaxSize = 64;  // past this, reading every rank costs too much

}  // namespace

Attribution::Attribution(std::shared_ptr<store::Store> store,
                         std::string prefix, int rank, int size)
    : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank),
      size_(size) {}

void Attribution::record(const std::string& message) const noexcept {
  if (!records()) return;
  briefly(
      [store = store_, prefix = prefix_, rank = rank_,
       record = str_cat(rank_, " ", message)] {
        store->add(str_cat(prefix, "failed/", rank), 1);
        const int64_t i = store->add(prefix + "failures", 1);
        store->set(str_cat(prefix, "failure/", i),
                   store::Bytes(record.begin(), record.end()));
        return std::string();
      },
      kRecordWait);
}

std::string Attribution::first(const std::string& mine) const noexcept {
  if (!records()) return "";
  const std::string record = briefly(
      [store = store_, prefix = prefix_] {
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
std::string Attribution::silent() const noexcept {
  if (!records() || size_ > kSilentMaxSize) return "";
  return briefly(
      [store = store_, prefix = prefix_, size = size_] {
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
