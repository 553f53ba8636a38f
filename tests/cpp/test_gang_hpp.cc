// test_gang_hpp.cc - gang.hpp, the header-only C++ API, on real ranks (3
// processes on shm and on gloo) and on a fake gang: RAII handles, the
// exception type, collectives over vectors and pointers, works waited with
// a timeout, split, and the topology as values.
#include <gang/gang.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "harness.h"

namespace {

#define EXPECT(cond, ...)                                                \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::fprintf(stderr, "%s:%d: `%s` failed: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                 \
      std::fprintf(stderr, "\n");                                        \
      return 1;                                                          \
    }                                                                    \
  } while (0)

int ranks(gang_t* raw, int rank, int size, void*) {
  try {
    gang::Gang g = gang::Gang::view(raw);
    EXPECT(g.rank() == rank && g.size() == size, "rank %d size %d", g.rank(), g.size());

    std::vector<float> v(5, static_cast<float>(rank + 1));
    g.all_reduce(v, gang::Op::Sum);
    const float sum = size * (size + 1) / 2.0f;
    for (float x : v) EXPECT(x == sum, "all_reduce gave %g, not %g", x, sum);

    std::vector<int64_t> in(4), out(4);
    std::iota(in.begin(), in.end(), rank * 10);
    gang::Work w = g.all_reduce_async(in.data(), out.data(), in.size(), gang::Op::Max);
    while (!w.wait_for(std::chrono::milliseconds(5))) {
    }
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT(out[i] == static_cast<int64_t>((size - 1) * 10 + i), "max[%zu] = %lld", i,
             static_cast<long long>(out[i]));
    }
    EXPECT(w.test(), "a finished work is not done");

    std::vector<double> b(3, rank == 1 ? 2.5 : 0.0);
    g.broadcast(b, 1);
    for (double x : b) EXPECT(x == 2.5, "broadcast gave %g", x);

    const std::vector<int32_t> all = g.all_gather(std::vector<int32_t>{rank, -rank});
    EXPECT(all.size() == 2u * static_cast<size_t>(size), "all_gather gave %zu", all.size());
    for (int r = 0; r < size; ++r) EXPECT(all[2 * r] == r && all[2 * r + 1] == -r, "all_gather");

    std::vector<uint32_t> full(static_cast<size_t>(size) * 2, 1u);
    const std::vector<uint32_t> mine = g.reduce_scatter(full);
    EXPECT(mine.size() == 2 && mine[0] == static_cast<uint32_t>(size), "reduce_scatter");

    // A ring of messages.
    std::vector<int16_t> msg(7, static_cast<int16_t>(rank)), got(7);
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    if (rank % 2 == 0) {
      g.send(msg, next, 3);
      g.recv(got, prev, 3);
    } else {
      g.recv(got, prev, 3);
      g.send(msg, next, 3);
    }
    EXPECT(got[6] == prev, "received %d from %d", got[6], prev);

    EXPECT(g.broadcast_bytes(rank == 0 ? "hello" : "", 0) == "hello", "broadcast_bytes");

    // Errors: a status and the library's message naming the argument.
    try {
      g.broadcast(b, size + 5);
      EXPECT(false, "a broadcast from rank %d did not throw", size + 5);
    } catch (const gang::Error& e) {
      EXPECT(e.status() == GANG_ERR_INVALID_ARGUMENT, "status %s", gang_status_name(e.status()));
      EXPECT(std::strstr(e.what(), "root") != nullptr, "message: %s", e.what());
    }

    {
      gang::Gang half = g.split(rank % 2, rank);
      EXPECT(static_cast<bool>(half), "split gave no gang");
      std::vector<int32_t> one{1};
      half.all_reduce(one);
      EXPECT(one[0] == half.size(), "the split's sum %d, size %d", one[0], half.size());
      gang::Gang none = g.split(rank == 0 ? GANG_COLOR_NONE : 0, rank);
      EXPECT(static_cast<bool>(none) == (rank != 0), "GANG_COLOR_NONE");
    }

    gang::ParallelConfig config;
    config.tp = size;
    gang::Gangs gangs = g.split_parallel(config);
    gang::Gang tp = gangs.get(GANG_AXIS_TP);
    EXPECT(tp.size() == size, "tp size %d", tp.size());
    tp.barrier();
    gang::Work bw = g.barrier_async();
    bw.wait();
  } catch (const gang::Error& e) {
    std::fprintf(stderr, "rank %d: unexpected gang::Error: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}

int run(const char* backend) {
  return gang_test_run_ranks(3, backend, ranks, nullptr, 20000, 60);
}

int fake_and_layout() {
  gang::Gang g = gang::Gang::fake(1, 4);
  std::vector<float> v{1.0f, 2.0f};
  g.all_reduce(v, gang::Op::Sum);
  EXPECT(v[0] == 4.0f && v[1] == 8.0f, "fake sums %g %g", v[0], v[1]);
  gang::ParallelConfig c;
  c.tp = 2;
  c.pp = 2;
  c.dp = 2;
  const std::vector<int> dp = gang::layout_ranks(8, c, GANG_AXIS_DP, 5);
  EXPECT(dp == (std::vector<int>{1, 5}), "dp ranks of 5: %zu of them", dp.size());
  try {
    gang::Gang::fake(5, 4);
    EXPECT(false, "fake(5, 4) did not throw");
  } catch (const gang::Error& e) {
    EXPECT(e.status() == GANG_ERR_INVALID_ARGUMENT, "%s", e.what());
  }
  gang::Gang moved = std::move(g);
  EXPECT(!g && moved && moved.rank() == 1, "move");
  return 0;
}

}  // namespace

int main() {
  int failed = 0;
  if (fake_and_layout() != 0) failed = 1;
  std::printf("fake gang and layout: %s\n", failed ? "FAILED" : "ok");
  for (const char* backend : {"shm", "gloo"}) {
    const int rc = run(backend);
    std::printf("3 ranks on %s: %s\n", backend, rc == 0 ? "ok" : "FAILED");
    if (rc != 0) failed = 1;
  }
  return failed;
}
