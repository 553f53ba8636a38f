// gang_torch._C: the compiled backend as Python sees it. gang_torch's
// __init__ registers it with torch.distributed under the name "gang".
#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>

#include <thread>

#include "backend.h"

namespace py = pybind11;

namespace {

using gang_torch::GangBackend;

// Runs Python's signal handlers; throws what one raised (Ctrl-C's
// KeyboardInterrupt), which pybind hands back to Python as it was.
void check_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
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
  m.def(
      "shutdown_all",
      [] {
        py::gil_scoped_release nogil;
        GangBackend::shutdown_all();
      },
      "Aborts what is in flight on every backend and stops their threads (at exit)");
}
