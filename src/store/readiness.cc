#include "store/readiness.h"

#include <cerrno>
#include <chrono>
#include <thread>

#include "base/error.h"
#include "store/store_util.h"

namespace gang::store {

Readiness::Readiness() : epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (!epoll_.valid()) {
    fail(Status::kSystem, "store server: cannot create an epoll instance: ",
         detail::errno_text(errno));
  }
}

bool Readiness::add(int fd, uint64_t tag, uint32_t events) {
  epoll_event e{};
  e.events = events;
  e.data.u64 = tag;
  return ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &e) == 0;
}

bool Readiness::change(int fd, uint64_t tag, uint32_t events) {
  epoll_event e{};
  e.events = events;
  e.data.u64 = tag;
  return ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &e) == 0;
}

void Readiness::remove(int fd) {
  epoll_event unused{};  // kernels before 2.6.9 wanted one
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, &unused);
}

int Readiness::wait(epoll_event* out, int max, int timeout_ms) {
  const int n = ::epoll_wait(epoll_.get(), out, max, timeout_ms);
  if (n >= 0) return n;
  // Only a signal can end a wait on a valid instance early; should anything
  // else, the caller's loop must not spin on it.
  if (errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return 0;
}

}  // namespace gang::store
