#include "launcher/replacement.h"

#include <utility>

namespace gang::launcher {

Replacer::Replacer(const Options& o, JobLayout job, SpawnSpec base,
                   std::vector<std::string> env)
    : options_(o),
      job_(std::move(job)),
      base_(std::move(base)),
      env_(std::move(env)) {}

Replacer::Joiner Replacer::next(int local_rank, int replaces) {
  Joiner j;
  j.number = ++used_;
  j.spec = base_;
  j.spec.env =
      joiner_environment(env_, options_, job_, local_rank, replaces, j.number);
  return j;
}

}  // namespace gang::launcher
