#include "base/descriptors.h"

#include <dirent.h>
#include <sys/resource.h>

#include <cerrno>

#include "base/error.h"

namespace gang::base {

namespace {

// Within this many of the limit counts as out: the call that failed may
// have let go of what it held while it unwound.
constexpr long kMargin = 4;

}  // namespace

bool out_of_descriptors(std::string* why) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  long open = -1;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    open = 0;
    while (const dirent* e = ::readdir(d)) open += e->d_name[0] != '.';
    ::closedir(d);
    open -= 1;  // the directory's own
  } else if (errno != EMFILE && errno != ENFILE) {
    return false;
  }
  const bool out = open < 0 || (limit.rlim_cur != RLIM_INFINITY &&
                                open + kMargin >= static_cast<long>(limit.rlim_cur));
  if (out && why != nullptr) {
    *why = str_cat("this process ran out of file descriptors (",
                   open < 0 ? std::string("all") : std::to_string(open), " open of its limit, ",
                   static_cast<unsigned long long>(limit.rlim_cur),
                   ": RLIMIT_NOFILE); each gloo gang holds a listening socket and one per peer "
                   "it talked to, so raise the limit (ulimit -n, up to the hard limit ",
                   static_cast<unsigned long long>(limit.rlim_max),
                   "), destroy the gangs no longer used, or let gangs split from a gloo gang "
                   "share its connections (GANG_GLOO_SHARED_CONNECTIONS=1)");
  }
  return out;
}

}  // namespace gang::base
