"""PyTorch's own DistributedTest (torch.testing._internal.distributed.
distributed_test, shipped in the torch wheel), run exactly as PyTorch runs
it for gloo (BACKEND=gloo, WORLD_SIZE, TEMP_DIR, one spawned process per
rank, file:// rendezvous), with every process group made on gang when
GANG_DIST_SUITE_ON=gang: the default group, and groups asked for with
backend "gloo" or none. The test selection, skips and expectations stay
gloo's. Run by dist_suite.py; imported again by each spawned rank, which is
where the groups are made.

  python dist_suite_case.py --list          the test names
  python dist_suite_case.py test_x ...       runs them; each outcome a JSON
                                             line in $GANG_DIST_SUITE_RESULTS
"""
import json
import os
import sys
import unittest

import torch.distributed as dist

ON = os.environ.get("GANG_DIST_SUITE_ON", "gloo")
if ON == "gang":
    import gang_torch  # noqa: F401  registers "gang"

    def _as_gang(backend):
        if backend is None or str(backend).lower() == "gloo":
            return "gang"
        return backend

    _init, _new_group = dist.init_process_group, dist.new_group

    def init_process_group(backend=None, *args, **kwargs):
        return _init(_as_gang(backend), *args, **kwargs)

    def new_group(ranks=None, timeout=None, backend=None, *args, **kwargs):
        return _new_group(ranks, timeout, _as_gang(backend), *args, **kwargs)

    dist.init_process_group = init_process_group
    dist.new_group = new_group

from torch.testing._internal import common_utils  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


class TestDist(TestDistBackend, DistributedTest._DistTestBase):
    """As PyTorch's test_distributed_spawn.py makes it for gloo."""

    def setUp(self):
        super().setUp()
        self._spawn_processes()


class _Recorded(unittest.TextTestResult):
    """Writes each test's outcome as a JSON line to GANG_DIST_SUITE_RESULTS."""

    def _record(self, test, outcome, detail=""):
        with open(os.environ["GANG_DIST_SUITE_RESULTS"], "a") as f:
            f.write(json.dumps({"test": test.id().rsplit(".", 1)[-1], "outcome": outcome,
                                "detail": detail[-2000:]}) + "\n")

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", str(reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


if __name__ == "__main__":
    if ON not in ("gang", "gloo"):
        sys.exit(f"GANG_DIST_SUITE_ON={ON}: gang or gloo")
    if sys.argv[1:] == ["--list"]:
        print("\n".join(unittest.TestLoader().getTestCaseNames(TestDist)))
        sys.exit(0)
    names = sys.argv[1:]
    sys.argv = sys.argv[:1]
    parse = getattr(common_utils, "parse_cmd_line_args", None)
    if parse is not None:
        parse()  # the globals run_tests would set (torch 2.9+)
    suite = unittest.TestSuite(TestDist(n) for n in names)
    unittest.TextTestRunner(resultclass=_Recorded, verbosity=2).run(suite)
