// The values behind gang_t*, gang_store_t*, gang_work_t* and gangs_t*.
//
// A handle is not the address of the object it names. Each kind of handle
// owns ranges of address space reserved with PROT_NONE and never committed;
// a handle's value is a slot in one of them plus a generation:
//
//   value = range.base + (slot - range.first_slot) * kSlotBytes
//           + (generation % kGenerations) * 8
//
// and a table maps the value back to the object. So a handle is checked by
// arithmetic and a table lookup, never by reading memory it points to: a
// destroyed handle, one whose slot holds a newer object, a handle of another
// kind and a pointer gang never made are all rejected without touching
// freed (or any) memory. The values are ordinary aligned non-NULL pointers
// that can never belong to another allocation, which is what bindings that
// keep handles as opaque pointers (SWIG Python, Go cgo) expect.
//
// The ranges are reserved as slots are needed: the first is small
// (kFirstSlots), each next one twice the last, up to the kind's limit, so a
// process pays address space for the handles it has had, not for the
// limit (which matters under `ulimit -v`). A range is never released while
// its table lives (the tables live as long as the process), so no two
// slots, and no two values, ever share an address.
//
// Freed slots are reused first-in first-out, and only once kQuarantine
// others are waiting, so a destroyed handle's value names a live object
// again only after its slot has been reused kGenerations times: at least
// kGenerations * (kQuarantine + 1) destroys later.
//
// The table keeps a shared_ptr to each live object. An entry point pins the
// object (copies that shared_ptr under the table's lock) for the length of
// the call, so destroying a handle on one thread while another thread is
// inside a call with it never frees the object under that call: the destroy
// removes the entry at once (later calls are refused), and the object goes
// when the last running call returns.
//
// After fork(), a child inherits the tables with every handle its parent
// had, but not the threads, connections and peers behind them. Such
// handles are inert in the child: each records the fork generation it was
// made in (process_generation(), which a fork handler advances in the
// child), a call with one from an earlier generation is refused at once
// saying whose it is, and removing one forgets it without running its
// object's teardown, whose sockets, segments and threads are the parent's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <sys/types.h>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gang::abi {

// How many forks lie between the process that first loaded gang and this
// one (0 there, 1 in its children, ...), and the process that made the
// handles of the current generation. The first table made installs the
// fork handlers that keep both, and that hold every table's lock across a
// fork so a child never inherits one locked.
uint32_t process_generation();
pid_t generation_pid();
void watch_forks();
// Holds an inherited object for the rest of the process, never released
// (its teardown is the parent's) yet reachable, as leak checkers expect.
void keep_inherited(std::shared_ptr<void> object);

// The address space behind one kind of handle: ranges reserved as they are
// needed, never accessible. Not thread-safe: its table's lock guards it.
class HandleSpace {
 public:
  static constexpr uintptr_t kSlotBytes = 4096;
  static constexpr uint32_t kGenerations = kSlotBytes / 8;
  // The first range's slots (256 KiB of address space).
  static constexpr size_t kFirstSlots = 64;

  // Reserves the first range, of min(kFirstSlots, max_slots) slots; throws
  // kNoMemory if it cannot. kind names the handles in messages.
  HandleSpace(const char* kind, size_t max_slots);
  ~HandleSpace();
  HandleSpace(const HandleSpace&) = delete;
  HandleSpace& operator=(const HandleSpace&) = delete;

  // Slots reserved so far, numbered 0..slots()-1 across the ranges.
  size_t slots() const { return slots_; }
  size_t max_slots() const { return max_slots_; }

  // Reserves the next range: twice the last one, within max_slots() in all.
  // Throws kNoMemory when the limit is reached or mmap fails.
  void grow();

  uintptr_t encode(size_t slot, uint32_t generation) const {
    const Range* r = &ranges_.front();
    while (slot >= r->first_slot + r->slots) ++r;
    return r->base + (slot - r->first_slot) * kSlotBytes +
           (generation % kGenerations) * 8;
  }
  // The slot and generation (mod kGenerations) a value encodes; false for a
  // value that is not one this space can hand out.
  bool decode(uintptr_t value, size_t* slot, uint32_t* generation) const {
    for (const Range& r : ranges_) {
      if (value < r.base) continue;
      const uintptr_t offset = value - r.base;
      if (offset >= r.slots * kSlotBytes) continue;
      if (offset % 8 != 0) return false;
      *slot = r.first_slot + offset / kSlotBytes;
      *generation = static_cast<uint32_t>(offset % kSlotBytes / 8);
      return true;
    }
    return false;
  }

 private:
  struct Range {
    uintptr_t base;
    size_t first_slot;
    size_t slots;
  };

  void reserve(size_t slots);

  const char* kind_;
  size_t max_slots_;
  size_t slots_ = 0;
  std::vector<Range> ranges_;  // in slot order
};

// The live handles of one kind H (the opaque public type) naming objects of
// type T. Thread-safe.
template <typename H, typename T>
class HandleTable {
 public:
  // Freed slots wait in line this long before reuse (see the top).
  static constexpr size_t kQuarantine = 1024;

  // kind names the handle in messages ("gang", "store"); max_slots is the
  // most live handles of the kind.
  HandleTable(const char* kind, size_t max_slots)
      : kind_(kind), space_(kind, max_slots) {
    watch_forks();
  }

  // Held by the fork handlers across a fork.
  void lock_for_fork() { mu_.lock(); }
  void unlock_after_fork() { mu_.unlock(); }

  // A new handle for object.
  H* insert(std::shared_ptr<T> object) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t slot = take_slot();
    slots_[slot].object = std::move(object);
    slots_[slot].born = process_generation();
    slots_[slot].owner = generation_pid();
    return to_handle(space_.encode(slot, slots_[slot].generation));
  }

  // The object behind a live handle, held for the caller; null if h is
  // NULL, destroyed, not a handle of this kind, or inherited across fork().
  std::shared_ptr<T> find(const H* h) const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t slot;
    return live(h, &slot) && !inherited(slots_[slot]) ? slots_[slot].object : nullptr;
  }

  // As find, but a bad handle is kInvalidArgument naming api, and so is
  // one inherited across fork(), saying whose it is.
  std::shared_ptr<T> pin(const H* h, const char* api) const {
    pid_t owner = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t slot;
      if (live(h, &slot)) {
        if (!inherited(slots_[slot])) return slots_[slot].object;
        owner = slots_[slot].owner;
      }
    }
    if (owner != 0) refuse_inherited(h, api, owner);
    refuse(h, api);
  }

  // Ends a handle: from now on it is refused. Returns the table's reference
  // to its object (others may still be held by running calls); a bad handle
  // is kInvalidArgument naming api. A handle inherited across fork() ends
  // too, but its object is the parent's and is left as it is: null is
  // returned, and the caller has nothing to tear down.
  std::shared_ptr<T> remove(H* h, const char* api) {
    std::shared_ptr<T> object;
    bool ended = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t slot;
      if (live(h, &slot)) {
        Slot& s = slots_[slot];
        if (inherited(s)) {
          // Never released: its destructor would close the parent's
          // connections and wait for threads this process does not have.
          keep_inherited(std::move(s.object));
        } else {
          object = std::move(s.object);
        }
        s.object.reset();
        ++s.generation;
        free_.push_back(slot);
        ended = true;
      }
    }
    if (!ended) refuse(h, api);
    return object;
  }

 private:
  struct Slot {
    uint32_t generation = 0;
    std::shared_ptr<T> object;  // null while free
    uint32_t born = 0;          // process_generation() when it was made
    pid_t owner = 0;            // the process that made it
  };

  static bool inherited(const Slot& s) { return s.born != process_generation(); }

  static H* to_handle(uintptr_t value) { return reinterpret_cast<H*>(value); }

  // A slot for a new handle: the oldest freed one once the quarantine is
  // full, else a new one (reserving address space for it if need be), else
  // (at the limit, or with no address space left) the oldest freed one.
  // Lock held.
  size_t take_slot() {
    if (free_.size() <= kQuarantine && slots_.size() < space_.max_slots()) {
      try {
        if (slots_.size() == space_.slots()) space_.grow();
        slots_.emplace_back();
        return slots_.size() - 1;
      } catch (const Error&) {
        if (free_.empty()) throw;
      }
    }
    if (free_.empty()) {
      fail(Status::kNoMemory, "too many live ", kind_, " handles (",
           space_.max_slots(), "): destroy some");
    }
    const size_t slot = free_.front();
    free_.pop_front();
    return slot;
  }

  // Whether h is the current value of a live slot, and which. Lock held.
  bool live(const H* h, size_t* slot) const {
    uint32_t generation;
    if (!space_.decode(reinterpret_cast<uintptr_t>(h), slot, &generation) ||
        *slot >= slots_.size()) {
      return false;
    }
    const Slot& s = slots_[*slot];
    return s.object && s.generation % HandleSpace::kGenerations == generation;
  }

  [[noreturn]] void refuse(const H* h, const char* api) const {
    if (h == nullptr)
      fail(Status::kInvalidArgument, api, ": ", kind_, " is NULL");
    fail(Status::kInvalidArgument, api, ": ", kind_, " ",
         static_cast<const void*>(h), " is not a live ", kind_,
         " handle (destroyed already, or never made by gang)");
  }

  [[noreturn]] void refuse_inherited(const H* h, const char* api, pid_t owner) const {
    fail(Status::kInvalidArgument, api, ": ", kind_, " ", static_cast<const void*>(h),
         " belongs to process ", owner, ", of which this process (", generation_pid(),
         ") is a fork: a forked child cannot use its parent's ", kind_,
         " handles (destroying one only forgets it here; the parent's is untouched)");
  }

  const char* kind_;
  HandleSpace space_;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  std::deque<size_t> free_;
};

}  // namespace gang::abi
