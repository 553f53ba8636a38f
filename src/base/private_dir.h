// Directories only this process's user controls: where a job keeps what
// nobody else may read or plant (its file store's keys, gangrun's logs and
// flight-recorder dumps). A directory another user owns, or may write to,
// lets that user read the job's secrets, join it, or point its files at
// something else with a symbolic link.
#pragma once

#include <string>

namespace gang::base {

// Why `dir` is not such a directory, or "" when it is: it must be a
// directory itself (not a symbolic link to one), belong to this process's
// effective user, and be writable by no one else (no group or other write
// bit). The text says which, and how to fix it.
std::string private_dir_problem(const std::string& dir);

// Creates `dir` and its missing parents, mode 0700 each, then checks it
// (private_dir_problem). Throws gang::Error: kSystem when it cannot be
// created, kInvalidArgument when it is not private; messages start with
// `who` ("file store", "gangrun").
void make_private_dir(const std::string& dir, const std::string& who);

// A new directory, mode 0700, named "<prefix>XXXXXX" (random) under
// $XDG_RUNTIME_DIR when that is a private directory, else under $TMPDIR,
// else under /tmp. Throws gang::Error(kSystem) naming `who`.
std::string make_temp_dir(const std::string& prefix, const std::string& who);

}  // namespace gang::base
