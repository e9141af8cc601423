"""How the README's test command shares tests between its two xdist workers: whole files, and every Docker test on
one worker, so a module's fixtures (a corpus trace, a two-node job) are built once and a single private engine
serves every Docker test in one process (two engines would fight over iptables and the bridge).

A scheduler of our own (xdist's ``pytest_xdist_make_scheduler`` hook) over xdist's scope scheduling, not
``--dist loadgroup``: from pytest 9.2 on, loadgroup silently stops grouping (it renames the workers' node ids in a
hook whose renaming no longer takes effect: pytest-dev/pytest-xdist#1386), and the Docker tests split over both
workers, the second waiting 20 minutes for the first's engine. The controller sees only node ids, so the scope is
read from the path: the ``docker`` marker belongs to tests under tests/docker_tests/ (tests/conftest.py checks).
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

DOCKER_DIR = "tests/docker_tests/"  # relative to the rootdir, as node ids are


def scope_of(nodeid: str) -> str:
    """The unit one worker runs whole: every Docker test together, else the test's file."""
    path = nodeid.split("::", 1)[0]
    return DOCKER_DIR if path.startswith(DOCKER_DIR) else path


class FileScheduling(LoadScopeScheduling):
    """xdist's load-by-scope scheduling with :func:`scope_of` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)
