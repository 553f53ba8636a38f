#include "abi/handles.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "abi/shim.h"

namespace gang::abi {

HandleSpace::HandleSpace(const char* kind, size_t max_slots)
    : kind_(kind), max_slots_(max_slots) {
  reserve(std::min(kFirstSlots, max_slots));
}

HandleSpace::~HandleSpace() {
  for (const Range& r : ranges_) {
    ::munmap(reinterpret_cast<void*>(r.base), r.slots * kSlotBytes);
  }
}

void HandleSpace::grow() {
  if (slots_ >= max_slots_) {
    fail(Status::kNoMemory, "too many live ", kind_, " handles (", max_slots_,
         "): destroy some");
  }
  reserve(std::min(ranges_.back().slots * 2, max_slots_ - slots_));
}

void HandleSpace::reserve(size_t slots) {
  const size_t bytes = slots * kSlotBytes;
  // PROT_NONE and MAP_NORESERVE: address space only, nothing committed, and
  // any access faults, so the values can only ever be compared.
  void* p = ::mmap(nullptr, bytes, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    fail(Status::kNoMemory, "cannot reserve ", bytes,
         " bytes of address space for ", slots_ + slots, " ", kind_,
         " handles: ", std::strerror(err));
  }
  ranges_.push_back(Range{reinterpret_cast<uintptr_t>(p), slots_, slots});
  slots_ += slots;
}

namespace {

// Holds a T that is never destroyed. The tables live until the process
// ends: a handle a program never destroyed must not be torn down (a gang
// shut down, a store server stopped) during static destruction, in an order
// no one chose, after the objects it uses may be gone.
template <typename T>
class Immortal {
 public:
  template <typename... Args>
  explicit Immortal(Args&&... args) {
    new (&storage_) T(std::forward<Args>(args)...);
  }
  T& get() { return *std::launder(reinterpret_cast<T*>(&storage_)); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

// At most 262144 live handles of a kind at once (2^30 bytes of address
// space, reserved as they come), and a million works, which a program may
// keep many of.
constexpr size_t kSlots = (size_t{1} << 30) / HandleSpace::kSlotBytes;
constexpr size_t kWorkSlots = (size_t{1} << 32) / HandleSpace::kSlotBytes;

}  // namespace

namespace {

std::atomic<uint32_t> g_generation{0};
std::atomic<pid_t> g_generation_pid{0};

void lock_tables() {
  gang_table().lock_for_fork();
  store_table().lock_for_fork();
  work_table().lock_for_fork();
  gangs_table().lock_for_fork();
}

void unlock_tables() {
  gangs_table().unlock_after_fork();
  work_table().unlock_after_fork();
  store_table().unlock_after_fork();
  gang_table().unlock_after_fork();
}

void in_child() {
  g_generation.fetch_add(1);
  g_generation_pid.store(::getpid());
  unlock_tables();
}

}  // namespace

uint32_t process_generation() { return g_generation.load(std::memory_order_relaxed); }

pid_t generation_pid() {
  const pid_t p = g_generation_pid.load(std::memory_order_relaxed);
  return p != 0 ? p : ::getpid();
}

void keep_inherited(std::shared_ptr<void> object) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<void>>();
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(object));
}

void watch_forks() {
  static const bool installed = [] {
    g_generation_pid.store(::getpid());
    ::pthread_atfork(lock_tables, unlock_tables, in_child);
    return true;
  }();
  (void)installed;
}

GangTable& gang_table() {
  static Immortal<GangTable> t("gang", kSlots);
  return t.get();
}

StoreTable& store_table() {
  static Immortal<StoreTable> t("store", kSlots);
  return t.get();
}

WorkTable& work_table() {
  static Immortal<WorkTable> t("work", kWorkSlots);
  return t.get();
}

GangsTable& gangs_table() {
  static Immortal<GangsTable> t("gangs", kSlots);
  return t.get();
}

}  // namespace gang::abi
