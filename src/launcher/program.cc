#include "launcher/program.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "launcher/platform.h"

namespace gang::launcher {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() &&
         s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// "" when path is a regular file this process may use as `mode` (R_OK,
// X_OK) says, else why not.
std::string file_problem(const std::string& path, int mode) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno_text(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (::access(path.c_str(), mode) != 0) return errno_text(errno);
  return "";
}

const char* env_value(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// `PYTHON -u [-m] first rest...`.
Program under_python(const std::vector<std::string>& command, bool module) {
  Program p;
  p.path = python_interpreter(&p.python_from);
  p.argv = {p.path, "-u"};
  if (module) p.argv.emplace_back("-m");
  p.argv.insert(p.argv.end(), command.begin(), command.end());
  return p;
}

}  // namespace

std::string python_interpreter(std::string* from) {
  if (const char* python = env_value("GANG_PYTHON")) {
    *from = "GANG_PYTHON";
    try {
      return find_program(python);
    } catch (const LaunchError& e) {
      throw LaunchError(std::string("GANG_PYTHON=") + python +
                        " is not a Python to run: " + e.what());
    }
  }
  if (const char* venv = env_value("VIRTUAL_ENV")) {
    *from = "VIRTUAL_ENV";
    // The venv's own path, not the interpreter it links to: Python finds
    // the venv (pyvenv.cfg) from the path it was started as.
    const std::string python = std::string(venv) + "/bin/python";
    const std::string problem = file_problem(python, X_OK);
    if (!problem.empty()) {
      throw LaunchError("VIRTUAL_ENV=" + std::string(venv) + ": cannot run " +
                        python + ": " + problem +
                        " (set GANG_PYTHON to the Python to use)");
    }
    return python;
  }
  *from = "PATH";
  try {
    return find_program("python3");
  } catch (const LaunchError&) {
    throw LaunchError(
        "no python3 on PATH to run a Python program with (set GANG_PYTHON "
        "to the Python to use, or run it with --no-python)");
  }
}

Program resolve_program(const std::vector<std::string>& command, bool module,
                        bool no_python) {
  const std::string& program = command.front();
  if (module) return under_python(command, true);
  Program as_is;
  as_is.argv = command;
  if (no_python || !ends_with(program, ".py")) {
    as_is.path = find_program(program);
    return as_is;
  }
  if (program.find('/') != std::string::npos) {
    if (file_problem(program, X_OK).empty()) {
      as_is.path = program;
      return as_is;
    }
  } else {
    try {
      as_is.path = find_program(program);
      return as_is;
    } catch (const LaunchError&) {
      // Not a command on PATH: a script in the current directory.
    }
  }
  const std::string problem = file_problem(program, R_OK);
  if (!problem.empty()) {
    throw LaunchError(
        "cannot run the Python script " + program + ": " + problem +
        (program.find('/') == std::string::npos
             ? " (not in the current directory, nor an executable on PATH)"
             : ""));
  }
  return under_python(command, false);
}

}  // namespace gang::launcher
