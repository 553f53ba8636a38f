#include "core/rendezvous.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <thread>
#include <utility>

#include "core/env.h"
#include "base/big_endian.h"
#include "base/deadline.h"
#include "base/error.h"
#include "base/hash.h"
#include "base/secret.h"
#include "base/text.h"
#include "core/log.h"
#include "store/store.h"

namespace gang::core {

namespace {

struct Plan {
  std::string url;
  // Where the url came from, for messages: "GANG_INIT_METHOD", "MASTER_ADDR
  // and MASTER_PORT under slurm", ...
  std::string origin;
  // Rank 0 of a tcp:// rendezvous: serve the port unless it is taken.
  bool serve = false;
  // What rank 0's server binds when not the url's host.
  std::string bind_host;
};

bool is_tcp(const std::string& url) { return url.rfind("tcp://", 0) == 0; }

// Why a source gave no master, for the message that asks for one.
const char* missing_master_hint(const std::string& source) {
  if (source == "openmpi" || source == "pmi") {
    return " (gang uses 127.0.0.1 only when every rank is on one node, with "
           "a port derived from a job id such as PMIX_NAMESPACE; across nodes "
           "it cannot tell which host rank 0 runs on)";
  }
  if (source == "slurm") {
    return " (the master is the first host of SLURM_STEP_NODELIST or "
           "SLURM_JOB_NODELIST, and the port MASTER_PORT or one derived from "
           "SLURM_JOB_ID)";
  }
  return "";
}

// The rendezvous at l's master. via: "" for the launch environment's
// master, else the init method that asked for it ("GANG_INIT_METHOD=env://").
Plan plan_from_master(const env::Launch& l, int rank, const std::string& via) {
  if (!via.empty() && (l.master_addr.empty() || l.master_port < 1)) {
    fail(Status::kInvalidArgument, "gang_create: ", via,
         " rendezvouses at MASTER_ADDR:MASTER_PORT, as torch's env:// does, "
         "but ",
         l.master_addr.empty() ? "MASTER_ADDR" : "MASTER_PORT", " is not set");
  }
  if (l.master_addr.empty() || l.master_port < 1) {
    fail(Status::kInvalidArgument, "gang_create: rank ", l.rank, " of ", l.size,
         " from ", l.source, " (", l.rank_vars, ") has no rendezvous ",
         l.master_addr.empty() ? "host" : "port",
         ": set MASTER_ADDR and MASTER_PORT, or GANG_INIT_METHOD",
         missing_master_hint(l.source));
  }
  Plan p;
  const std::string where = base::host_port(l.master_addr, l.master_port);
  if (l.agent_store) {
    // torchrun's agent serves PyTorch's TCPStore there for the whole job;
    // binding the port would fail, and a second server would split the job.
    p.url = "torch://" + where;
    p.origin = str_cat(l.master_vars, via.empty() ? "" : " for ", via,
                       ", where torchrun's agent serves its TCPStore");
    return p;
  }
  // Rank 0 serves every interface, as it always did: a launcher's master
  // is often a host name that resolves to a loopback address on the master
  // itself (Debian's /etc/hosts), which other nodes could not reach. The
  // others connect to the master's address. GANG_STORE_TOKEN secures it.
  p.url = "tcp://" + where;
  p.bind_host = "0.0.0.0";
  p.origin = via.empty() ? str_cat(l.master_vars, " under ", l.source)
                         : str_cat(l.master_vars, " for ", via);
  p.serve = rank == 0;
  return p;
}

Plan plan_from_launch(const env::Launch& l, int rank, int size) {
  if (l.source == "none" || l.source == "gang") {
    fail(Status::kInvalidArgument, "gang_create: a gang of size ", size,
         " needs a rendezvous: set options.store, options.init_method or "
         "GANG_INIT_METHOD, or start it with a launcher (gangrun, torchrun, "
         "srun, mpirun)");
  }
  return plan_from_master(l, rank, "");
}

Plan plan(const std::string& init_method, int rank, int size,
          const env::Launch* launch) {
  Plan p;
  if (!init_method.empty()) {
    p.url = init_method;
    p.origin = "options.init_method";
  } else if (std::string url = env::init_method(); !url.empty()) {
    p.url = std::move(url);
    p.origin = "GANG_INIT_METHOD";
  } else {
    return plan_from_launch(launch ? *launch : env::detect(), rank, size);
  }
  if (env::is_env_url(p.url, p.origin.c_str())) {
    env::Launch master;
    env::torch_master(&master);
    return plan_from_master(master, rank, p.origin + "=env://");
  }
  p.serve = rank == 0 && is_tcp(p.url);
  return p;
}

}  // namespace

std::shared_ptr<store::Store> open_rendezvous(const std::string& init_method,
                                              int rank, int size,
                                              std::chrono::milliseconds timeout,
                                              const env::Launch* launch) {
  const Plan p = plan(init_method, rank, size, launch);
  try {
    if (!p.serve) return store::open(p.url, false, timeout);
    bool served = false;
    auto store = store::serve_or_join(p.url, timeout, &served, p.bind_host, size);
    if (!served) {
      GANG_LOG(kInfo, "rendezvous: ", store::redact_url(p.url), " (from ", p.origin,
               ") is already served; rank 0 joins it as a client");
    }
    return store;
  } catch (const Error& e) {
    // A server that never answers the handshake is not the store we were
    // promised, whatever the socket did: kStore, not kTimeout.
    const Status s =
        e.status() == Status::kTimeout ? Status::kStore : e.status();
    fail(s, "gang_create: rendezvous through ", store::redact_url(p.url),
         " (from ", p.origin,
         ") failed: ", e.what());
  }
}

namespace {

using base::Clock;
using base::Millis;

// How long a rank waits for a go before it looks for a newer generation:
// kLookAgain, and longer in a wide gang. A wait that ends without its key
// costs the store a connection (the client drops one whose reply may still
// come), so a thousand ranks looking every 50 ms would open 20,000 a
// second while rank 0 reads their hellos; this keeps them near 1,000.
constexpr Millis kLookAgain{50};
constexpr Millis kLookAgainMost{2000};
Millis look_again(int size) {
  return std::clamp(Millis(size), kLookAgain, kLookAgainMost);
}
// How often rank 0 looks at a rank it waits for, given a `lost` check.
constexpr Millis kLookLost{100};
// Hellos rank 0 asks the store for in one read.
constexpr int kHellosAtOnce = 1024;

std::string text(const store::Bytes& b) { return std::string(b.begin(), b.end()); }
store::Bytes bytes(const std::string& s) { return store::Bytes(s.begin(), s.end()); }

uint64_t fresh_nonce() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd() ^
         static_cast<uint64_t>(Clock::now().time_since_epoch().count());
}

// Rank 0's go for a creation every rank joined: kGoOk, then for every rank
// a 4-byte tag of the nonce it said hello with (rank 0's zero), the
// secret, and the host list. A rank finds its own tag at a fixed place, so
// the go grows by 4 bytes a rank, not by a nonce's 25 characters, and one
// read brings it all. A stale hello of the same rank (an earlier attempt's)
// has a different nonce, and its tag differs but for one time in 2^32.
constexpr char kGoOk[] = "ok ";
constexpr size_t kGoOkBytes = sizeof kGoOk - 1;
constexpr size_t kTagBytes = 4;

uint32_t nonce_tag(const std::string& nonce) {
  return static_cast<uint32_t>(base::fnv1a(nonce.data(), nonce.size()));
}

size_t tag_at(int rank) { return kGoOkBytes + kTagBytes * static_cast<size_t>(rank); }

[[noreturn]] void rendezvous_timeout(const std::string& name, int rank,
                                     int size, const std::string& what) {
  fail(Status::kTimeout, "gang_create: gang \"", name, "\" rank ", rank,
       " of ", size, ": ", what);
}

}  // namespace

int Generation::hosts() const {
  int n = 0;
  for (int h : host_of) n = std::max(n, h + 1);
  return n;
}

namespace {

// Each rank's host, numbered as hosts first appear (rank 0's is 0), in
// runs: "0x4 1x4" for ranks 0-3 on one host and 4-7 on another, "0 1 0 1"
// where they alternate. Ranks of a host are most often neighbours, and
// every rank reads the list: at 4096 ranks on 512 hosts it is 3 KB in runs
// against 15 KB a number a rank.
std::string number_hosts(const std::vector<std::string>& hosts) {
  std::map<std::string, int> number;
  std::string out;
  for (size_t i = 0; i < hosts.size();) {
    const int n = number.emplace(hosts[i], static_cast<int>(number.size())).first->second;
    size_t end = i + 1;
    while (end < hosts.size() && hosts[end] == hosts[i]) ++end;
    if (!out.empty()) out += ' ';
    out += std::to_string(n);
    if (end - i > 1) out += str_cat("x", end - i);
    i = end;
  }
  return out;
}

std::vector<int> parse_hosts(const std::string& list, int size) {
  std::vector<int> host_of;
  const auto malformed = [&](const std::string& run) {
    fail(Status::kStore, "gang_create: the store's host list holds \"", run,
         "\", which is not a host number or a run of one");
  };
  size_t at = 0;
  while (at < list.size()) {
    size_t end = list.find(' ', at);
    if (end == std::string::npos) end = list.size();
    const std::string run = list.substr(at, end - at);
    int host = -1;
    long long count = 1;
    char tail = 0;
    const int got = std::sscanf(run.c_str(), "%dx%lld%c", &host, &count, &tail);
    if (got < 1 || got > 2 || host < 0 || count < 1 ||
        count > size - static_cast<long long>(host_of.size()) ||
        (got == 1 && run.find_first_not_of("0123456789") != std::string::npos)) {
      malformed(run);
    }
    host_of.insert(host_of.end(), static_cast<size_t>(count), host);
    at = end + 1;
  }
  if (static_cast<int>(host_of.size()) != size) {
    fail(Status::kStore, "gang_create: the store holds ", host_of.size(),
         " host numbers for a gang of ", size, " ranks");
  }
  return host_of;
}

}  // namespace

namespace {

[[noreturn]] void creation_lost(const std::string& name, int r, const std::string& why) {
  throw CreationLost(r, str_cat("gang_create: gang \"", name, "\": rank ", r,
                                " was lost before the gang met: ", why));
}

}  // namespace

Generation join_generation(store::Store& store, const std::string& name,
                           int rank, int size, const std::string& host,
                           const std::string& asks, Millis timeout,
                           const std::function<bool(int, std::string*)>& lost) {
  const base::Deadline deadline(timeout);
  const std::string base = str_cat("gang/", name, "/");
  if (rank == 0) {
    const int64_t generation = store.add(base + "generations", 1);
    const std::string prefix = str_cat(base, generation, "/");
    store.set(base + "open", bytes(str_cat(generation)));
    // Every other rank's hello: "<size> <asks> <nonce> <host>".
    std::string go(tag_at(size), '\0');
    go.replace(0, kGoOkBytes, kGoOk);
    std::vector<std::string> hosts{host};
    // The other ranks' hellos in as few reads as there are: those already
    // there, kHellosAtOnce at a time (all of them, where every rank came in
    // time); a rank still missing is waited for alone, below.
    std::vector<store::Bytes> hellos;
    for (int r = 1; r < size; ++r) {
      if (hellos.size() < static_cast<size_t>(r)) {
        std::vector<std::string> next;
        for (int q = r; q < size && q < r + kHellosAtOnce; ++q) {
          next.push_back(str_cat(prefix, "hello/", q));
        }
        for (auto& h : store.get_many(next, std::min(kLookLost, deadline.remaining_ms()))) {
          hellos.push_back(std::move(h));
        }
      }
      while (hellos.size() < static_cast<size_t>(r)) {
        // Without a check, one wait; with one, a look at rank r between
        // short waits.
        const Millis wait = lost ? std::min(kLookLost, deadline.remaining_ms())
                                 : deadline.remaining_ms();
        try {
          hellos.push_back(store.get(str_cat(prefix, "hello/", r), wait));
          break;
        } catch (const Error& e) {
          if (e.status() != Status::kTimeout) throw;
        }
        if (deadline.expired()) {
          rendezvous_timeout(name, rank, size,
                             str_cat("rank ", r, " did not join within ",
                                     timeout.count(), " ms"));
        }
        if (std::string why; lost(r, &why)) {
          store.set(prefix + "go", bytes(str_cat("lost ", r, " ", why)));
          creation_lost(name, r, why);
        }
      }
      const std::string hello = text(hellos[static_cast<size_t>(r - 1)]);
      const size_t space = hello.find(' ');
      const std::string their_size = hello.substr(0, space);
      if (their_size != std::to_string(size)) {
        store.set(prefix + "go", bytes(str_cat("mismatch ", size)));
        fail(Status::kMismatch, "gang_create: gang \"", name, "\": rank 0 "
             "creates it with size ", size, " but rank ", r, " with size ",
             their_size);
      }
      const size_t space1 = hello.find(' ', space + 1);
      const std::string their_asks = hello.substr(space + 1, space1 - space - 1);
      if (their_asks != asks) {
        store.set(prefix + "go", bytes(str_cat("asks ", r, " ", their_asks, " ", asks)));
        fail(Status::kMismatch, "gang_create: gang \"", name, "\": rank 0 asks for ",
             asks, " but rank ", r, " for ", their_asks,
             " (every rank must ask for the same backend and device)");
      }
      const size_t space2 = hello.find(' ', space1 + 1);
      base::put_be32(reinterpret_cast<unsigned char*>(&go[tag_at(r)]),
                     nonce_tag(hello.substr(space1 + 1, space2 - space1 - 1)));
      hosts.push_back(space2 == std::string::npos ? "" : hello.substr(space2 + 1));
    }
    const std::string secret = gang::base::random_bytes(kSecretBytes);
    const std::string host_list = number_hosts(hosts);
    store.set(prefix + "go", bytes(go + secret + host_list));
    store.add(base + "joined", 1);
    return Generation{prefix, secret, parse_hosts(host_list, size)};
  }
  const std::string nonce = str_cat(rank, ".", fresh_nonce());
  std::string said_hello_to;
  for (;;) {
    if (deadline.expired()) {
      rendezvous_timeout(name, rank, size,
                         str_cat("rank 0 did not open the gang within ",
                                 timeout.count(), " ms"));
    }
    std::string open;
    try {
      open = text(store.get(base + "open", lost ? std::min(kLookLost, deadline.remaining_ms())
                                                : deadline.remaining_ms()));
    } catch (const Error& e) {
      if (e.status() != Status::kTimeout) throw;
      if (std::string why; lost && lost(0, &why)) creation_lost(name, 0, why);
      continue;  // the deadline check above says it
    }
    const std::string prefix = str_cat(base, open, "/");
    if (open != said_hello_to) {
      store.set(str_cat(prefix, "hello/", rank),
                bytes(str_cat(size, " ", asks, " ", nonce, " ", host)));
      said_hello_to = open;
    }
    std::string go;
    try {
      go = text(store.get(prefix + "go",
                          std::min(look_again(size), deadline.remaining_ms())));
    } catch (const Error& e) {
      if (e.status() != Status::kTimeout) throw;
      if (std::string why; lost && lost(0, &why)) creation_lost(name, 0, why);
      continue;  // not yet: look whether a newer generation opened
    }
    if (go.rfind("mismatch ", 0) == 0) {
      fail(Status::kMismatch, "gang_create: gang \"", name, "\": rank ",
           rank, " creates it with size ", size, " but rank 0 with size ",
           go.substr(9));
    }
    if (go.rfind("asks ", 0) == 0) {
      // "asks <rank> <what it asks> <what rank 0 asks>"
      const size_t a = go.find(' ', 5);
      const size_t b = go.find(' ', a + 1);
      fail(Status::kMismatch, "gang_create: gang \"", name, "\": rank ", go.substr(5, a - 5),
           " asks for ", go.substr(a + 1, b - a - 1), " but rank 0 for ", go.substr(b + 1),
           " (every rank must ask for the same backend and device)");
    }
    if (go.rfind("lost ", 0) == 0) {
      // "lost <rank> <why>"
      const size_t a = go.find(' ', 5);
      creation_lost(name, std::atoi(go.c_str() + 5),
                    a == std::string::npos ? "" : go.substr(a + 1));
    }
    const size_t hosts_at = tag_at(size) + kSecretBytes;
    if (go.size() >= hosts_at && go.compare(0, kGoOkBytes, kGoOk) == 0 &&
        base::get_be32(reinterpret_cast<const unsigned char*>(&go[tag_at(rank)])) ==
            nonce_tag(nonce)) {
      // Counts the ranks that joined a creation of this name, for whoever
      // watches the store (PyTorch programs sharing it, tests).
      store.add(base + "joined", 1);
      return Generation{prefix, go.substr(tag_at(size), kSecretBytes),
                        parse_hosts(go.substr(hosts_at), size)};
    }
    // A go without this attempt's nonce belongs to an earlier creation or
    // attempt: wait for rank 0 to open a newer generation.
    std::this_thread::sleep_for(std::min(kLookAgain, deadline.remaining_ms()));
  }
}

}  // namespace gang::core
