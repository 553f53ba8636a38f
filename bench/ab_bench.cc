// A/B of two builds of libgang, call by call.
//
//   build/bench/ab_bench OLD/libgang.so.0 NEW/libgang.so.0 [PAIRS]
//
// Two ranks (forked, 127.0.0.1). Each rank loads both libraries side by side
// (dlopen by path, RTLD_LOCAL: each copy keeps its own symbols) and creates
// one 2-rank gang with each (gloo, or $AB_BACKEND). Then, PAIRS times per size, it runs one
// float32 SUM all-reduce on the old gang and one on the new, in alternating
// order, timing each on rank 0. Whatever the machine does at that moment
// hits both calls of a pair alike, so a difference of a few percent shows
// even where run-to-run noise is tens of percent. Prints each library's
// median, their ratio, and the median of the per-pair differences.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gang/gang.h>

namespace {

constexpr int kRanks = 2;

// The handful of entry points the benchmark calls, from one library.
struct Lib {
  std::string path;
  void* handle = nullptr;
  decltype(&gang_options_init_v) options_init = nullptr;
  decltype(&gang_create) create = nullptr;
  decltype(&gang_all_reduce) all_reduce = nullptr;
  decltype(&gang_destroy) destroy = nullptr;
  decltype(&gang_last_error) last_error = nullptr;
  gang_t* gang = nullptr;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "ab_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename F>
void resolve(Lib& lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib.handle, name));
  if (fn == nullptr) die(lib.path + " has no " + name);
}

void load(Lib& lib) {
  lib.handle = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == nullptr) die(std::string("dlopen: ") + dlerror());
  resolve(lib, lib.options_init, "gang_options_init_v");
  resolve(lib, lib.create, "gang_create");
  resolve(lib, lib.all_reduce, "gang_all_reduce");
  resolve(lib, lib.destroy, "gang_destroy");
  resolve(lib, lib.last_error, "gang_last_error");
}

void check(const Lib& lib, gang_status_t s, const char* what) {
  if (s != GANG_OK) die(lib.path + ": " + what + ": " + lib.last_error());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int run_rank(int rank, Lib (&libs)[2], const std::string& dir, int pairs) {
  for (int i = 0; i < 2; ++i) {
    load(libs[i]);
    gang_options_t o;
    libs[i].options_init(&o, sizeof o);
    // AB_BACKEND: the backend both gangs use (default gloo; "shm" for the
    // one-host path).
    const char* backend = std::getenv("AB_BACKEND");
    o.backend = backend != nullptr ? backend : "gloo";
    o.rank = rank;
    o.size = kRanks;
    o.timeout_ms = 120000;
    const std::string url = "file://" + dir + "/gang" + std::to_string(i);
    o.init_method = url.c_str();
    check(libs[i], libs[i].create(&o, &libs[i].gang), "gang_create");
  }
  struct Size {
    const char* label;
    size_t bytes;
    int pairs;
  };
  const Size sizes[] = {{"8 B", 8, pairs}, {"1 MiB", 1 << 20, std::max(1, pairs / 20)}};
  std::vector<float> buf((1 << 20) / sizeof(float), 0.0f);
  if (rank == 0) {
    std::printf("all-reduce, float32 SUM, %d ranks on 127.0.0.1; A = %s, B = %s\n",
                kRanks, libs[0].path.c_str(), libs[1].path.c_str());
    std::printf("%-6s %7s %10s %10s %8s %14s\n", "size", "pairs", "A median",
                "B median", "B/A", "median(B-A)");
  }
  for (const Size& size : sizes) {
    const size_t count = size.bytes / sizeof(float);
    std::vector<double> t[2], diff;
    auto call = [&](int which) {
      const auto t0 = std::chrono::steady_clock::now();
      check(libs[which],
            libs[which].all_reduce(libs[which].gang, buf.data(), buf.data(), count,
                                   GANG_FLOAT32, GANG_SUM, nullptr),
            "gang_all_reduce");
      return std::chrono::duration<double, std::micro>(
                 std::chrono::steady_clock::now() - t0).count();
    };
    for (int i = 0; i < size.pairs / 10 + 1; ++i) call(i % 2);  // warm up
    for (int i = 0; i < size.pairs; ++i) {
      // Alternate which goes first (the same on both ranks).
      const int first = i % 2;
      double us[2];
      us[first] = call(first);
      us[1 - first] = call(1 - first);
      t[0].push_back(us[0]);
      t[1].push_back(us[1]);
      diff.push_back(us[1] - us[0]);
    }
    if (rank == 0) {
      const double a = median(t[0]), b = median(t[1]);
      std::printf("%-6s %7d %8.1f us %8.1f us %8.3f %+11.2f us\n", size.label,
                  size.pairs, a, b, b / a, median(diff));
    }
  }
  for (Lib& lib : libs) check(lib, lib.destroy(lib.gang), "gang_destroy");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: ab_bench OLD/libgang.so.0 NEW/libgang.so.0 [PAIRS]\n");
    return 2;
  }
  Lib libs[2];
  libs[0].path = std::filesystem::absolute(argv[1]).string();
  libs[1].path = std::filesystem::absolute(argv[2]).string();
  const int pairs = argc > 3 ? std::atoi(argv[3]) : 20000;
  char tmpl[] = "/tmp/gang-ab.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) die("mkdtemp failed");
  const std::string dir = tmpl;
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int rc = run_rank(r, libs, dir, pairs);
      std::fflush(stdout);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int st = 0;
    waitpid(pid, &st, 0);
    failed |= !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  std::filesystem::remove_all(dir);
  return failed;
}
