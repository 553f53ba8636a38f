// gang_torch._C: the compiled backend as Python sees it. gang_torch's
// __init__ registers it with torch.distributed under the name "gang".
#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "backend.h"
#include "cuda.h"

namespace py = pybind11;

namespace {

using gang_torch::GangBackend;

// Runs Python's signal handlers; throws what one raised (Ctrl-C's
// KeyboardInterrupt), which pybind hands back to Python as it was.
void check_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// ---- Ctrl-C in a blocking call ---------------------------------------
// A blocking collective is one call into gang with the GIL released, where
// Python's SIGINT handler only sets a flag. A handler put in front of
// Python's calls it, then wakes a watcher thread through a pipe; the
// watcher aborts the gang the main thread is blocked in (abort_blocking),
// when Python's handler is still the one that raises KeyboardInterrupt (a
// program's own handler gets its blocked call to finish). The call then
// fails and raises the pending KeyboardInterrupt instead of its error.

struct sigaction python_sigint;
int wake_pipe[2] = {-1, -1};

void on_sigint(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  if (python_sigint.sa_flags & SA_SIGINFO) {
    python_sigint.sa_sigaction(sig, info, context);
  } else if (python_sigint.sa_handler != SIG_DFL && python_sigint.sa_handler != SIG_IGN) {
    python_sigint.sa_handler(sig);
  }
  char byte = 1;
  if (write(wake_pipe[1], &byte, 1) < 0) { /* full: a wake is pending */ }
  errno = saved;
}

// Whether SIGINT's Python handler raises KeyboardInterrupt.
bool sigint_raises() {
  if (_Py_IsFinalizing()) return false;
  py::gil_scoped_acquire gil;
  try {
    py::module signal = py::module::import("signal");
    return signal.attr("getsignal")(SIGINT).is(signal.attr("default_int_handler"));
  } catch (const py::error_already_set&) {
    return false;
  }
}

void watch_interrupts() {
  for (;;) {
    char byte;
    const ssize_t n = read(wake_pipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    if (sigint_raises()) gang_torch::abort_blocking();
  }
}

// Installs the handler in front of Python's, once; false where Python
// does not handle SIGINT.
bool install_interrupt() {
  if (sigaction(SIGINT, nullptr, &python_sigint) != 0) return false;
  if (!(python_sigint.sa_flags & SA_SIGINFO) &&
      (python_sigint.sa_handler == SIG_DFL || python_sigint.sa_handler == SIG_IGN)) {
    return false;
  }
  if (pipe2(wake_pipe, O_CLOEXEC) != 0) return false;
  (void)fcntl(wake_pipe[1], F_SETFL, O_NONBLOCK);
  std::thread(watch_interrupts).detach();
  struct sigaction sa {};
  sa.sa_sigaction = on_sigint;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGINT, &sa, nullptr) == 0;
}

c10::intrusive_ptr<GangBackend> make(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                     int size, int64_t timeout_ms, const std::string& name) {
  py::gil_scoped_release nogil;  // creation waits for the peers
  return c10::make_intrusive<GangBackend>(store, rank, size,
                                          std::chrono::milliseconds(timeout_ms), name);
}

c10::intrusive_ptr<GangBackend> on_gang(uintptr_t address, int64_t timeout_ms,
                                        const std::string& name) {
  return c10::make_intrusive<GangBackend>(reinterpret_cast<gang_t*>(address), false, nullptr,
                                          std::chrono::milliseconds(timeout_ms), name);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "gang's torch.distributed backend, compiled against this torch";
  py::module::import("torch.distributed");
  py::object threading = py::module::import("threading");
  if (threading.attr("current_thread")().is(threading.attr("main_thread")())) {
    gang_torch::set_signal_check(std::this_thread::get_id(), check_signals);
    install_interrupt();
  }
  py::class_<GangBackend, c10d::Backend, c10::intrusive_ptr<GangBackend>>(m, "GangBackend")
      .def(py::init(&make), py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("timeout_ms"), py::arg("name"))
      .def_static("on_gang", &on_gang, py::arg("address"), py::arg("timeout_ms"),
                  py::arg("name"),
                  "A backend on an existing gang (its gang_t* address), which the caller "
                  "keeps alive for as long as the backend")
      .def("split",
           [](GangBackend& self, const c10::intrusive_ptr<c10d::Store>& store,
              const std::vector<int>& ranks,
              const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
             py::gil_scoped_release nogil;
             return self.split(store, ranks, opts);
           })
      .def(
          "perform_nocolor_split",
          [](GangBackend& self, const py::object& /*device*/) {
            py::gil_scoped_release nogil;
            self.split_out();
          },
          py::arg("device") = py::none(),
          "This rank's side of a split it is not in (collective over the group)")
      .def_property_readonly(
          "gang_address",
          [](const GangBackend& self) { return reinterpret_cast<uintptr_t>(self.gang()); },
          "The address of the CPU gang (gang_t*) behind this backend");
  m.attr("cuda_built") = gang_torch::cuda_built();
  m.def(
      "shutdown_all",
      [] {
        py::gil_scoped_release nogil;
        GangBackend::shutdown_all();
      },
      "Aborts what is in flight on every backend and stops their threads (at exit)");
}
