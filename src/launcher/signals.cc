#include "launcher/signals.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

#include "launcher/platform.h"

namespace gang::launcher {

namespace {

bool ignored(int sig) {
  struct sigaction current {};
  return ::sigaction(sig, nullptr, &current) == 0 &&
         current.sa_handler == SIG_IGN;
}

void set_default(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
}

sigset_t make_empty() {
  sigset_t s;
  sigemptyset(&s);
  return s;
}

}  // namespace

const sigset_t& SignalFd::empty_mask() {
  static const sigset_t kEmpty = make_empty();
  return kEmpty;
}

SignalFd::SignalFd() {
  (void)empty_mask();  // built now, never first between fork and exec
  sigset_t handled;
  sigemptyset(&handled);
  for (const int sig : {SIGINT, SIGTERM}) {
    // An ignored signal is discarded before a signalfd could see it.
    set_default(sig);
    sigaddset(&handled, sig);
  }
  for (const int sig : {SIGHUP, SIGQUIT}) {
    if (!ignored(sig)) sigaddset(&handled, sig);
  }
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, SIGUSR2);  // asks every rank for a flight-recorder dump
  sigset_t blocked = handled;
  sigaddset(&blocked, SIGPIPE);
  if (::pthread_sigmask(SIG_BLOCK, &blocked, &old_mask_) != 0) {
    throw LaunchError("cannot block signals");
  }
  fd_.reset(::signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_.valid()) {
    const int err = errno;
    ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    throw LaunchError("signalfd: " + errno_text(err));
  }
}

SignalFd::~SignalFd() {
  fd_.reset();
  ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::vector<int> SignalFd::drain() {
  std::vector<int> out;
  signalfd_siginfo info[16];
  for (;;) {
    const ssize_t n = ::read(fd_.get(), info, sizeof info);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const size_t count = static_cast<size_t>(n) / sizeof info[0];
    for (size_t i = 0; i < count; ++i) {
      out.push_back(static_cast<int>(info[i].ssi_signo));
    }
  }
  return out;
}

int SignalFd::wait_terminating(int timeout_ms) {
  const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    for (const int sig : drain()) {
      if (sig != SIGCHLD && sig != SIGUSR2) return sig;
    }
    const int left = millis_until(end);
    if (left == 0) return 0;
    pollfd p{fd_.get(), POLLIN, 0};
    ::poll(&p, 1, left);
  }
}

}  // namespace gang::launcher
