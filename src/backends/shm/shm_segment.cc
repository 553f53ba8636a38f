#include "backends/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "backends/shm/shm_wait.h"
#include "base/env.h"
#include "base/error.h"
#include "base/process.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "core/collective.h"
#include "core/fault_point.h"
#include "store/store.h"

namespace gang::backends::shm_impl {

namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

constexpr uint64_t kMagic = 0x67616e672d73686dULL;  // "gang-shm"
constexpr size_t kPage = 4096;
// How often a rank waiting for the others to attach looks whether rank 0
// is still there.
constexpr auto kAttachNap = std::chrono::milliseconds(100);

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

Millis left(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  return ms < Millis(1) ? Millis(1) : ms;
}

std::string as_string(const store::Bytes& b) { return std::string(b.begin(), b.end()); }

// Tells the other ranks, through the keys they wait on, that this rank
// cannot attach and why ("!" and the message), so that they fail at once
// instead of at their deadline. Best effort: the store may be gone too.
void tell_attach_failed(store::Store& store, int rank, const std::string& why) noexcept {
  try {
    const std::string value = "!" + why;
    store.set(rank == 0 ? "segment" : "all-attached",
              store::Bytes(value.begin(), value.end()));
  } catch (...) {
  }
}

bool single_copy_wanted() {
  const char* v = base::env("GANG_SHM_SINGLE_COPY");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

bool single_copy_everywhere() {
  const char* v = base::env("GANG_SHM_SINGLE_COPY");
  return v != nullptr && std::strcmp(v, "always") == 0;
}

bool too_few_cores(int size) {
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 && size > cores;
}

// Whether this process may read rank 0's memory: its magic, read where rank
// 0 maps the header.
bool can_read(int pid, uint64_t address) {
  uint64_t magic = 0;
  iovec local{&magic, sizeof magic};
  iovec remote{reinterpret_cast<void*>(address), sizeof magic};
  return ::process_vm_readv(pid, &local, 1, &remote, 1, 0) ==
             static_cast<ssize_t>(sizeof magic) &&
         magic == kMagic;
}
// Whether rank 0's process is ending, after opening its segment failed
// with `error`: rank 0 holds the file until every rank has attached, so a
// file that is not there (ENOENT) is a process on its way out, which
// closes its files a moment before it has ended.
bool rank0_ending(int pid, int error) {
  for (int i = 0; i < 100; ++i) {
    if (base::process_ended(pid)) return true;
    if (error != ENOENT) return false;
    ::usleep(10000);
  }
  return false;
}

store::Bytes bytes(const std::string& s) { return store::Bytes(s.begin(), s.end()); }

}  // namespace

void Segment::lay_out(int size, const uint32_t (&slot_bytes)[kChannels]) {
  size_ = size;
  size_t at = round_up(sizeof(Header), kLine);
  ranks_at_ = at;
  at += round_up(sizeof(RankBlock) * static_cast<size_t>(size), kLine);
  barriers_at_ = at;
  at += sizeof(Barrier) * kChannels;
  for (int c = 0; c < kChannels; ++c) {
    at = round_up(at, kPage);
    slots_at_[c] = at;
    at += static_cast<size_t>(slot_bytes[c]) * static_cast<size_t>(size);
    at = round_up(at, kPage);
    boxes_at_[c] = at;
    at += static_cast<size_t>(slot_bytes[c]) * static_cast<size_t>(size);
  }
  at = round_up(at, kPage);
  mail_at_ = at;
  at += sizeof(Mailbox) * kP2PChannels * static_cast<size_t>(size) *
        static_cast<size_t>(size);
  bytes_ = round_up(at, kPage);
}

std::unique_ptr<Segment> Segment::open(store::Store& store, int rank, int size,
                                       const uint32_t (&slot_bytes)[kChannels],
                                       Clock::time_point deadline) {
  try {
    return attach(store, rank, size, slot_bytes, deadline);
  } catch (const Error& e) {
    // A peer's failure (kPeerLost) came through the store already.
    if (e.status() == Status::kPeerLost || e.status() == Status::kTimeout) throw;
    // A rank that failed first may be why this one did (rank 0 gave up and
    // closed the segment's file): report that failure, the cause.
    if (rank != 0) {
      std::string first;
      try {
        first = as_string(store.get("all-attached", Millis(1)));
      } catch (const Error&) {
      }
      if (!first.empty() && first[0] == '!') {
        fail(Status::kPeerLost, "shm: another rank cannot attach: ", first.substr(1));
      }
    }
    tell_attach_failed(store, rank, e.what());
    throw;
  }
}

std::unique_ptr<Segment> Segment::attach(store::Store& store, int rank, int size,
                                         const uint32_t (&slot_bytes)[kChannels],
                                         Clock::time_point deadline) {
  std::unique_ptr<Segment> s(new Segment());
  s->lay_out(size, slot_bytes);
  base::UniqueFd fd;
  int pid0 = 0;  // rank 0's process, seen from the others
  if (rank == 0) {
    fd = base::UniqueFd(::memfd_create("gang-shm", MFD_CLOEXEC));
    if (!fd.valid()) {
      fail(Status::kSystem, "shm: memfd_create: ", base::errno_text(errno));
    }
    if (::ftruncate(fd.get(), static_cast<off_t>(s->bytes_)) != 0) {
      fail(Status::kSystem, "shm: cannot size the segment to ", s->bytes_,
           " bytes: ", base::errno_text(errno));
    }
  } else {
    const std::string where = as_string(store.get("segment", left(deadline)));
    if (!where.empty() && where[0] == '!') {
      fail(Status::kPeerLost, "shm: rank 0 cannot make the segment: ", where.substr(1));
    }
    int pid = 0, theirs = -1;
    unsigned long long n = 0;
    if (std::sscanf(where.c_str(), "%d %d %llu", &pid, &theirs, &n) != 3 ||
        n != s->bytes_) {
      fail(Status::kMismatch, "shm: rank 0's segment (\"", where,
           "\") is not the one rank ", rank, " expects (", s->bytes_, " bytes)");
    }
    pid0 = pid;
    const std::string path = str_cat("/proc/", pid, "/fd/", theirs);
    fd = base::UniqueFd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    const int open_error = errno;
    if (!fd.valid() && rank0_ending(pid, open_error)) {
      throw core::peers_gone({0}, text("pid ", pid, " ended before rank ", rank,
                                       " opened the shared segment"));
    }
    if (!fd.valid()) {
      fail(Status::kUnsupported, "shm: rank ", rank, " cannot open rank 0's "
           "segment through ", path, ": ", base::errno_text(open_error),
           " (ranks of an shm gang must run as one user on one host)");
    }
  }
  void* p = ::mmap(nullptr, s->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED,
                   fd.get(), 0);
  if (p == MAP_FAILED) {
    fail(Status::kSystem, "shm: mmap of ", s->bytes_, " bytes: ",
         base::errno_text(errno));
  }
  s->base_ = static_cast<uint8_t*>(p);
  if (rank == 0) {
    // The file is zero-filled: every atomic starts at 0, and every
    // description and broadcast record unpublished.
    for (int r = 0; r < size; ++r) {
      for (RankChannel& c : s->rank_block(r).channel) {
        for (OpDesc& d : c.desc) d.turn.store(kUnpublished, std::memory_order_relaxed);
        for (BroadcastRecord& b : c.recent) {
          b.number.store(kUnpublished, std::memory_order_relaxed);
        }
      }
    }
    Header& h = s->header();
    h.magic = kMagic;
    h.size = size;
    h.rank0_header = reinterpret_cast<uintptr_t>(s->base_);
    if (!single_copy_wanted()) h.no_single_copy.store(1, std::memory_order_relaxed);
    h.single_copy_always = single_copy_everywhere() ? 1 : 0;
    h.more_ranks_than_cores = too_few_cores(size) ? 1 : 0;
    for (int c = 0; c < kChannels; ++c) h.slot_bytes[c] = slot_bytes[c];
    // The others read the header only after they read this key.
    store.set("segment", bytes(str_cat(::getpid(), " ", fd.get(), " ", s->bytes_)));
  } else if (s->header().magic != kMagic || s->header().size != size) {
    fail(Status::kMismatch, "shm: rank 0's segment is for ", s->header().size,
         " ranks, rank ", rank, " expects ", size);
  }
  core::fault_point("shm.attach");
  s->rank_block(rank).pid.store(static_cast<int32_t>(::getpid()),
                                std::memory_order_release);
  if (rank != 0 && (!single_copy_wanted() ||
                    !can_read(pid0, s->header().rank0_header))) {
    s->header().no_single_copy.store(1, std::memory_order_release);
  }
  // Rank 0 keeps its file open until every rank has mapped the segment;
  // then only the mappings hold it.
  s->await_everyone(store, rank, pid0, deadline);
  s->single_copy_ = s->header().no_single_copy.load(std::memory_order_acquire) == 0;
  return s;
}

// Only rank 0 waits on the store, for "all-attached": "1" from the last
// rank to count itself in, or "!" and why from a rank that cannot attach
// (it has no segment to say so in). The others wait in the segment for
// rank 0 to pass the outcome on. So a rank other than 0 asks the store for
// nothing but the segment's address, where a counter in the store cost
// every rank two requests more.
void Segment::await_everyone(store::Store& store, int rank, int pid0,
                             Clock::time_point deadline) {
  Header& h = header();
  const bool last = h.attached.fetch_add(1, std::memory_order_acq_rel) + 1 ==
                    static_cast<uint32_t>(size_);
  if (rank == 0) {
    if (!last) {
      std::string outcome;
      try {
        outcome = as_string(store.get("all-attached", left(deadline)));
      } catch (const Error& e) {
        if (e.status() != Status::kTimeout) {
          tell_outcome(kAttachFailed, e.what());
          throw;
        }
        const Error late = core::timed_out(not_attached());
        tell_outcome(kAttachTimedOut, late.what());
        throw late;
      }
      if (outcome != "1") {
        const std::string why = str_cat("shm: another rank cannot attach: ", outcome.substr(1));
        tell_outcome(kAttachFailed, why);
        fail(Status::kPeerLost, why);
      }
      // The last rank said "1" after it counted itself in: this sees
      // every rank's count, and what each wrote before it.
      (void)h.attached.load(std::memory_order_acquire);
    }
    tell_outcome(kAttachedAll, "");
    return;
  }
  if (last) store.set("all-attached", bytes("1"));
  for (;;) {
    const uint32_t outcome = h.attach_outcome.load(std::memory_order_acquire);
    if (outcome == kAttachedAll) return;
    if (outcome == kAttachFailed) fail(Status::kPeerLost, h.attach_why);
    if (outcome == kAttachTimedOut) fail(Status::kTimeout, h.attach_why);
    if (base::process_ended(pid0)) {
      throw core::peers_gone({0}, text("pid ", pid0, " ended while the ranks attached "
                                       "to the shared segment"));
    }
    const auto now = Clock::now();
    if (now >= deadline) throw core::timed_out(not_attached());
    Waiter::sleep_on(h.attach_outcome, outcome,
                     std::min<Clock::duration>(deadline - now, kAttachNap));
  }
}

void Segment::tell_outcome(AttachOutcome outcome, const std::string& why) {
  Header& h = header();
  const size_t n = std::min(why.size(), sizeof h.attach_why - 1);
  std::memcpy(h.attach_why, why.data(), n);
  h.attach_why[n] = '\0';
  h.attach_outcome.store(outcome, std::memory_order_release);
  Waiter::wake_all(h.attach_outcome);
}

Text Segment::not_attached() const {
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (rank_block(r).pid.load(std::memory_order_acquire) == 0) missing.push_back(r);
  }
  return text(missing.size() == 1 ? "rank " : "ranks ", Ranks{missing},
              " to attach to the shared segment");
}

Segment::~Segment() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

}  // namespace gang::backends::shm_impl
