#include "base/private_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "base/env.h"
#include "base/error.h"
#include "base/text.h"

namespace gang::base {

namespace {

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

std::string private_dir_problem(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return str_cat(dir, ": ", errno_text(errno));
  if (S_ISLNK(st.st_mode)) {
    return str_cat(dir, " is a symbolic link; name the directory itself");
  }
  if (!S_ISDIR(st.st_mode)) return str_cat(dir, " is not a directory");
  if (st.st_uid != ::geteuid()) {
    return str_cat(dir, " belongs to ", user_name(st.st_uid), ", not to this process's user, ",
                   user_name(::geteuid()),
                   ": use a directory of your own (a missing one is created, mode 0700)");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return str_cat(dir, " may be written by ",
                   (st.st_mode & S_IWOTH) != 0 ? "every user" : "its group", " (mode ",
                   mode_text(st.st_mode), "): chmod go-w ", dir,
                   ", or use a directory of your own");
  }
  return "";
}

void make_private_dir(const std::string& dir, const std::string& who) {
  if (dir.empty()) fail(Status::kInvalidArgument, who, ": the directory name is empty");
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    const std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0700) == 0) continue;
    const int err = errno;
    struct stat st {};
    if (::stat(part.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    fail(Status::kSystem, who, ": cannot create directory ", part, ": ",
         errno_text(err == EEXIST ? ENOTDIR : err));
  }
  const std::string problem = private_dir_problem(dir);
  if (!problem.empty()) fail(Status::kInvalidArgument, who, ": ", problem);
}

std::string make_temp_dir(const std::string& prefix, const std::string& who) {
  std::string base = "/tmp";
  const char* runtime = env("XDG_RUNTIME_DIR");
  const char* tmp = env("TMPDIR");
  if (runtime != nullptr && *runtime == '/' && private_dir_problem(runtime).empty()) {
    base = runtime;
  } else if (tmp != nullptr && *tmp == '/') {
    base = tmp;
  }
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::string path = str_cat(base, "/", prefix, "XXXXXX");
  if (::mkdtemp(path.data()) == nullptr) {
    fail(Status::kSystem, who, ": cannot create a directory under ", base, ": ",
         errno_text(errno));
  }
  return path;
}

}  // namespace gang::base
