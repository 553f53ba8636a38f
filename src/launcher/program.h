// What gangrun executes for its command line: the program as it is, or a
// Python script or module under the Python interpreter of this environment,
// as torchrun runs them.
#pragma once

#include <string>
#include <vector>

namespace gang::launcher {

struct Program {
  std::string path;               // what execve runs
  std::vector<std::string> argv;  // argv[0] included
  std::string python_from;        // where the interpreter came from, or ""
};

// The interpreter for Python scripts and modules: $GANG_PYTHON if set (a
// path, or a name looked up on PATH), else $VIRTUAL_ENV/bin/python if
// VIRTUAL_ENV is set, else python3 on PATH. *from names the choice for
// messages ("GANG_PYTHON", ...). Throws LaunchError naming the variable
// when the interpreter it names cannot be run.
std::string python_interpreter(std::string* from);

// command is the program and its arguments. module: command[0] names a
// Python module, run as `PYTHON -u -m module args`. no_python: run
// command[0] as find_program finds it, whatever its name. Otherwise a
// command[0] ending in ".py" that is not an executable (given with a '/',
// or found on PATH) is a script, run as `PYTHON -u script args`; anything
// else is run as it is. -u: the rank's output reaches gangrun line by line,
// as it is printed, not when a pipe's buffer fills. Throws LaunchError.
Program resolve_program(const std::vector<std::string>& command, bool module,
                        bool no_python);

}  // namespace gang::launcher
