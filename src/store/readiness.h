// The descriptors one server thread waits on, through epoll: each is
// registered once, with a tag the caller picks and the events it waits for,
// and a wait answers only those that are ready. A pass of the server then
// costs what happened, not how many connections are open (thousands, one
// or more per rank).
#pragma once

#include <sys/epoll.h>

#include <cstdint>

#include "base/unique_fd.h"

namespace gang::store {

class Readiness {
 public:
  // Throws Error(kSystem) when the kernel has no epoll instance to give.
  Readiness();

  // These return false with errno set when the kernel refuses (ENOMEM,
  // ENOSPC: past fs.epoll.max_user_watches).
  bool add(int fd, uint64_t tag, uint32_t events);
  bool change(int fd, uint64_t tag, uint32_t events);
  // Before fd is closed: a descriptor a forked child still holds open
  // would otherwise stay registered, and report events for a tag long gone.
  void remove(int fd);

  // Up to `max` ready descriptors into `out`, waiting at most timeout_ms
  // (-1: no limit); 0 when the time passed or a signal came.
  int wait(epoll_event* out, int max, int timeout_ms);

 private:
  base::UniqueFd epoll_;
};

}  // namespace gang::store
