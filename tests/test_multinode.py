"""Multi-node for real, on one machine: a 2-node torchrun job (two UTS namespaces, so two host names; c10d
rendezvous over loopback), one rank per node, the drop-in profiler around a target that holds an all_reduce.

Two jobs run side by side. `shared`: both nodes run in one folder (a shared file system): the capture lands in one
run directory holding both hosts' rank files, TensorBoard shows one run with both workers, HTA finds both ranks.
`local`: each node runs in its own folder (no shared file system): both nodes name the same run directory (agreed
through the job's c10d store), and the gather command of docs/torchrun.md, run on node A, makes that run directory
hold both files, which TensorBoard and HTA then read like the shared one. A third job, in one folder, runs until
told to stop: the stack's command on node A lists it as one job on both hosts and arms it, and both nodes capture
the same call. Every job must exit exactly 0 on both nodes (tests/helpers/torchrun.py).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO_ROOT, free_port, subprocess_env
from helpers.procs import launcher, runs, wait_until, workers
from helpers.torchrun import TwoNodeJob, rows
from helpers.traces import PLUGIN_TRACE_RE, load_trace

pytestmark = pytest.mark.torchrun

PROGRAM = REPO_ROOT / "tests" / "programs" / "distributed_capture.py"
ARMS_PROGRAM = REPO_ROOT / "tests" / "programs" / "distributed_arms.py"  # runs until CONTROL/stop; call#<i> labels
DOCS = [REPO_ROOT / "docs" / "torchrun.md", REPO_ROOT / "README.md", REPO_ROOT / "docs" / "zh" / "torchrun.md"]
HOSTS = ("nodeA", "nodeB")
TB_DIR = Path("save_results") / "torch_profile"  # the default, as LightX2V's scripts leave it
# The nodes' local times differ by 8 hours, so a run directory named by a node's own clock would differ by node
# (run directory names start with the local time); only the name agreed through the job's store is the same.
NODE_CLOCKS = {"nodeA": {"TZ": "UTC0"}, "nodeB": {"TZ": "CST-8"}}
# x = rank + 1 on each rank, all_reduce(relu(x @ x)) over a 16x16 matrix: what both ranks must print
EXPECTED_SUM = str(float(sum(16 * (rank + 1) ** 2 for rank in (0, 1)) * 16 * 16))


@dataclass
class Job:
    cwds: dict[str, Path]
    outputs: dict[str, str]
    returncodes: dict[str, int | None]

    def result(self, host: str) -> dict[str, str]:
        (row,) = rows(self.outputs[host], "RESULT").values()  # one rank per node
        return row

    def run_dir_names(self) -> dict[str, str]:
        return {host: Path(self.result(host)["paths"]).parent.name for host in HOSTS}

    def expected_files(self) -> dict[int, str]:
        """rank -> the file that rank writes: `rank<R>_<its host>.pt.trace.json`."""
        return {int(self.result(host)["rank"]): f"rank{self.result(host)['rank']}_{host}.pt.trace.json"
                for host in HOSTS}


def traces_in(run_dir: Path) -> set[str]:
    return {p.name for p in run_dir.iterdir() if PLUGIN_TRACE_RE.match(p.name)}


def documented_gather() -> list[str]:
    """The one gather command docs/torchrun.md gives (`rsync ... nodeB:<path>/save_results/torch_profile/ ...`),
    the same line in the README and the Chinese guide."""
    found = {doc.relative_to(REPO_ROOT).as_posix(): [line.strip() for line in doc.read_text().splitlines()
                                                     if line.strip().startswith("rsync ")] for doc in DOCS}
    assert len(set(map(tuple, found.values()))) == 1 and len(found["docs/torchrun.md"]) == 1, found
    return shlex.split(found["docs/torchrun.md"][0])


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Both jobs, run at the same time; then, on the local job's node A, the documented gather from node B."""
    base = tmp_path_factory.mktemp("multinode")
    view = base / "view"  # TensorBoard's logdir: the shared folder and node A's own folder, not node B's
    layouts = {"shared": {host: view / "shared" for host in HOSTS},
               "local": {"nodeA": view / "nodeA", "nodeB": base / "nodeB"}}
    for cwds in layouts.values():
        for cwd in cwds.values():
            cwd.mkdir(parents=True, exist_ok=True)
    started = {name: TwoNodeJob(PROGRAM, "tensorboard", cwds=cwds, node_env=NODE_CLOCKS,
                                LIGHTX2V_TORCH_PROFILE_DIR=str(TB_DIR))
               for name, cwds in layouts.items()}
    done = {}
    try:
        for name, job in started.items():
            outputs = job.wait(timeout=240)
            done[name] = Job(layouts[name], outputs, {host: p.returncode for host, p in job.procs.items()})
    finally:
        for job in started.values():
            job.kill()

    local = done["local"]
    before = {host: traces_in(local.cwds[host] / TB_DIR / local.run_dir_names()[host]) for host in HOSTS}
    # node A runs the documented command; here node B's "nodeB:/path" is the local folder it wrote to
    argv = documented_gather()
    source, target = argv[-2], argv[-1]
    assert source.startswith("nodeB:") and source.endswith(f"{TB_DIR}/") and target == f"{TB_DIR}/", argv
    gather = [*argv[:-2], f"{local.cwds['nodeB'] / TB_DIR}/", target]
    subprocess.run(gather, cwd=local.cwds["nodeA"], check=True, timeout=60)
    return {"shared": done["shared"], "local": local, "before_gather": before, "view": view}


def test_shared_filesystem_one_run_directory_with_both_hosts(jobs):
    job = jobs["shared"]
    results = {host: job.result(host) for host in HOSTS}
    assert sorted(int(row["rank"]) for row in results.values()) == [0, 1]
    assert all(row["world"] == "2" and row["calls"] == "5" for row in results.values())
    assert {row["sum"] for row in results.values()} == {EXPECTED_SUM}  # the collective ran across the nodes

    run_dirs = [p for p in (job.cwds["nodeA"] / TB_DIR).iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(run_dirs) == 1, run_dirs
    assert set(job.run_dir_names().values()) == {run_dirs[0].name}
    assert traces_in(run_dirs[0]) == set(job.expected_files().values())  # rank0_nodeX and rank1_nodeY
    for rank, name in job.expected_files().items():
        info = load_trace(run_dirs[0] / name)["distributedInfo"]
        assert (info["rank"], info["world_size"]) == (rank, 2), name


def test_without_shared_filesystem_nodes_agree_on_the_run_directory_and_one_command_gathers_it(jobs):
    job = jobs["local"]
    names = job.run_dir_names()
    assert names["nodeA"] == names["nodeB"], names  # agreed through the c10d store, written on two disks
    name = names["nodeA"]
    files = job.expected_files()
    by_host = {host: f"rank{job.result(host)['rank']}_{host}.pt.trace.json" for host in HOSTS}
    assert jobs["before_gather"] == {host: {by_host[host]} for host in HOSTS}  # each node: only its own rank
    assert {row["sum"] for row in (job.result(h) for h in HOSTS)} == {EXPECTED_SUM}

    gathered = job.cwds["nodeA"] / TB_DIR
    assert [p.name for p in gathered.iterdir() if p.is_dir() and not p.name.startswith(".")] == [name]
    assert traces_in(gathered / name) == set(files.values())
    assert (gathered / name / f"{by_host['nodeB']}.summary.txt").is_file()  # what sits beside a trace comes too
    # what is private to node B stays there: its processes' remote-arming status files are not node A's
    assert {p.name.split("_")[0] for p in (gathered / ".capture").glob("*.status.json")} == {"nodeA"}


def test_tensorboard_shows_one_run_with_every_worker(jobs):
    port = free_port()
    server = launcher(jobs["view"], port)
    try:
        expected = {}
        for layout, folder in (("shared", "shared"), ("local", "nodeA")):
            job = jobs[layout]
            run = f"{folder}/{TB_DIR}/{job.run_dir_names()['nodeA']}"
            expected[run] = sorted(name.split(".")[0] for name in job.expected_files().values())
        wait_until(lambda: set(runs(port)) == set(expected), 90, what=f"the runs {sorted(expected)}")
        for run, worker_names in expected.items():
            assert sorted(workers(port, run)) == worker_names, run
            assert {w.split("_", 1)[1] for w in worker_names} == set(HOSTS)  # host names visible in the workers
    finally:
        server.stop()


def test_hta_finds_every_rank(jobs):
    from hta.trace_analysis import TraceAnalysis

    for layout, folder in (("shared", "nodeA"), ("local", "nodeA")):
        job = jobs[layout]
        run_dir = job.cwds[folder] / TB_DIR / job.run_dir_names()["nodeA"]
        analysis = TraceAnalysis(trace_dir=str(run_dir))
        found = {rank: Path(path).name for rank, path in analysis.t.trace_files.items()}
        assert found == job.expected_files(), layout


def test_job_exits_0_on_both_nodes_and_leaves_no_process_group(jobs):
    for layout in ("shared", "local"):
        job = jobs[layout]
        assert job.returncodes == {"nodeA": 0, "nodeB": 0}
        for host in HOSTS:
            (row,) = rows(job.outputs[host], "EXIT").values()
            assert row["pinned"] == "-" and row["gloo_threads"] == "-", (layout, host, row)


def traced_calls(run_dir: Path) -> dict[str, set[str]]:
    """{trace file: the call#<i> labels in it} for every trace in a run directory."""
    return {name: {str(e.get("name")) for e in load_trace(run_dir / name)["traceEvents"]
                   if str(e.get("name", "")).startswith("call#")} for name in traces_in(run_dir)}


@pytest.mark.timeout(300)
def test_an_arm_from_node_a_captures_both_nodes_at_the_same_call(tmp_path):
    """Two running 2-node jobs, one in a shared folder, one with a folder per node. The stack on node A (the
    command, run in node A's namespace) lists each as one job and arms it: both nodes' ranks capture the same call
    (the traces' call#<i> labels) into one run directory -- for the folder-per-node job once node B's files are
    gathered with the documented command; both jobs then exit 0 on both nodes."""
    layouts = {"shared": {host: tmp_path / "shared" for host in HOSTS},
               "local": {host: tmp_path / host for host in HOSTS}}
    started = {}
    for name, cwds in layouts.items():
        for cwd in cwds.values():
            cwd.mkdir(exist_ok=True)
        (tmp_path / f"control_{name}").mkdir()
        started[name] = TwoNodeJob(ARMS_PROGRAM, str(tmp_path / f"control_{name}"), "skew", cwds=cwds)
    try:
        def capture(name: str, *args: str) -> subprocess.CompletedProcess:
            logdir = layouts[name]["nodeA"] / "tb"
            return subprocess.run(started[name].on("nodeA", sys.executable, "-m", "lightx2v.capture", *args,
                                                   str(logdir)),
                                  capture_output=True, text=True, timeout=180, env=subprocess_env())

        wait_until(lambda: all("READY rank=" in job.output(host) for job in started.values() for host in HOSTS),
                   180, what="every node's first capture")
        expected_listing = {"shared": "2 ranks on nodeA, nodeB", "local": "1 of 2 ranks on nodeA"}
        armed = {}
        for name, listing in expected_listing.items():
            listed = wait_until(lambda name=name, listing=listing: listing in (out := capture(name, "list").stdout)
                                and out, 60, what=f"the {name} job listed")
            assert len(listed.splitlines()) == 1 and "[running]" in listed, listed
            armed[name] = capture(name, "arm", "--wait", "120")
            assert armed[name].returncode == 0, armed[name].stdout + armed[name].stderr
        for name in started:
            (tmp_path / f"control_{name}" / "stop").touch()
        outputs = {name: job.wait(timeout=120) for name, job in started.items()}
    finally:
        for job in started.values():
            job.kill()

    # node B's files of the folder-per-node job, gathered into node A's folder (as in the `jobs` fixture)
    argv = documented_gather()
    subprocess.run([*argv[:-2], f"{layouts['local']['nodeB'] / 'tb'}/", "tb/"], cwd=layouts["local"]["nodeA"],
                   check=True, timeout=60)
    for name, answer in armed.items():
        found = re.search(r"captured call (\d+) on (\d+) ranks? -> (.+)", answer.stdout)
        assert found, answer.stdout
        call, run_dir = int(found[1]), Path(found[3].strip())
        assert found[2] == ("2" if name == "shared" else "1"), answer.stdout  # `--wait` waits for the ranks listed
        seen = traced_calls(run_dir)
        assert {file.split(".")[0].split("_", 1)[1] for file in seen} == set(HOSTS), (name, seen)  # one per host
        assert all(labels == {f"call#{call}"} for labels in seen.values()), (name, call, seen)
        done = [row for host in HOSTS for row in rows(outputs[name][host], "DONE").values()]
        assert [row["captures"] for row in done] == ["2", "2"], (name, done)
