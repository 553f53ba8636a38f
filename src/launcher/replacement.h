// Replacing failed ranks (--replace-failed N): when a rank fails, the
// supervisor asks for a replacement instead of stopping the job, as long
// as this node has replacements left. A replacement runs the same command
// with the failed rank's environment marked as a joiner (rank_env.h's
// joiner_environment): it joins the running gang with gang_join, and the
// survivors, who shrank the gang without the failed rank, admit it with
// gang_grow. gangrun only starts it; the program decides when to admit.
#pragma once

#include <string>
#include <vector>

#include "launcher/options.h"
#include "launcher/process.h"
#include "launcher/rank_env.h"

namespace gang::launcher {

class Replacer {
 public:
  // base: what every rank runs (path, argv, stdin), without env; env:
  // gangrun's own environment, which a replacement's starts from.
  Replacer(const Options& o, JobLayout job, SpawnSpec base,
           std::vector<std::string> env);

  int limit() const { return options_.replace_failed; }
  int used() const { return used_; }
  bool available() const { return used_ < limit(); }

  struct Joiner {
    int number = 0;  // 1..limit(): GANG_REPLACEMENT, "[join K] "
    SpawnSpec spec;
  };
  // Counts one more replacement and returns what to start in place of the
  // process that held local rank `local_rank`, launch rank `replaces`.
  // Only while available().
  Joiner next(int local_rank, int replaces);

 private:
  const Options& options_;
  const JobLayout job_;
  const SpawnSpec base_;
  const std::vector<std::string> env_;
  int used_ = 0;
};

}  // namespace gang::launcher
