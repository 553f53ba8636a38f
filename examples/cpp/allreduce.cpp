// A data-parallel step in C++ with gang.hpp: every rank's gradient,
// averaged, under gangrun (e.g. build/gangrun --nproc-per-node 4 --
// build/examples/cpp_allreduce).
#include <gang/gang.hpp>

#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  try {
    gang::Gang g = gang::Gang::create();
    std::vector<float> grad(1024, static_cast<float>(g.rank()));
    // Overlap: start the average, do other work, then wait for it.
    gang::Work w = g.all_reduce_async(grad.data(), grad.data(), grad.size(), gang::Op::Avg);
    while (!w.wait_for(std::chrono::milliseconds(1))) {
      // ...the next layer's backward would run here...
    }
    const float want = (g.size() - 1) / 2.0f;
    if (grad[0] != want) {
      std::fprintf(stderr, "rank %d: %g, not %g\n", g.rank(), grad[0], want);
      return 1;
    }
    std::printf("c++: rank %d of %d: average %g\n", g.rank(), g.size(), grad[0]);
  } catch (const gang::Error& e) {
    std::fprintf(stderr, "gang: %s\n", e.what());
    return e.status() == GANG_ERR_INVALID_ARGUMENT ? 2 : 1;
  }
  return 0;
}
