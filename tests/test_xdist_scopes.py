"""The README's test command keeps each file on one xdist worker and every Docker test on one worker (one private
engine): checked on a throwaway suite run the same way, under the pytest and xdist this machine has."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections import defaultdict

import pytest

from conftest import REPO_ROOT, subprocess_env
from helpers.xdist_scopes import scope_of

SUITE_CONFTEST = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from helpers.xdist_scopes import FileScheduling

    def pytest_xdist_make_scheduler(config, log):
        return FileScheduling(config, log)
""")
TEST_FILE = "import time\n" + "".join(f"def test_{i}():\n    time.sleep(0.05)\n" for i in range(6))


def test_a_docker_test_goes_with_the_others_and_any_other_test_with_its_file():
    assert scope_of("tests/docker_tests/test_docker_e2e.py::test_a") == "tests/docker_tests/"
    assert scope_of("tests/docker_tests/test_user_checkout.py::TestX::test_b[1]") == "tests/docker_tests/"
    assert scope_of("tests/test_records.py::test_c[tests/docker_tests/x]") == "tests/test_records.py"
    assert scope_of("tests/test_records.py::Test::test_d") == "tests/test_records.py"


@pytest.mark.slow
def test_two_workers_run_each_file_whole_and_every_docker_test_on_one(tmp_path):
    (tmp_path / "conftest.py").write_text(SUITE_CONFTEST.format(tests=str(REPO_ROOT / "tests")))
    names = [f"tests/docker_tests/test_{d}.py" for d in "abcd"] + [f"tests/test_{f}.py" for f in "efgh"]
    for name in names:  # four Docker files: plain loadscope would almost surely split them over the workers
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(TEST_FILE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadscope", "-v", "-p",
                          "no:cacheprovider", "-p", "no:randomly"], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env=subprocess_env())
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers = defaultdict(set)
    for worker, nodeid in re.findall(r"^\[(gw\d)\] \[ *\d+%\] PASSED (\S+)", run.stdout, re.M):
        workers[scope_of(nodeid)].add(worker)
    assert sorted(workers) == ["tests/docker_tests/"] + [f"tests/test_{f}.py" for f in "efgh"]
    assert all(len(ran_on) == 1 for ran_on in workers.values()), dict(workers)
    assert len(set().union(*workers.values())) == 2  # and both workers got work
