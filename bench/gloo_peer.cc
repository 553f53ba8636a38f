// gloo_peer: the plain-Gloo side of bench/compare.sh - a program that uses
// Gloo directly (TCP device on 127.0.0.1, file-store rendezvous), as a user
// without gang would. Times gloo::allreduce (float SUM), gloo::broadcast
// (root 0), gloo::allgather or Gloo's reduce-scatter (the halving-doubling
// algorithm, made once per size as a program reusing it would; float SUM)
// with gang-bench's rules and prints one
// "size_bytes time_us" line per size on rank 0. Rank and size come from
// gangrun's GANG_RANK / GANG_SIZE.
//   gangrun --nproc-per-node N -- gloo_peer COLL MIN MAX FACTOR ITERS WARMUP DIR
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 8 || !std::getenv("GANG_RANK") || !std::getenv("GANG_SIZE")) {
    std::fprintf(stderr, "usage (under gangrun): gloo_peer COLL MIN MAX FACTOR ITERS WARMUP DIR\n");
    return 2;
  }
  const std::string coll = argv[1];
  const size_t min_b = std::strtoull(argv[2], nullptr, 10);
  const size_t max_b = std::strtoull(argv[3], nullptr, 10);
  const double factor = std::atof(argv[4]);
  const int iters = std::atoi(argv[5]);
  const int warmup = std::atoi(argv[6]);
  const int rank = std::atoi(std::getenv("GANG_RANK"));
  const int size = std::atoi(std::getenv("GANG_SIZE"));

  gloo::transport::tcp::attr attr;
  // GLOO_PEER_HOST: the address to listen on (bench/two_hosts.sh gives each
  // network namespace's own); 127.0.0.1 by default.
  const char* host = std::getenv("GLOO_PEER_HOST");
  attr.hostname = host != nullptr && *host != '\0' ? host : "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(argv[7]);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(std::chrono::seconds(120));
  ctx->connectFullMesh(store, device);

  std::vector<float> send(max_b / sizeof(float) + 1), recv(max_b / sizeof(float) + 1);
  std::vector<double> t(static_cast<size_t>(iters));
  std::vector<double> stats(static_cast<size_t>(size));
  for (size_t bytes = min_b; bytes <= max_b; bytes = static_cast<size_t>(bytes * factor)) {
    const size_t count = bytes / sizeof(float);
    const size_t chunk = count / static_cast<size_t>(size);
    const bool splits = coll == "all_gather" || coll == "reduce_scatter";
    if (splits && chunk == 0) continue;  // less than an element each
    std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> reduce_scatter;
    if (coll == "reduce_scatter") {
      reduce_scatter = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
          ctx, std::vector<float*>{send.data()}, static_cast<int>(chunk * size),
          std::vector<int>(static_cast<size_t>(size), static_cast<int>(chunk)));
    }
    for (int i = -warmup; i < iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      if (coll == "all_reduce") {
        gloo::AllreduceOptions o(ctx);
        o.setInput(send.data(), count);
        o.setOutput(recv.data(), count);
        o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
            &gloo::sum<float>));
        gloo::allreduce(o);
      } else if (coll == "broadcast") {
        gloo::BroadcastOptions o(ctx);
        o.setOutput(recv.data(), count);
        o.setRoot(0);
        gloo::broadcast(o);
      } else if (reduce_scatter) {
        reduce_scatter->run();
      } else {
        gloo::AllgatherOptions o(ctx);
        o.setInput(send.data(), chunk);
        o.setOutput(recv.data(), chunk * static_cast<size_t>(size));
        gloo::allgather(o);
      }
      const double us = std::chrono::duration<double, std::micro>(
                            std::chrono::steady_clock::now() - t0).count();
      if (i >= 0) t[static_cast<size_t>(i)] = us;
    }
    std::sort(t.begin(), t.end());
    double median = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    // The largest median over ranks: gather them at every rank.
    gloo::AllgatherOptions g(ctx);
    g.setInput(&median, 1);
    g.setOutput(stats.data(), stats.size());
    gloo::allgather(g);
    if (rank == 0) {
      const size_t shown = splits ? chunk * size * sizeof(float) : bytes;
      std::printf("%zu %.3f\n", shown, *std::max_element(stats.begin(), stats.end()));
    }
  }
  return 0;
}
