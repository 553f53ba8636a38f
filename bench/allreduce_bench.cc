// allreduce_bench: all-reduce latency through gang and through plain Gloo.
//
//   build/bench/allreduce_bench [--quick] [--only VARIANT,...]
//
// Forks two ranks on this machine (TCP over 127.0.0.1). Both rendezvous
// through files in a fresh temporary directory, then time, for float32 SUM
// of 8 B, 1 MiB and 16 MiB:
//
//   gang        gang_all_reduce, blocking, in place
//   gloo        gloo::allreduce (the unbound-buffer API gang's Gloo backend
//               uses), with fresh AllreduceOptions per call as gang does
//
// and, to see what Gloo's TCP pairs' synchronous modes buy, the bound-buffer
// gloo::AllreduceRing<float> on three contexts whose pairs are
//
//   ring-async  left as they are: a device thread reads the sockets and
//               wakes the caller
//   ring-sync   setSync(true, false): the caller reads its socket, blocking
//   ring-poll   setSync(true, true): the caller busy-polls its socket
//
// (Synchronous pairs refuse the unbound buffers that gloo::allreduce uses,
// so only the older bound-buffer algorithms can run on them.)
//
// Variants are interleaved in rounds so that load from elsewhere on the
// machine hits them alike. Rank 0 times every call and prints the median,
// 90th percentile and mean in microseconds, and each variant's ratio to its
// reference (gang to gloo, the synchronous rings to ring-async). Not a test:
// run it by hand, on a machine as quiet as you can find.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gang/gang.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_ring.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

namespace {

constexpr int kRanks = 2;

struct Size {
  const char* label;
  size_t bytes;
  int iterations;  // timed calls per variant, split over the rounds
  int warmup;      // untimed calls per variant per round
};

struct Variant {
  std::string name;
  std::function<void()> call;  // one all-reduce of the current buffer
  std::vector<double> samples_us;
};

struct Stats {
  double median = 0;
  double p90 = 0;
  double mean = 0;
};

Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.p90 = v[std::min(n - 1, n * 9 / 10)];
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(n);
  return s;
}

[[noreturn]] void die(const std::string& what) {
  throw std::runtime_error(what);
}

void check_gang(gang_status_t s, const char* what) {
  if (s != GANG_OK) {
    die(std::string(what) + ": " + gang_status_name(s) + ": " +
        gang_last_error());
  }
}

std::shared_ptr<gloo::rendezvous::Context> connect(
    gloo::rendezvous::Store& base, const std::string& prefix, int rank,
    std::shared_ptr<gloo::transport::Device>& device) {
  gloo::rendezvous::PrefixStore store(prefix, base);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, kRanks);
  ctx->setTimeout(std::chrono::seconds(120));
  ctx->connectFullMesh(store, device);
  return ctx;
}

void set_sync(gloo::Context& ctx, bool busy_poll) {
  for (int peer = 0; peer < ctx.size; ++peer) {
    if (peer != ctx.rank) ctx.getPair(peer)->setSync(true, busy_poll);
  }
}

struct Config {
  bool quick = false;
  std::string only;  // comma-separated variant names; empty: all
};

bool wanted(const Config& c, const std::string& name) {
  return c.only.empty() ||
         ("," + c.only + ",").find("," + name + ",") != std::string::npos;
}

int run_rank(int rank, const std::string& dir, const Config& config) {
  const bool quick = config.quick;
  std::vector<Size> sizes = {
      {"8 B", 8, 4000, 200},
      {"1 MiB", 1 << 20, 400, 10},
      {"16 MiB", 16 << 20, 60, 2},
  };
  const int rounds = 5;
  if (quick) {
    for (auto& s : sizes) {
      s.iterations = std::max(rounds, s.iterations / 20);
      s.warmup = 1;
    }
  }

  // gang, rendezvous through its file store.
  gang_options_t options;
  gang_options_init(&options);
  options.backend = "gloo";
  options.rank = rank;
  options.size = kRanks;
  options.timeout_ms = 120000;
  const std::string gang_url = "file://" + dir + "/gang";
  options.init_method = gang_url.c_str();
  gang_t* gang = nullptr;
  check_gang(gang_create(&options, &gang), "gang_create");

  // Plain Gloo on its own device, one context per mode.
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir + "/gloo");
  auto ctx_new = connect(store, "new", rank, device);
  auto ctx_async = connect(store, "async", rank, device);
  auto ctx_sync = connect(store, "sync", rank, device);
  auto ctx_poll = connect(store, "poll", rank, device);
  set_sync(*ctx_sync, false);
  set_sync(*ctx_poll, true);

  size_t max_bytes = 0;
  for (const auto& s : sizes) max_bytes = std::max(max_bytes, s.bytes);
  std::vector<float> buf(max_bytes / sizeof(float));

  if (rank == 0) {
    std::printf("all-reduce, float32 SUM, %d ranks on 127.0.0.1, %u CPUs%s\n",
                kRanks, std::thread::hardware_concurrency(),
                quick ? " (--quick)" : "");
    std::printf("latency in microseconds per call, timed on rank 0\n\n");
  }

  struct Row {
    std::string size, variant;
    Stats st;
  };
  std::vector<Row> rows;

  for (const auto& size : sizes) {
    const size_t count = size.bytes / sizeof(float);
    float* data = buf.data();

    // The bound-buffer algorithms register their buffers once.
    std::vector<float*> ptrs = {data};
    gloo::AllreduceRing<float> ring_async(ctx_async, ptrs, static_cast<int>(count));
    gloo::AllreduceRing<float> ring_sync(ctx_sync, ptrs, static_cast<int>(count));
    gloo::AllreduceRing<float> ring_poll(ctx_poll, ptrs, static_cast<int>(count));

    std::vector<Variant> variants;
    variants.push_back({"gang", [&] {
      check_gang(gang_all_reduce(gang, data, data, count, GANG_FLOAT32,
                                 GANG_SUM, nullptr),
                 "gang_all_reduce");
    }, {}});
    variants.push_back({"gloo", [&] {
      gloo::AllreduceOptions o(ctx_new);
      o.setOutput(data, count);
      o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
          &gloo::sum<float>));
      gloo::allreduce(o);
    }, {}});
    variants.push_back({"ring-async", [&] { ring_async.run(); }, {}});
    variants.push_back({"ring-sync", [&] { ring_sync.run(); }, {}});
    variants.push_back({"ring-poll", [&] { ring_poll.run(); }, {}});

    variants.erase(std::remove_if(variants.begin(), variants.end(),
                                  [&](const Variant& v) {
                                    return !wanted(config, v.name);
                                  }),
                   variants.end());

    // Every variant must add: rank r contributes r + 1.
    for (auto& v : variants) {
      std::fill(data, data + count, static_cast<float>(rank + 1));
      v.call();
      const float want = kRanks * (kRanks + 1) / 2.0f;
      if (data[0] != want || data[count - 1] != want) {
        die(v.name + " computed " + std::to_string(data[0]) + ", expected " +
            std::to_string(want));
      }
    }
    // Sums of zeros stay zero, so the data never grows to inf or NaN.
    std::fill(data, data + count, 0.0f);

    const int per_round = std::max(1, size.iterations / rounds);
    for (int round = 0; round < rounds; ++round) {
      for (auto& v : variants) {
        for (int i = 0; i < size.warmup; ++i) v.call();
        for (int i = 0; i < per_round; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          v.call();
          const auto t1 = std::chrono::steady_clock::now();
          v.samples_us.push_back(
              std::chrono::duration<double, std::micro>(t1 - t0).count());
        }
      }
    }
    for (auto& v : variants) rows.push_back({size.label, v.name, stats(v.samples_us)});
  }

  if (rank == 0) {
    // Each row's ratio is against its reference: gang against the same
    // collective in plain Gloo, the synchronous ring modes against async.
    auto reference = [](const std::string& variant) -> std::string {
      if (variant == "gang") return "gloo";
      if (variant == "ring-sync" || variant == "ring-poll") return "ring-async";
      return "";
    };
    auto find = [&](const std::string& size, const std::string& variant) {
      for (const auto& r : rows) {
        if (r.size == size && r.variant == variant) return &r;
      }
      return static_cast<const Row*>(nullptr);
    };
    std::printf("%-7s %-11s %9s %9s %9s   %s\n", "size", "variant", "median",
                "p90", "mean", "ratio median / mean");
    for (const auto& r : rows) {
      std::printf("%-7s %-11s %9.1f %9.1f %9.1f", r.size.c_str(),
                  r.variant.c_str(), r.st.median, r.st.p90, r.st.mean);
      const std::string ref = reference(r.variant);
      if (const Row* base = ref.empty() ? nullptr : find(r.size, ref)) {
        std::printf("   %5.2f / %5.2f  (%s/%s)", r.st.median / base->st.median,
                    r.st.mean / base->st.mean, r.variant.c_str(), ref.c_str());
      }
      std::printf("\n");
    }
  }

  check_gang(gang_destroy(gang), "gang_destroy");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      config.quick = true;
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      config.only = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: allreduce_bench [--quick] [--only VARIANT,...]\n"
                   "variants: gang gloo ring-async ring-sync ring-poll\n");
      return 2;
    }
  }

  char tmpl[] = "/tmp/gang-bench-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("allreduce_bench: mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  // Gloo's FileStore wants its directory to exist; gang makes its own.
  std::error_code ec;
  if (!std::filesystem::create_directory(dir + "/gloo", ec)) {
    std::fprintf(stderr, "allreduce_bench: cannot create %s/gloo: %s\n",
                 dir.c_str(), ec.message().c_str());
    return 1;
  }
  std::fflush(stdout);

  const pid_t child = fork();
  if (child < 0) {
    std::perror("allreduce_bench: fork");
    return 1;
  }
  const int rank = child == 0 ? 1 : 0;
  int rc;
  try {
    rc = run_rank(rank, dir, config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_bench: rank %d: %s\n", rank, e.what());
    rc = 1;
  }
  if (child == 0) {
    std::fflush(stdout);
    _exit(rc);
  }
  if (rc != 0) kill(child, SIGTERM);
  int status = 0;
  if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    rc = 1;
  }
  std::filesystem::remove_all(dir, ec);
  return rc;
}
