#include "core/env_detect.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include "base/error.h"

namespace gang::core::env {

namespace {

// One pair of variables: a rank-like index and the count it is below.
struct PairVars {
  const char* index;
  const char* count;
};

// Where one launcher puts each field. nullptr: the launcher has none. A field
// with two candidate pairs takes the first pair that has a variable set.
struct Source {
  const char* name;
  PairVars rank;
  PairVars local[2];
  PairVars node;
  // Variables whose value is unique to one job, for a derived port.
  const char* job_ids[3];
};

// gang.h's precedence, first to last.
constexpr Source kSources[] = {
    {"gang",
     {"GANG_RANK", "GANG_SIZE"},
     {{"GANG_LOCAL_RANK", "GANG_LOCAL_SIZE"}, {nullptr, nullptr}},
     {"GANG_NODE_RANK", "GANG_NUM_NODES"},
     {nullptr, nullptr, nullptr}},
    {"torchrun",
     {"RANK", "WORLD_SIZE"},
     {{"LOCAL_RANK", "LOCAL_WORLD_SIZE"}, {nullptr, nullptr}},
     {"GROUP_RANK", "GROUP_WORLD_SIZE"},
     {nullptr, nullptr, nullptr}},
    {"openmpi",
     {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
     {{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {nullptr, nullptr}},
     {"OMPI_COMM_WORLD_NODE_RANK", nullptr},
     // PMIx (Open MPI 4 and 5), then the ORTE job id of older releases.
     {"PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid"}},
    {"pmi",
     {"PMI_RANK", "PMI_SIZE"},
     // Cray PALS, then MPICH's and Intel MPI's Hydra.
     {{"PMI_LOCAL_RANK", "PMI_LOCAL_SIZE"},
      {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"}},
     {nullptr, nullptr},
     {"PMIX_NAMESPACE", "PALS_APID", "PMI_PORT"}},
    // SLURM has no per-node task count of its own name: local_size comes
    // from SLURM_STEP_TASKS_PER_NODE (see slurm_local_size).
    {"slurm",
     {"SLURM_PROCID", "SLURM_NTASKS"},
     {{"SLURM_LOCALID", nullptr}, {nullptr, nullptr}},
     {"SLURM_NODEID", "SLURM_NNODES"},
     {nullptr, nullptr, nullptr}},
};

class Reader {
 public:
  Reader(const Lookup& get, const char* source) : get_(get), source_(source) {}

  const char* raw(const char* var) const { return var ? get_(var) : nullptr; }

  template <typename... Args>
  [[noreturn]] void fail_env(Args&&... args) const {
    fail(Status::kInvalidArgument, "launch environment (", source_,
         "): ", std::forward<Args>(args)...);
  }

  // A decimal integer in [0, max]; false if var is unset.
  bool number(const char* var, unsigned long long max,
              unsigned long long* out) const {
    const char* v = raw(var);
    if (!v) return false;
    bool digits = true;
    for (const char* p = v; *p; ++p) digits = digits && *p >= '0' && *p <= '9';
    if (!digits) {
      const bool negative = v[0] == '-';
      fail_env(var, "=\"", v, "\" is ",
               negative ? "negative" : "not a non-negative integer");
    }
    errno = 0;
    *out = std::strtoull(v, nullptr, 10);
    if (errno != 0 || *out > max) fail_env(var, "=\"", v, "\" is too large");
    return true;
  }

  // A decimal integer in [0, INT_MAX]; -1 if var is unset.
  int number(const char* var) const {
    unsigned long long n = 0;
    return number(var, INT_MAX, &n) ? static_cast<int>(n) : -1;
  }

  // Reads index and count; both set or neither, count >= 1, index < count.
  void pair(const PairVars& vars, int* index, int* count) const {
    *index = number(vars.index);
    *count = number(vars.count);
    if (vars.index && vars.count) {
      if ((*index < 0) != (*count < 0)) {
        const char* set = *index >= 0 ? vars.index : vars.count;
        const char* unset = *index >= 0 ? vars.count : vars.index;
        fail_env(set, " is set but ", unset, " is not");
      }
    }
    if (vars.count && *count == 0)
      fail_env(vars.count, "=0 must be at least 1");
    if (*index >= 0 && *count >= 0 && *index >= *count) {
      fail_env(vars.index, "=", *index, " must be less than ", vars.count, "=",
               *count);
    }
  }

 private:
  const Lookup& get_;
  const char* source_;
};

bool is_set(const Lookup& get, const char* var) {
  return var != nullptr && get(var) != nullptr;
}

std::string host_port_vars(const char* addr, const char* port) {
  return str_cat(addr, " and ", port);
}

// MASTER_PORT if set (1..65535), else -1.
int master_port_var(const Reader& r) {
  const int port = r.number("MASTER_PORT");
  if (port == 0 || port > 65535) {
    r.fail_env("MASTER_PORT=", port, " is not a TCP port (1 to 65535)");
  }
  return port;
}

// "tcp://host:port" -> host and port, for reporting where the gang source
// rendezvouses. Anything else is left to store::open to judge.
void master_from_init_method(const char* url, Launch* l) {
  if (!url) return;
  std::string rest = url;
  if (rest.rfind("tcp://", 0) != 0) return;
  rest = rest.substr(6);
  // "?token=..." and other parameters are not part of the address.
  rest = rest.substr(0, rest.find('?'));
  std::string host;
  std::string port;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find("]:");
    if (close == std::string::npos) return;
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos) return;
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty() || port.empty() || port.size() > 5) return;
  for (const char c : port) {
    if (c < '0' || c > '9') return;
  }
  const int p = std::atoi(port.c_str());
  if (p < 1 || p > 65535) return;
  l->master_addr = host;
  l->master_port = p;
  l->master_vars = "GANG_INIT_METHOD";
}

// SLURM_STEP_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of the first three
// nodes of the step, 1 on the fourth) at this node's index; -1 if it is
// unset or does not parse, as a hint we can do without.
int slurm_local_size(const Lookup& get, int node_rank) {
  const char* v = get("SLURM_STEP_TASKS_PER_NODE");
  if (!v || node_rank < 0) return -1;
  const std::string s = v;
  long long node = 0;
  size_t i = 0;
  while (i < s.size()) {
    char* end = nullptr;
    const long long tasks = std::strtoll(s.c_str() + i, &end, 10);
    size_t j = static_cast<size_t>(end - s.c_str());
    if (j == i || tasks < 1 || tasks > INT_MAX) return -1;
    long long repeat = 1;
    if (s.compare(j, 2, "(x") == 0) {
      repeat = std::strtoll(s.c_str() + j + 2, &end, 10);
      j = static_cast<size_t>(end - s.c_str());
      if (repeat < 1 || j >= s.size() || s[j] != ')') return -1;
      ++j;
    }
    if (node_rank < node + repeat) return static_cast<int>(tasks);
    node += repeat;
    if (j < s.size() && s[j] != ',') return -1;
    i = j + 1;
  }
  return -1;
}

void torch_master(const Lookup& get, const Reader& r, Launch* l) {
  const char* addr = get("MASTER_ADDR");
  l->master_addr = addr ? addr : "";
  l->master_port = master_port_var(r);
  l->master_vars = host_port_vars("MASTER_ADDR", "MASTER_PORT");
  // torch.distributed compares the value with str(True).
  const char* agent = get("TORCHELASTIC_USE_AGENT_STORE");
  l->agent_store = agent && std::string(agent) == "True";
}

void detect_master(const Source& src, const Lookup& get, const Reader& r,
                   Launch* l) {
  const std::string name = src.name;
  if (name == "gang") {
    const char* url = get("GANG_INIT_METHOD");
    if (url && is_env_url(url, "GANG_INIT_METHOD")) {
      torch_master(get, r, l);
    } else {
      master_from_init_method(url, l);
    }
    return;
  }
  if (name == "torchrun") {
    torch_master(get, r, l);
    return;
  }
  const char* addr = get("MASTER_ADDR");
  const int port = master_port_var(r);

  std::string addr_from = "MASTER_ADDR";
  std::string port_from = "MASTER_PORT";
  if (addr) {
    l->master_addr = addr;
  } else if (name == "slurm") {
    const char* var = "SLURM_STEP_NODELIST";
    const char* list = get(var);
    if (!list) {
      var = "SLURM_JOB_NODELIST";
      list = get(var);
    }
    if (list) {
      l->master_addr = expand_hostlist(list, var).front();
      addr_from = str_cat("the first host of ", var);
    }
  } else if (l->local_size >= 0 && l->local_size == l->size) {
    // Every rank is on this node, so loopback reaches rank 0.
    l->master_addr = "127.0.0.1";
    addr_from = str_cat("127.0.0.1 (", src.local[0].count, " = ",
                        src.rank.count, ": one node)");
  }

  l->master_port = port;
  if (port < 0 && name == "slurm") {
    unsigned long long job = 0;
    if (r.number("SLURM_JOB_ID", ULLONG_MAX, &job)) {
      l->master_port = port_from_job_id(job);
      port_from = "a port from SLURM_JOB_ID";
    }
  } else if (port < 0) {
    for (const char* var : src.job_ids) {
      const char* id = var ? get(var) : nullptr;
      if (!id) continue;
      l->master_port = port_from_text(id);
      port_from = str_cat("a port from ", var);
      break;
    }
  }
  l->master_vars = host_port_vars(addr_from.c_str(), port_from.c_str());
}

}  // namespace

void torch_master_from(const Lookup& get, Launch* l) {
  torch_master(get, Reader(get, "env://"), l);
}

bool is_env_url(const std::string& url, const char* origin) {
  if (url == "env://") return true;
  if (url.rfind("env:", 0) != 0) return false;
  fail(Status::kInvalidArgument, origin, "=\"", url,
       "\": the env rendezvous is \"env://\" alone (gang reads the rank "
       "and size from the environment, and the master from MASTER_ADDR and "
       "MASTER_PORT)");
}

Launch detect_from(const Lookup& get) {
  const Source* winner = nullptr;
  for (const Source& src : kSources) {
    if (is_set(get, src.rank.index) && is_set(get, src.rank.count)) {
      winner = &src;
      break;
    }
  }
  if (!winner) {
    // Nothing to follow: a half-set pair would otherwise quietly make a
    // rank 0 of 1, which is never what setting it meant.
    for (const Source& src : kSources) {
      const bool has_rank = is_set(get, src.rank.index);
      if (has_rank || is_set(get, src.rank.count)) {
        Reader(get, src.name)
            .fail_env(has_rank ? src.rank.index : src.rank.count,
                      " is set but ",
                      has_rank ? src.rank.count : src.rank.index, " is not");
      }
    }
    return Launch();
  }

  const Source& src = *winner;
  const Reader r(get, src.name);
  Launch l;
  l.source = src.name;
  l.rank_vars = host_port_vars(src.rank.index, src.rank.count);
  r.pair(src.rank, &l.rank, &l.size);

  const PairVars* local = &src.local[0];
  if (!is_set(get, local->index) && !is_set(get, local->count) &&
      src.local[1].index) {
    local = &src.local[1];
  }
  r.pair(*local, &l.local_rank, &l.local_size);
  r.pair(src.node, &l.node_rank, &l.num_nodes);
  if (l.source == "slurm") {
    l.local_size = slurm_local_size(get, l.node_rank);
    if (l.local_size >= 0 && l.local_rank >= l.local_size) {
      r.fail_env("SLURM_LOCALID=", l.local_rank,
                 " must be less than this node's count in "
                 "SLURM_STEP_TASKS_PER_NODE (",
                 l.local_size, ")");
    }
  }
  if (l.local_size > l.size) {
    r.fail_env(local->count, "=", l.local_size, " must be at most ",
               src.rank.count, "=", l.size);
  }
  if (l.num_nodes > l.size) {
    r.fail_env(src.node.count, "=", l.num_nodes, " must be at most ",
               src.rank.count, "=", l.size);
  }
  detect_master(src, get, r, &l);
  return l;
}

// ---- SLURM host lists -------------------------------------------------------
//
// list  := name (',' name)*
// name  := (text | '[' range (',' range)* ']')+
// range := digits | digits '-' digits
//
// A name with several bracket groups is their cartesian product, the last
// group varying fastest ("r[1-2]n[1-2]" is r1n1 r1n2 r2n1 r2n2). A range's
// numbers are printed at least as wide as its lower bound ("[08-11]" is 08
// 09 10 11; "[8-11]" is 8 9 10 11).

namespace {

[[noreturn]] void fail_list(const char* var, const std::string& list,
                            const std::string& why) {
  fail(Status::kInvalidArgument, "launch environment (slurm): ", var, "=\"",
       list, "\" is not a host list: ", why);
}

// Hosts can be counted in thousands; a typo like [1-99999999] must not
// allocate a list of that size.
constexpr size_t kMaxHosts = 1 << 20;

std::vector<std::string> expand_range_group(const std::string& group,
                                            const char* var,
                                            const std::string& list) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= group.size()) {
    const size_t comma = std::min(group.find(',', i), group.size());
    const std::string item = group.substr(i, comma - i);
    const size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi =
        dash == std::string::npos ? lo : item.substr(dash + 1);
    auto all_digits = [](const std::string& s) {
      if (s.empty()) return false;
      for (const char c : s) {
        if (c < '0' || c > '9') return false;
      }
      return true;
    };
    if (!all_digits(lo) || !all_digits(hi)) {
      fail_list(var, list,
                str_cat("\"[", group, "]\" has an item \"", item,
                        "\" that is neither a number N nor a range N-M (accepted: "
                        "decimal numbers of at most 9 digits, ranges of them, "
                        "separated by commas)"));
    }
    if (lo.size() > 9 || hi.size() > 9) {
      fail_list(var, list,
                str_cat("\"[", group, "]\" has a number in \"", item,
                        "\" of more than 9 digits (accepted: up to 999999999, and ",
                        kMaxHosts, " hosts in all)"));
    }
    const long a = std::atol(lo.c_str());
    const long b = std::atol(hi.c_str());
    if (b < a) {
      fail_list(var, list, str_cat("the range \"", item, "\" runs backwards"));
    }
    for (long n = a; n <= b; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < lo.size()) {
        digits.insert(0, lo.size() - digits.size(), '0');
      }
      out.push_back(std::move(digits));
      if (out.size() > kMaxHosts) fail_list(var, list, "too many hosts");
    }
    i = comma + 1;
  }
  return out;
}

void expand_name(const std::string& name, const char* var,
                 const std::string& list, std::vector<std::string>* out) {
  std::vector<std::string> partial{""};
  size_t i = 0;
  while (i < name.size()) {
    if (name[i] == ']') fail_list(var, list, "a ']' without its '['");
    if (name[i] != '[') {
      const size_t next = std::min(name.find_first_of("[]", i), name.size());
      for (auto& p : partial) p += name.substr(i, next - i);
      i = next;
      continue;
    }
    const size_t close = name.find(']', i);
    if (close == std::string::npos)
      fail_list(var, list, "a '[' without its ']'");
    const auto numbers =
        expand_range_group(name.substr(i + 1, close - i - 1), var, list);
    std::vector<std::string> grown;
    for (const auto& p : partial) {
      for (const auto& n : numbers) {
        grown.push_back(p + n);
        if (grown.size() > kMaxHosts) fail_list(var, list, "too many hosts");
      }
    }
    partial = std::move(grown);
    i = close + 1;
  }
  for (auto& p : partial) out->push_back(std::move(p));
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list,
                                         const char* var) {
  std::vector<std::string> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c != ',' || depth > 0) continue;
    const std::string name = list.substr(start, i - start);
    if (name.empty()) fail_list(var, list, "an empty host name");
    if (name.find_first_of(" \t\n") != std::string::npos) {
      fail_list(var, list, "a host name with white space");
    }
    expand_name(name, var, list, &hosts);
    start = i + 1;
  }
  if (depth != 0) fail_list(var, list, "unbalanced brackets");
  return hosts;
}

int port_from_job_id(uint64_t job_id) {
  return kDerivedPortMin + static_cast<int>(job_id % kDerivedPortSpan);
}

int port_from_text(const std::string& text) {
  // FNV-1a: stable across processes, hosts and builds, unlike std::hash.
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return kDerivedPortMin + static_cast<int>(h % kDerivedPortSpan);
}

}  // namespace gang::core::env
