// The environment each rank starts with: gangrun's own, plus gang's and
// torchrun's launch variables.
#pragma once

#include <string>
#include <vector>

#include "launcher/options.h"

namespace gang::launcher {

struct JobLayout {
  std::string master_addr;
  int store_port = 0;       // gang's store, hosted by gangrun on node 0
  int torch_port = 0;       // MASTER_PORT: free, left for the program to bind
  std::string store_token;  // GANG_STORE_TOKEN for the ranks; "": none
  // GANG_FLIGHT_RECORDER for the ranks, unless the environment sets one:
  // where each rank dumps its recent operations (on failure, or on
  // SIGUSR2 to gangrun); "": none.
  std::string flight_recorder;
};

// tcp://host:port, an IPv6 address in brackets.
std::string tcp_url(const std::string& host, int port);

// The variables gangrun sets for local rank `local_rank`, in a fixed order
// (GANG_FLIGHT_RECORDER and GANG_STORE_TOKEN last, each only when the job
// has one).
std::vector<std::pair<std::string, std::string>> launch_variables(
    const Options& o, const JobLayout& job, int local_rank);

// `base` ("NAME=value" entries, e.g. from environ) with every launch
// variable replaced and TORCHELASTIC_USE_AGENT_STORE removed (gangrun hosts
// no PyTorch store for the program to join).
std::vector<std::string> rank_environment(const std::vector<std::string>& base,
                                          const Options& o,
                                          const JobLayout& job, int local_rank);

// The environment of a replacement for local rank `local_rank`: the rank's,
// without GANG_RANK, GANG_SIZE, RANK and WORLD_SIZE (the members of the
// running gang assign its rank when they admit it, and a gang_create that
// read them would wait forever for a rendezvous that is over), with
// GANG_JOIN=1, GANG_REPLACES=<replaces> (the launch rank whose place it
// takes) and GANG_REPLACEMENT=<number> (1, 2, ... on this node).
std::vector<std::string> joiner_environment(
    const std::vector<std::string>& base, const Options& o,
    const JobLayout& job, int local_rank, int replaces, int number);

// This process's environment as "NAME=value" entries.
std::vector<std::string> current_environment();

}  // namespace gang::launcher
