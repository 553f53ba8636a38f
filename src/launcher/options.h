// gangrun's command line.
#pragma once

#include <string>
#include <vector>

namespace gang::launcher {

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;             // 0: a free one (one node only)
  std::string store_bind;          // node 0's store listens here; "":
                                   // master_addr; 0.0.0.0: everywhere
  bool prefix = false;             // "[rank R] " before every output line
  bool tee = false;                // also write each rank's output to log_dir
  std::string log_dir;             // default "gangrun-logs" when tee is set
  double timeout_s = 0;            // whole job; 0: none
  double grace_s = 5;              // SIGTERM -> SIGKILL
  double connect_timeout_s = 300;  // nodes > 0 waiting for node 0's store
  // How many failed ranks this gangrun replaces with a process that joins
  // the running gang (replacement.h); 0: the first failure stops the job.
  int replace_failed = 0;
  bool verbose = false;
  // How command runs (program.h): a Python module (-m), never through
  // Python (--no-python), or as program.h decides.
  bool module = false;
  bool no_python = false;
  std::vector<std::string> command;  // program and its arguments
  // --store-only HOST:PORT: serve the store there and nothing else, until
  // interrupted (for jobs launched otherwise, whose rank 0 would take the
  // store with it when it ends).
  bool store_only = false;

  int world_size() const { return nnodes * nproc_per_node; }
};

// What parse() found: options to run, or a message to print and an exit
// code (help and version exit 0, usage errors 2). notes: lines to print
// before running, about options accepted but without effect.
struct ParseResult {
  bool run = false;
  Options options;
  std::string message;
  int exit_code = 0;
  std::vector<std::string> notes;
};

ParseResult parse_options(int argc, char** argv);

std::string usage_text();

}  // namespace gang::launcher
