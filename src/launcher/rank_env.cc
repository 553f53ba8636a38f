#include "launcher/rank_env.h"

#include "base/text.h"

#include <set>
#include <utility>

extern char** environ;

namespace gang::launcher {

std::string tcp_url(const std::string& host, int port) {
  // A host given in brackets already is kept as it is.
  if (!host.empty() && host.front() == '[') {
    return "tcp://" + host + ":" + std::to_string(port);
  }
  return "tcp://" + base::host_port(host, port);
}

std::vector<std::pair<std::string, std::string>> launch_variables(
    const Options& o, const JobLayout& job, int local_rank) {
  const int rank = o.node_rank * o.nproc_per_node + local_rank;
  const std::string r = std::to_string(rank);
  const std::string size = std::to_string(o.world_size());
  const std::string lr = std::to_string(local_rank);
  const std::string ls = std::to_string(o.nproc_per_node);
  const std::string node = std::to_string(o.node_rank);
  const std::string nodes = std::to_string(o.nnodes);
  std::vector<std::pair<std::string, std::string>> vars = {
      {"GANG_INIT_METHOD", tcp_url(job.master_addr, job.store_port)},
      {"GANG_RANK", r},
      {"GANG_SIZE", size},
      {"GANG_LOCAL_RANK", lr},
      {"GANG_LOCAL_SIZE", ls},
      {"GANG_NODE_RANK", node},
      {"GANG_NUM_NODES", nodes},
      {"RANK", r},
      {"WORLD_SIZE", size},
      {"LOCAL_RANK", lr},
      {"LOCAL_WORLD_SIZE", ls},
      {"GROUP_RANK", node},
      {"GROUP_WORLD_SIZE", nodes},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", std::to_string(job.torch_port)},
  };
  // In the environment rather than the url, so that a program that prints
  // GANG_INIT_METHOD does not print the secret.
  if (!job.flight_recorder.empty()) {
    vars.emplace_back("GANG_FLIGHT_RECORDER", job.flight_recorder);
  }
  if (!job.store_token.empty()) {
    vars.emplace_back("GANG_STORE_TOKEN", job.store_token);
  }
  return vars;
}

namespace {

// The variables that mark a replacement; never inherited from gangrun's own
// environment, so only the processes gangrun starts as joiners have them.
constexpr const char* kJoinVariables[] = {"GANG_JOIN", "GANG_REPLACES",
                                          "GANG_REPLACEMENT"};

// base with every name in `vars` (and the joiner's variables and
// TORCHELASTIC_USE_AGENT_STORE) dropped, then `vars` appended.
std::vector<std::string> with_variables(
    const std::vector<std::string>& base,
    const std::vector<std::pair<std::string, std::string>>& vars,
    const std::set<std::string>& dropped) {
  std::set<std::string> replaced = dropped;
  replaced.insert("TORCHELASTIC_USE_AGENT_STORE");
  for (const char* name : kJoinVariables) replaced.insert(name);
  for (const auto& kv : vars) replaced.insert(kv.first);
  std::vector<std::string> env;
  env.reserve(base.size() + vars.size());
  for (const std::string& entry : base) {
    if (replaced.count(entry.substr(0, entry.find('=')))) continue;
    env.push_back(entry);
  }
  for (const auto& kv : vars) env.push_back(kv.first + "=" + kv.second);
  return env;
}

}  // namespace

std::vector<std::string> rank_environment(const std::vector<std::string>& base,
                                          const Options& o,
                                          const JobLayout& job,
                                          int local_rank) {
  return with_variables(base, launch_variables(o, job, local_rank), {});
}

std::vector<std::string> joiner_environment(
    const std::vector<std::string>& base, const Options& o,
    const JobLayout& job, int local_rank, int replaces, int number) {
  const std::set<std::string> rank_vars{"GANG_RANK", "GANG_SIZE", "RANK",
                                        "WORLD_SIZE"};
  std::vector<std::pair<std::string, std::string>> vars;
  for (auto& kv : launch_variables(o, job, local_rank)) {
    if (!rank_vars.count(kv.first)) vars.push_back(std::move(kv));
  }
  vars.emplace_back("GANG_JOIN", "1");
  vars.emplace_back("GANG_REPLACES", std::to_string(replaces));
  vars.emplace_back("GANG_REPLACEMENT", std::to_string(number));
  return with_variables(base, vars, rank_vars);
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace gang::launcher
