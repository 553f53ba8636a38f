#include "core/flight_recorder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>

#include "base/text.h"

namespace gang::core {

namespace {

const char* recorder_status(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kInProgress:
      return "IN PROGRESS";
    case Status::kInvalidArgument:
      return "invalid argument";
    case Status::kUnsupported:
      return "unsupported";
    case Status::kUnavailable:
      return "unavailable";
    case Status::kTimeout:
      return "TIMEOUT";
    case Status::kPeerLost:
      return "PEER LOST";
    case Status::kMismatch:
      return "MISMATCH";
    case Status::kAborted:
      return "ABORTED";
    case Status::kStore:
      return "STORE";
    case Status::kNoMemory:
      return "NO MEMORY";
    case Status::kSystem:
      return "SYSTEM";
    case Status::kInternal:
      return "INTERNAL";
  }
  return "?";
}

}  // namespace

FlightRecorder::FlightRecorder(const std::string& path, int global_rank,
                               const std::string& gang, int rank, int size)
    : global_rank_(global_rank), gang_(gang), rank_(rank), size_(size) {
  const size_t at = path.find("%r");
  path_ = at == std::string::npos
              ? str_cat(path, ".", global_rank)
              : str_cat(path.substr(0, at), global_rank, path.substr(at + 2));
  ring_.reserve(kCapacity);
}

void FlightRecorder::issued(uint64_t id, uint64_t seq,
                            const CollectiveArgs& args, Clock::time_point now) {
  Entry e;
  e.id = id;
  e.seq = seq;
  e.kind = args.kind;
  e.dtype = args.dtype;
  e.op = args.op;
  e.root = args.root;
  e.count = args.count;
  e.issued = now;
  std::lock_guard<std::mutex> lock(mu_);
  if (ring_.size() < kCapacity) {
    ring_.push_back(e);
  } else {
    ring_[next_ % kCapacity] = e;
  }
  ++next_;
}

void FlightRecorder::ended(uint64_t id, Status status) {
  // To the clock's tick: an operation's end is read on every call's path,
  // and the dump shows whole milliseconds.
  const auto now = base::coarse_now();
  std::lock_guard<std::mutex> lock(mu_);
  // Operations end in issue order, so the entry is among the newest.
  for (size_t k = 0; k < ring_.size(); ++k) {
    Entry& e = ring_[(next_ - 1 - k) % kCapacity];
    if (e.id < id) break;
    if (e.id == id) {
      e.ended = now;
      e.status = status;
    }
  }
}

namespace {

// The dump file, opened for appending without following a link, and only
// if it is a regular file of this user; -1 with *why set otherwise.
int open_dump(const std::string& path, std::string* why) {
  const int flags = O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(path.c_str(), flags, 0600);
  const size_t slash = path.rfind('/');
  if (fd < 0 && errno == ENOENT && slash != std::string::npos && slash > 0) {
    // The directory is made by the first dump, private to this user.
    ::mkdir(path.substr(0, slash).c_str(), 0700);
    fd = ::open(path.c_str(), flags, 0600);
  }
  if (fd < 0) {
    *why = errno == ELOOP ? "it is a symbolic link, which a dump never follows"
                          : base::errno_text(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    *why = str_cat("it is not a regular file of this process's user (uid ", ::geteuid(), ")");
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::string FlightRecorder::dump(const std::string& why) const {
  std::string not_written;
  const int fd = open_dump(path_, &not_written);
  if (fd < 0) return str_cat("did not write ", path_, ": ", not_written);
  std::unique_ptr<FILE, int (*)(FILE*)> f(::fdopen(fd, "a"), std::fclose);
  if (!f) {
    ::close(fd);
    return str_cat("did not write ", path_, ": ", base::errno_text(errno));
  }
  const auto now = Clock::now();
  auto ms = [](Clock::duration d) {
    return static_cast<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  std::lock_guard<std::mutex> lock(mu_);
  std::fprintf(f.get(), "gang \"%s\" rank %d of %d (global rank %d) at %s: %s\n",
               gang_.c_str(), rank_, size_, global_rank_,
               base::local_time_text().c_str(), why.c_str());
  std::fprintf(f.get(), "%-8s %-8s %-22s %-9s %-5s %-10s %-6s %-12s %s\n",
               "op#", "seq", "call", "dtype", "op", "count", "root", "status",
               "issued ms ago / took ms");
  const size_t n = ring_.size();
  for (size_t k = 0; k < n; ++k) {
    const Entry& e = ring_[(next_ - n + k) % kCapacity];
    const bool done = e.status != Status::kInProgress;
    std::fprintf(
        f.get(), "%-8llu %-8llu %-22s %-9s %-5s %-10zu %-6d %-12s %lld / %s\n",
        static_cast<unsigned long long>(e.id),
        static_cast<unsigned long long>(e.seq), op_api_name(e.kind),
        dtype_name(e.dtype), is_reduction(e.kind) ? reduce_op_name(e.op) : "-",
        e.count, e.root, recorder_status(e.status), ms(now - e.issued),
        done ? std::to_string(ms(std::max(e.ended - e.issued, Clock::duration::zero()))).c_str()
             : "-");
  }
  std::fprintf(f.get(), "\n");
  return "";
}

}  // namespace gang::core
