"""One rank of a multi-rank test (see multirank.run_ranks):

    rank_main.py MODULE FUNCTION ARGS_REPR

imports MODULE from this directory, calls FUNCTION(*ARGS) and, if
GANG_TEST_RESULT is set, pickles the return value there. An exception exits
nonzero with its traceback.
"""

import ast
import importlib
import os
import pickle
import signal
import sys


def main() -> None:
    # Ctrl-C raises KeyboardInterrupt even when this process was started
    # with SIGINT ignored (a background job of a shell without job control
    # passes that on), as the tests that send it expect.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    module_name, function_name, args = sys.argv[1], sys.argv[2], ast.literal_eval(sys.argv[3])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    function = getattr(importlib.import_module(module_name), function_name)
    value = function(*args)
    path = os.environ.get("GANG_TEST_RESULT")
    if path:
        with open(path, "wb") as f:
            pickle.dump(value, f)


if __name__ == "__main__":
    main()
