#include "launcher/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "launcher/platform.h"
#include "launcher/signals.h"

namespace gang::launcher {

using base::UniqueFd;

ExitStatus ExitStatus::from_wait(int wstatus) {
  ExitStatus s;
  if (WIFSIGNALED(wstatus)) {
    s.signaled = true;
    s.value = WTERMSIG(wstatus);
    s.core_dumped = WCOREDUMP(wstatus);
  } else {
    s.value = WEXITSTATUS(wstatus);
  }
  return s;
}

std::string ExitStatus::describe() const {
  if (!signaled) return "exited with status " + std::to_string(value);
  std::string text = "killed by signal " + std::to_string(value) + " (" +
                     signal_name(value) + ")";
  if (core_dumped) text += ", core dumped";
  return text;
}

namespace {

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe make_pipe(const char* what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw LaunchError(std::string("cannot create a pipe for ") + what + ": " +
                      errno_text(errno));
  }
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Reports errno to the parent and ends the child.
[[noreturn]] void child_failed(int report) {
  const int err = errno;
  ssize_t ignored = ::write(report, &err, sizeof err);
  (void)ignored;
  ::_exit(127);
}

// The child's side, between fork and execve: async-signal-safe calls only,
// since gangrun has other threads (the store server). Reports a failure as
// errno on `report` and exits 127.
[[noreturn]] void exec_child(const SpawnSpec& spec, char* const* argv,
                             char* const* envp, pid_t parent, int out_fd,
                             int err_fd, int report) {
  auto die = [report]() { child_failed(report); };
  // Its own process group: the terminal's Ctrl-C reaches gangrun only, which
  // forwards it once, and gangrun can signal the rank with what it started.
  if (::setpgid(0, 0) != 0) die();
  // Dies with gangrun, even by SIGKILL; and gangrun may already be gone.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die();
  if (::getppid() != parent) ::_exit(127);
  if (::sigprocmask(SIG_SETMASK, &SignalFd::empty_mask(), nullptr) != 0) die();
  if (spec.stdin_fd >= 0 && ::dup2(spec.stdin_fd, STDIN_FILENO) < 0) die();
  if (::dup2(out_fd, STDOUT_FILENO) < 0) die();
  if (::dup2(err_fd, STDERR_FILENO) < 0) die();
  ::execve(spec.path.c_str(), argv, envp);
  child_failed(report);
}

}  // namespace

Child Child::spawn(const SpawnSpec& spec, UniqueFd* out, UniqueFd* err) {
  Pipe out_pipe = make_pipe("stdout");
  Pipe err_pipe = make_pipe("stderr");
  Pipe report = make_pipe("exec errors");
  // Everything the child needs is built before fork.
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) throw LaunchError("fork: " + errno_text(errno));
  if (pid == 0) {
    exec_child(spec, argv.data(), envp.data(), parent, out_pipe.write.get(),
               err_pipe.write.get(), report.write.get());
  }
  Child child(pid);
  out_pipe.write.reset();
  err_pipe.write.reset();
  report.write.reset();

  // EOF: execve closed the report pipe, the program runs. Otherwise errno.
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report.read.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    child.try_reap();  // it exits 127 right away; the destructor waits
    throw LaunchError("cannot run " + spec.path + ": " +
                      errno_text(child_errno));
  }
  for (int fd : {out_pipe.read.get(), err_pipe.read.get()}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  *out = std::move(out_pipe.read);
  *err = std::move(err_pipe.read);
  return child;
}

Child::Child(Child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      reaped_(other.reaped_),
      status_(other.status_) {}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    pid_ = std::exchange(other.pid_, -1);
    reaped_ = other.reaped_;
    status_ = other.status_;
  }
  return *this;
}

Child::~Child() { kill_and_reap(); }

void Child::kill_and_reap() {
  if (!running()) return;
  signal(SIGKILL);
  int wstatus = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &wstatus, 0);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) status_ = ExitStatus::from_wait(wstatus);
  reaped_ = true;
}

void Child::signal(int sig) const {
  if (!running()) return;
  // The group exists as long as its leader (the rank) is not reaped; before
  // the child's setpgid the group does not exist yet, so fall back on it.
  if (::kill(-pid_, sig) != 0) ::kill(pid_, sig);
}

bool Child::try_reap() {
  if (!running()) return false;
  int wstatus = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &wstatus, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    status_ = ExitStatus::from_wait(wstatus);
    reaped_ = true;
    return true;
  }
  if (r < 0 && errno == ECHILD) {  // reaped elsewhere: nothing to wait for
    reaped_ = true;
    return true;
  }
  return false;
}

}  // namespace gang::launcher
