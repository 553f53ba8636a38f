#include "launcher/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "gang/gang_version.h"

namespace gang::launcher {

namespace {

class UsageError {
 public:
  explicit UsageError(std::string message) : message(std::move(message)) {}
  std::string message;
};

int parse_int(const std::string& name, const std::string& value, long lo,
              long hi) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || *end != '\0' || v < lo || v > hi) {
    throw UsageError(name + " wants an integer in [" + std::to_string(lo) +
                     ", " + std::to_string(hi) + "], not \"" + value + "\"");
  }
  return static_cast<int>(v);
}

double parse_seconds(const std::string& name, const std::string& value) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  // At most about 30 years, so deadlines never overflow the clock.
  if (value.empty() || errno != 0 || *end != '\0' || !std::isfinite(v) ||
      v < 0 || v > 1e9) {
    throw UsageError(name + " wants a number of seconds >= 0, not \"" + value +
                     "\"");
  }
  return v;
}

// "--nproc_per_node" is torchrun's spelling; both are accepted.
std::string normalize(std::string name) {
  for (size_t i = 2; i < name.size(); ++i) {
    if (name[i] == '_') name[i] = '-';
  }
  return name;
}

// torchrun's --nnodes: "N", or "MIN:MAX" for an elastic job, which gangrun
// does not run; "N:N" is N.
int parse_nnodes(const std::string& name, const std::string& value) {
  const size_t colon = value.find(':');
  if (colon == std::string::npos) return parse_int(name, value, 1, 65536);
  const int lo = parse_int(name, value.substr(0, colon), 1, 65536);
  const int hi = parse_int(name, value.substr(colon + 1), 1, 65536);
  if (lo > hi) {
    throw UsageError(name + " " + value + ": the minimum is above the maximum");
  }
  if (lo < hi) {
    throw UsageError(name + " " + value +
                     " is a range of node counts (an elastic job), which "
                     "gangrun does not run: give one count, as " +
                     name + " " + std::to_string(hi));
  }
  return lo;
}

// torchrun's --rdzv-endpoint: "HOST", "HOST:PORT", "[V6]" or "[V6]:PORT".
// A bracketed host keeps its brackets, as --master-addr takes it. Without a
// port, *port is left as it is.
void parse_endpoint(const std::string& name, const std::string& value,
                    std::string* host, int* port) {
  std::string port_text;
  bool has_port = false;
  if (!value.empty() && value[0] == '[') {
    const size_t close = value.find(']');
    if (close == std::string::npos ||
        (close + 1 < value.size() && value[close + 1] != ':')) {
      throw UsageError(name + " \"" + value + "\" is not HOST[:PORT]");
    }
    *host = value.substr(0, close + 1);
    if (close + 1 < value.size()) {
      port_text = value.substr(close + 2);
      has_port = true;
    }
  } else {
    const size_t colon = value.find(':');
    if (colon != std::string::npos &&
        value.find(':', colon + 1) != std::string::npos) {
      throw UsageError(name + " \"" + value +
                       "\": put an IPv6 address in brackets, as in "
                       "[::1]:29500");
    }
    *host = value.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = value.substr(colon + 1);
      has_port = true;
    }
  }
  if (*host == "" || *host == "[]") {
    throw UsageError(name + " \"" + value + "\" has no host");
  }
  if (has_port) *port = parse_int(name + "'s port", port_text, 0, 65535);
}

}  // namespace

std::string usage_text() {
  return "usage: gangrun [options] [--] program [args...]\n"
         "       gangrun --store-only HOST:PORT\n"
         "\n"
         "Starts --nproc-per-node ranks of program on this node, hosts gang's\n"
         "TCP store (on node 0) and exports GANG_INIT_METHOD, GANG_RANK,\n"
         "GANG_SIZE, GANG_LOCAL_RANK, GANG_LOCAL_SIZE, GANG_NODE_RANK,\n"
         "GANG_NUM_NODES and torchrun's RANK, WORLD_SIZE, LOCAL_RANK,\n"
         "LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR and\n"
         "MASTER_PORT (a free port gangrun leaves unbound for the program).\n"
         "When a rank fails, the others get SIGTERM, then SIGKILL after the\n"
         "grace period, and gangrun exits with the failing rank's status\n"
         "(unless --replace-failed starts a replacement instead).\n"
         "\n"
         "options:\n"
         "  --nproc-per-node N    ranks on this node (default 1)\n"
         "  --nnodes M            nodes in the job (default 1)\n"
         "  --node-rank K         this node, 0..M-1 (default 0)\n"
         "  --master-addr A       node 0's address (default 127.0.0.1; "
         "required\n"
         "                        with --nnodes > 1)\n"
         "  --master-port P       the store's port on node 0 (default 0: a "
         "free\n"
         "                        one; required with --nnodes > 1)\n"
         "  --store-bind ADDR     the address node 0's store listens on\n"
         "                        (default: --master-addr, so 127.0.0.1 "
         "serves\n"
         "                        this host only; 0.0.0.0 for every "
         "interface)\n"
         "  --prefix              prefix each output line with \"[rank R] \"\n"
         "  --tee                 also write each rank's output to\n"
         "                        LOG_DIR/rank-R.log\n"
         "  --log-dir DIR         the directory for --tee and the ranks'\n"
         "                        flight-recorder dumps (default gangrun-logs;\n"
         "                        implies --tee); the user's own, writable by\n"
         "                        no one else (a missing one is made 0700)\n"
         "  --timeout SECONDS     stop the job after this long (exit 124;\n"
         "                        default 0: no limit)\n"
         "  --grace SECONDS       between SIGTERM and SIGKILL (default 5)\n"
         "  --connect-timeout S   how long nodes > 0 wait for node 0's store\n"
         "                        (default 300)\n"
         "  --replace-failed N    when a rank fails (nonzero exit or a signal),\n"
         "                        start the same command in its place as a\n"
         "                        process that joins the running gang, up to N\n"
         "                        times (on each node); default 0: the first\n"
         "                        failure stops the job. See below\n"
         "  -m, --module          program is a Python module: run\n"
         "                        PYTHON -u -m program args...\n"
         "  --no-python           run program as it is, even a .py file\n"
         "  --store-only HOST:PORT serve gang's store at HOST:PORT (0: a free\n"
         "                        port, printed) and run nothing, until\n"
         "                        interrupted: a store that outlives any rank,\n"
         "                        for jobs launched without gangrun (point\n"
         "                        GANG_INIT_METHOD at tcp://HOST:PORT; the\n"
         "                        token is GANG_STORE_TOKEN's)\n"
         "  -v, --verbose         say what gangrun does\n"
         "  -h, --help            this text\n"
         "  --version             gangrun's version\n"
         "\n"
         "A program ending in .py runs as PYTHON -u program args... (unless\n"
         "it is an executable given with a path or found on PATH), where\n"
         "PYTHON is $GANG_PYTHON if set, else $VIRTUAL_ENV/bin/python if\n"
         "VIRTUAL_ENV is set, else python3 on PATH.\n"
         "\n"
         "torchrun's spellings, where they mean the same:\n"
         "  --standalone          one node, the store on a free port of\n"
         "                        127.0.0.1 (what gangrun does by default)\n"
         "  --nnodes N:N          N nodes; a range MIN:MAX (an elastic job) "
         "is\n"
         "                        refused\n"
         "  --rdzv-endpoint HOST[:PORT]\n"
         "                        --master-addr HOST [--master-port PORT]\n"
         "  --rdzv-backend B      c10d or static: both are gangrun's store\n"
         "  --rdzv-id ID          ignored (one gangrun per node is one job)\n"
         "  --max-restarts 0      gangrun does not restart the job; only 0 is\n"
         "                        accepted (see --replace-failed)\n"
         "\n"
         "A replacement gets a rank's environment without GANG_RANK, GANG_SIZE,\n"
         "RANK and WORLD_SIZE (the members assign its rank when they admit it)\n"
         "and with GANG_JOIN=1, GANG_REPLACES=R (the launch rank whose place it\n"
         "takes) and GANG_REPLACEMENT=K (1 for this node's first replacement,\n"
         "up to N). It calls gang_join (Python gang.join()) with default\n"
         "options and waits for the survivors' gang_grow; gang_create refuses\n"
         "to run in it. Its output is prefixed \"[join K] \" (--prefix) and\n"
         "written to LOG_DIR/join-K.log (--tee). The job succeeds when every\n"
         "process still counted (the ranks never replaced, and the\n"
         "replacements) exits 0; once N replacements are used up, a failure\n"
         "stops the job as without the option.\n"
         "\n"
         "The store takes only clients that present its token, which gangrun\n"
         "hands its ranks in GANG_STORE_TOKEN: GANG_STORE_TOKEN from "
         "gangrun's\n"
         "own environment, else (one node) 32 random hex digits per job. With\n"
         "--nnodes > 1, set GANG_STORE_TOKEN to one secret on every node; "
         "without\n"
         "it the store runs without a token, and gangrun says so. The store's\n"
         "limits come from the GANG_STORE_* variables (see the README).\n"
         "\n"
         "Options also take the form --name=value, and underscores for dashes\n"
         "(--nproc_per_node). Exit status: 0 when every rank exits 0; "
         "the\n"
         "first failing rank's status (its exit code, or 128+signal); 124 on\n"
         "--timeout; 128+signal when gangrun is interrupted; 1 when gangrun\n"
         "itself fails; 2 for a usage error.\n";
}

ParseResult parse_options(int argc, char** argv) {
  ParseResult result;
  Options& o = result.options;
  bool addr_given = false;
  bool port_given = false;
  bool endpoint_given = false;
  bool standalone = false;
  try {
    int i = 1;
    for (; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--") {
        ++i;
        break;
      }
      if (arg.size() < 2 || arg[0] != '-') break;  // the program
      if (arg == "-h" || arg == "--help") {
        result.message = usage_text();
        return result;
      }
      if (arg == "--version") {
        result.message = std::string("gangrun ") + GANG_VERSION_STRING + "\n";
        return result;
      }
      std::string value;
      bool has_value = false;
      const size_t eq = arg.find('=');
      if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_value = true;
      }
      arg = normalize(arg);
      auto flag = [&](bool* target) {
        if (has_value) throw UsageError(arg + " takes no value");
        *target = true;
      };
      auto take = [&]() -> std::string {
        if (has_value) return value;
        if (i + 1 >= argc) throw UsageError(arg + " needs a value");
        return argv[++i];
      };
      if (arg == "--nproc-per-node") {
        o.nproc_per_node = parse_int(arg, take(), 1, 65536);
      } else if (arg == "--nnodes") {
        o.nnodes = parse_nnodes(arg, take());
      } else if (arg == "--standalone") {
        flag(&standalone);
      } else if (arg == "--store-only") {
        parse_endpoint(arg, take(), &o.master_addr, &o.master_port);
        o.store_only = true;
      } else if (arg == "--rdzv-endpoint") {
        parse_endpoint(arg, take(), &o.master_addr, &o.master_port);
        endpoint_given = true;
      } else if (arg == "--rdzv-backend") {
        const std::string backend = take();
        if (backend != "c10d" && backend != "static") {
          throw UsageError("--rdzv-backend " + backend +
                           " is not supported: gangrun's store on node 0 is "
                           "the rendezvous (c10d and static mean that)");
        }
      } else if (arg == "--rdzv-id") {
        const std::string id = take();
        result.notes.push_back("--rdzv-id " + id +
                               " is ignored: the gangruns started with the "
                               "same node 0 address and port form one job");
      } else if (arg == "--max-restarts") {
        if (parse_int(arg, take(), 0, 65536) != 0) {
          throw UsageError(
              "--max-restarts: gangrun does not restart the job; only 0 is "
              "accepted (--replace-failed N starts a process that joins the "
              "running gang in place of a failed rank)");
        }
      } else if (arg == "-m" || arg == "--module") {
        flag(&o.module);
      } else if (arg == "--no-python") {
        flag(&o.no_python);
      } else if (arg == "--node-rank") {
        o.node_rank = parse_int(arg, take(), 0, 65535);
      } else if (arg == "--master-addr") {
        o.master_addr = take();
        addr_given = true;
        if (o.master_addr.empty()) throw UsageError("--master-addr is empty");
      } else if (arg == "--store-bind") {
        o.store_bind = take();
        if (o.store_bind.empty()) throw UsageError("--store-bind is empty");
      } else if (arg == "--master-port") {
        o.master_port = parse_int(arg, take(), 0, 65535);
        port_given = true;
      } else if (arg == "--prefix") {
        flag(&o.prefix);
      } else if (arg == "--tee") {
        flag(&o.tee);
      } else if (arg == "--log-dir") {
        o.log_dir = take();
        o.tee = true;
      } else if (arg == "--timeout") {
        o.timeout_s = parse_seconds(arg, take());
      } else if (arg == "--replace-failed") {
        o.replace_failed = parse_int(arg, take(), 0, 65536);
      } else if (arg == "--grace") {
        o.grace_s = parse_seconds(arg, take());
      } else if (arg == "--connect-timeout") {
        o.connect_timeout_s = parse_seconds(arg, take());
      } else if (arg == "-v" || arg == "--verbose") {
        flag(&o.verbose);
      } else {
        throw UsageError("unknown option " + arg);
      }
    }
    for (; i < argc; ++i) o.command.emplace_back(argv[i]);

    if (o.store_only && !o.command.empty()) {
      throw UsageError("--store-only runs no program, but one was given");
    }
    if (o.command.empty() && !o.store_only) throw UsageError("no program to run");
    if (o.module && o.no_python) {
      throw UsageError(
          "--module runs a Python module, --no-python runs no "
          "Python: give one of them");
    }
    if (endpoint_given && (addr_given || port_given)) {
      throw UsageError(
          "--rdzv-endpoint and --master-addr/--master-port both name node "
          "0's address: give one of them");
    }
    addr_given = addr_given || endpoint_given;
    if (standalone && (o.nnodes > 1 || addr_given || port_given)) {
      throw UsageError(
          "--standalone runs one node with its store on a free port of "
          "127.0.0.1: it takes no --nnodes above 1, --master-addr, "
          "--master-port or --rdzv-endpoint");
    }
    if (o.node_rank >= o.nnodes) {
      throw UsageError("--node-rank " + std::to_string(o.node_rank) +
                       " must be less than --nnodes " +
                       std::to_string(o.nnodes));
    }
    if (static_cast<long long>(o.nnodes) * o.nproc_per_node > 1 << 24) {
      throw UsageError("--nnodes times --nproc-per-node is too large");
    }
    if (o.nnodes > 1 && !addr_given) {
      throw UsageError(
          "--nnodes > 1 needs --master-addr or --rdzv-endpoint (node 0's "
          "address)");
    }
    if (o.nnodes > 1 && o.master_port == 0) {
      throw UsageError(
          "--nnodes > 1 needs --master-port, or --rdzv-endpoint HOST:PORT (a "
          "port every node agrees on)");
    }
    if (o.tee && o.log_dir.empty()) o.log_dir = "gangrun-logs";
  } catch (const UsageError& e) {
    result.message = "gangrun: " + e.message +
                     "\nTry 'gangrun --help' for more information.\n";
    result.exit_code = 2;
    return result;
  }
  result.run = true;
  return result;
}

}  // namespace gang::launcher
