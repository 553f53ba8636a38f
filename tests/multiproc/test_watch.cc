// multiproc.watch.*: device gangs watched for their peers' failure notices,
// against the NCCL host double (GANG_TEST_NCCL_DOUBLE; skipped without it).
//
// quiet: 2 ranks each hold 5 device gangs (a root gang and 4 splits, made
//   after 8 more splits came and went) through a TCP store the test serves;
//   idle for 1.5 s, they cost the store at most a few looks a second
//   per process, not a look per gang: the server counts the requests.
// notice: 2 ranks, 5 device gangs each; rank 1's sixth operation fails
//   without a word on the wire (the double's quiet_error), so rank 0,
//   blocked in it, hears of it only through the notice: within a second,
//   while its other gangs carry on.
// churn: 2 ranks, two threads each making and destroying splits of a root
//   gang of their own at once (the watcher's gangs come and go from several
//   threads), while another gang stays watched and works.
//
// C++ for the store server's request count (the store layer's own objects,
// as gangrun links them); the ranks use only the public C API.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <gang/gang.h>

// Before cmocka.h, whose fail() macro would rewrite gang's own fail().
#include "store/store_options.h"
#include "store/tcp_server.h"

extern "C" {
#include <cmocka.h>
}

#include "harness.h"

namespace {

constexpr int kRanks = 2;
constexpr int kGangs = 5;
constexpr int kWallS = 120;
// One look at the job's store every 100 ms per process (with room for a
// slow machine), whatever the number of gangs; the old watchers made one
// per gang, 50 a second here.
constexpr double kMaxRequestsPerProcess = 15;
// Shared slots: 0..kRanks-1 a rank's gangs are made, kRelease the parent
// counted.
constexpr int kRelease = kRanks;

double g_rate = -1;  // requests/s the parent counted

int (*cuda_malloc)(void**, size_t) = nullptr;

bool on_double() { return std::getenv("GANG_TEST_NCCL_DOUBLE") != nullptr; }

void skip_unless_double() {
  if (!on_double()) {
    print_message("skipped: needs the NCCL host double "
                  "(GANG_TEST_NCCL_DOUBLE)\n");
    skip();
  }
  void* lib = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) fail_msg("the double's CUDA runtime: %s", dlerror());
  *reinterpret_cast<void**>(&cuda_malloc) = dlsym(lib, "cudaMalloc");
  if (cuda_malloc == nullptr) fail_msg("the double has no cudaMalloc");
}

// A TCP store server in a process of its own, which tells on a pipe how
// many requests it has carried out. Not a thread of the test's process:
// that process forks the ranks, which a thread of its own would make
// unsafe (and ThreadSanitizer refuses).
struct Server {
  pid_t pid = -1;
  int ask = -1;     // a byte asks for the count
  int answer = -1;  // the port, then each count
  std::string url;
};

Server serve() {
  int to[2], from[2];
  Server s;
  if (::pipe(to) != 0 || ::pipe(from) != 0) return s;
  s.pid = ::fork();
  if (s.pid == 0) {
    ::close(to[1]);
    ::close(from[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    try {
      gang::store::TcpStoreServer server(
          "127.0.0.1", 0, gang::store::server_options_from_env());
      const int port = server.port();
      if (::write(from[1], &port, sizeof port) != sizeof port) ::_exit(1);
      char c;
      while (::read(to[0], &c, 1) == 1) {
        const uint64_t n = server.stats().requests;
        if (::write(from[1], &n, sizeof n) != sizeof n) ::_exit(1);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "store server: %s\n", e.what());
      ::_exit(1);
    }
    ::_exit(0);  // asked no more: the test is done with it
  }
  ::close(to[0]);
  ::close(from[1]);
  s.ask = to[1];
  s.answer = from[0];
  int port = 0;
  if (s.pid > 0 && ::read(s.answer, &port, sizeof port) == sizeof port) {
    s.url = "tcp://127.0.0.1:" + std::to_string(port);
  }
  return s;
}

// The server's count; UINT64_MAX if it does not answer.
uint64_t requests(const Server& s) {
  uint64_t n = 0;
  const char c = 1;
  if (::write(s.ask, &c, 1) != 1 || ::read(s.answer, &n, sizeof n) != sizeof n) {
    return UINT64_MAX;
  }
  return n;
}

void stop(Server& s) {
  ::close(s.ask);
  ::close(s.answer);
  if (s.pid > 0) ::waitpid(s.pid, nullptr, 0);
}

Server g_server;

// A device gang of this job named `name` ("" for the default).
gang_status_t create_device_gang(int rank, int size, const char* url, const char* name,
                                 gang_t** out) {
  gang_options_t o;
  gang_options_init(&o);
  o.rank = rank;
  o.size = size;
  o.init_method = url;
  o.device_type = GANG_DEVICE_CUDA;
  o.timeout_ms = 60000;
  if (name[0] != '\0') o.name = name;
  return gang_create(&o, out);
}

// A root device gang and kGangs - 1 splits of it (all ranks in each).
int make_gangs(int rank, int size, const char* url, gang_t** g) {
  CHECK_OK(create_device_gang(rank, size, url, "", &g[0]));
  for (int i = 1; i < kGangs; ++i) CHECK_OK(gang_split(g[0], 0, rank, &g[i]));
  return 0;
}

gang_status_t all_reduce(gang_t* g, float* d) {
  gang_work_t* w = nullptr;
  gang_status_t s = gang_all_reduce(g, d, d, 16, GANG_FLOAT32, GANG_SUM, &w);
  if (s == GANG_OK) s = gang_work_wait(w, -1);
  if (w != nullptr) gang_work_destroy(w);
  return s;
}

// ---- quiet --------------------------------------------------------------

int hold_gangs(int rank, int size, const char* url, void*) {
  gang_t* g[kGangs] = {};
  CHECK(make_gangs(rank, size, url, g) == 0, "gangs");
  // Gangs that come and go while the others are watched.
  for (int i = 0; i < 8; ++i) {
    gang_t* t = nullptr;
    CHECK_OK(gang_split(g[0], 0, rank, &t));
    CHECK_OK(gang_destroy(t));
  }
  gang_test_shared_ints()[rank] = 1;
  CHECK(gang_test_wait_shared(kRelease, 1, 60000) == 0, "never released");
  for (int i = kGangs - 1; i >= 0; --i) CHECK_OK(gang_destroy(g[i]));
  return 0;
}

void count_requests(const pid_t*, int size, void*) {
  for (int r = 0; r < size; ++r) {
    if (gang_test_wait_shared(r, 1, 60000) != 0) {
      gang_test_shared_ints()[kRelease] = 1;
      return;
    }
  }
  // Every gang's first look at its board is behind it.
  gang_test_sleep_ms(300);
  const uint64_t before = requests(g_server);
  const int64_t t0 = gang_test_now_ms();
  gang_test_sleep_ms(1500);
  const uint64_t after = requests(g_server);
  const int64_t t1 = gang_test_now_ms();
  if (before != UINT64_MAX && after != UINT64_MAX) {
    g_rate = static_cast<double>(after - before) * 1000.0 /
             static_cast<double>(t1 - t0);
  }
  gang_test_shared_ints()[kRelease] = 1;
}

void test_quiet(void**) {
  skip_unless_double();
  g_server = serve();
  assert_false(g_server.url.empty());
  gang_test_opts_t o;
  gang_test_opts_init(&o);
  o.size = kRanks;
  o.plain_fn = hold_gangs;
  o.store_url = g_server.url.c_str();
  o.parent_fn = count_requests;
  o.wall_timeout_s = kWallS;
  const int rc = gang_test_run(&o);
  stop(g_server);
  assert_int_equal(rc, 0);
  print_message("%d processes x %d idle device gangs: %.1f store requests/s\n",
                kRanks, kGangs, g_rate);
  assert_true(g_rate >= 0);
  assert_true(g_rate <= kRanks * kMaxRequestsPerProcess);
}

// ---- churn --------------------------------------------------------------

struct Churn {
  gang_t* root;
  int rank;
  int failures;
};

void* churn_splits(void* arg) {
  auto* c = static_cast<Churn*>(arg);
  for (int i = 0; i < 10; ++i) {
    gang_t* t = nullptr;
    if (gang_split(c->root, 0, c->rank, &t) != GANG_OK ||
        gang_destroy(t) != GANG_OK) {
      std::fprintf(stderr, "[rank %d] churn: %s\n", c->rank,
                   gang_last_error());
      ++c->failures;
    }
  }
  return nullptr;
}

// Two root gangs (each with a store of its own) whose splits two threads
// make and destroy at once, while a third gang stays watched throughout.
int churn(int rank, int size, const char* url, void*) {
  gang_t* roots[2] = {};
  gang_t* steady = nullptr;
  const char* names[2] = {"a", "b"};
  for (int i = 0; i < 2; ++i) CHECK_OK(create_device_gang(rank, size, url, names[i], &roots[i]));
  CHECK_OK(gang_split(roots[0], 0, rank, &steady));
  Churn c[2] = {{roots[0], rank, 0}, {roots[1], rank, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], nullptr, churn_splits, &c[i]);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], nullptr);
  CHECK(c[0].failures == 0 && c[1].failures == 0, "churn failed");
  void* d = nullptr;
  CHECK(cuda_malloc(&d, 16 * sizeof(float)) == 0, "cudaMalloc");
  CHECK_OK(all_reduce(steady, static_cast<float*>(d)));
  CHECK_OK(gang_destroy(steady));
  for (int i = 1; i >= 0; --i) CHECK_OK(gang_destroy(roots[i]));
  return 0;
}

void test_churn(void**) {
  skip_unless_double();
  assert_int_equal(gang_test_run_procs(kRanks, churn, nullptr, kWallS), 0);
}

// ---- notice -------------------------------------------------------------

int notice_reaches(int rank, int size, const char* url, void*) {
  gang_t* g[kGangs] = {};
  // A buffer per gang: an operation that failed may still be running on
  // its gang's stream.
  float* buf[kGangs] = {};
  CHECK(make_gangs(rank, size, url, g) == 0, "gangs");
  for (int i = 0; i < kGangs; ++i) {
    void* d = nullptr;
    CHECK(cuda_malloc(&d, 16 * sizeof(float)) == 0, "cudaMalloc");
    buf[i] = static_cast<float*>(d);
  }
  for (int i = 0; i < kGangs; ++i) CHECK_OK(all_reduce(g[i], buf[i]));
  // The sixth operation of the test's (each gang's first is the module's
  // own warm-up): rank 1's fails quietly; rank 0's waits for it.
  const int64_t t0 = gang_test_now_ms();
  const gang_status_t s = all_reduce(g[3], buf[3]);
  const int64_t took = gang_test_now_ms() - t0;
  CHECK(s == GANG_ERR_PEER_LOST, "got %s: %s", gang_status_name(s),
        gang_last_error());
  if (rank == 0) {
    CHECK(std::strstr(gang_last_error(), "another rank failed") != nullptr,
          "not from the notice: %s", gang_last_error());
    std::fprintf(stderr, "[rank 0] the notice arrived after %lld ms\n",
                 static_cast<long long>(took));
    CHECK(took < 1000, "failed after %lld ms", static_cast<long long>(took));
  }
  // A notice fails its own gang only.
  for (int i = 0; i < kGangs; ++i) {
    if (i != 3) CHECK_OK(all_reduce(g[i], buf[i]));
  }
  for (int i = kGangs - 1; i >= 0; --i) gang_destroy(g[i]);
  return 0;
}

void test_notice(void**) {
  skip_unless_double();
  const std::string fault = "quiet_error:1:" + std::to_string(kGangs + 6);
  setenv("GANG_NCCL_DOUBLE_FAULT", fault.c_str(), 1);
  const int rc = gang_test_run_procs(kRanks, notice_reaches, nullptr, kWallS);
  unsetenv("GANG_NCCL_DOUBLE_FAULT");
  assert_int_equal(rc, 0);
}

}  // namespace

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quiet),
      cmocka_unit_test(test_churn),
      cmocka_unit_test(test_notice),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
