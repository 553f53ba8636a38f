// Launch-environment detection as pure functions of a variable lookup, so
// the rules (the per-source tables, SLURM host lists, the derived ports) can
// be read and tested apart from the process environment. env.cc feeds them
// getenv; nothing here reads the environment itself.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gang::core::env {

// Returns a variable's value, or nullptr when it is unset or empty (an empty
// variable counts as unset, as `export RANK=` in a script means "none").
using Lookup = std::function<const char*(const char*)>;

// What the launcher told this process (gang_env_t, plus what gang_create
// needs to pick a store). -1 and "" where unknown.
struct Launch {
  // "gang", "torchrun", "openmpi", "pmi", "slurm" or "none".
  std::string source = "none";
  int rank = 0;  // "none": rank 0 of 1
  int size = 1;
  int local_rank = -1;
  int local_size = -1;
  int node_rank = -1;
  int num_nodes = -1;
  std::string master_addr;
  int master_port = -1;
  // The variables the rank and size came from ("RANK and WORLD_SIZE"), and
  // those master_addr and master_port came from, for messages.
  std::string rank_vars;
  std::string master_vars;
  // torchrun's agent serves PyTorch's TCPStore at the master
  // (TORCHELASTIC_USE_AGENT_STORE=True), so gang must not bind that port.
  bool agent_store = false;
};

// Applies the precedence and checks of gang.h's "Environment and launch":
// the first source whose rank and size are both set wins, and the others are
// not read. Throws kInvalidArgument naming the variables for a broken
// winner, or, when no source wins, for one that sets only one of its rank
// and size.
Launch detect_from(const Lookup& get);

// torch's env:// rendezvous: the master is MASTER_ADDR and MASTER_PORT,
// behind torchrun's agent store when TORCHELASTIC_USE_AGENT_STORE=True.
// Sets master_addr, master_port (-1 when unset), master_vars and
// agent_store of *l; a MASTER_PORT that is not a TCP port is
// kInvalidArgument naming it.
void torch_master_from(const Lookup& get, Launch* l);

// Whether an init method is torch's "env://", which gang_create takes as
// "rendezvous at MASTER_ADDR:MASTER_PORT". Anything else beginning with
// "env:" is kInvalidArgument (`origin` names where it came from), as torch's
// query parameters are not read.
bool is_env_url(const std::string& url, const char* origin);

// Expands a SLURM host list ("node[01-04,07]", "a[1-2]-ib,b3",
// "r[1-2]n[08-11]") in order, keeping zero padding. `var` names the variable
// in the kInvalidArgument a malformed list throws.
std::vector<std::string> expand_hostlist(const std::string& list,
                                         const char* var);

// The rendezvous port derived from a job id when no MASTER_PORT is set:
// in [kDerivedPortMin, kDerivedPortMin + kDerivedPortSpan).
constexpr int kDerivedPortMin = 20000;
constexpr int kDerivedPortSpan = 40000;
// SLURM: 20000 + SLURM_JOB_ID % 40000.
int port_from_job_id(uint64_t job_id);
// Open MPI / PMI: 20000 + FNV-1a(text) % 40000.
int port_from_text(const std::string& text);

}  // namespace gang::core::env
