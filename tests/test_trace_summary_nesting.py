"""Deep nesting, as a damaged or hostile file can hold it: real traces with 100,000 ``[`` before an event, or an
event whose args nest 100,000 objects deep. Each decoder (msgspec, orjson, the stdlib) gives up on such depth by a
RecursionError or its own error; the reader says one line with the byte, as for other malformed JSON: the summary
CLI (exit 1, no traceback, the other ranks still answered), the trace browser's Overview and Timeline index (422).
"""

from __future__ import annotations

import gzip
import re
import subprocess
import sys

import pytest

from lightx2v.trace_summary.errors import TraceError
from lightx2v.trace_summary.reader import TraceStream

from conftest import FIXTURES, H200_TRACE, subprocess_env
from helpers.procs import http_get, trace_browser

DEPTH = 100_000
CORPUS = [H200_TRACE, FIXTURES / "hta" / "trace_diff" / "control" / "control.json.gz"]
_SEP = re.compile(rb"\}\s*,\s*\{")
_ARGS = re.compile(rb'"args"\s*:\s*\{')
OTHER = "not a trace: traceEvents holds something other than event objects (at byte {})"
DEEP = "malformed JSON at byte {}: nesting too deep"


def brackets_before_an_event(data: bytes) -> tuple[bytes, str]:
    """``[`` x DEPTH before the '{' of an event halfway through the file; the problem the reader must say."""
    at = _SEP.search(data, len(data) // 2).end() - 1
    return data[:at] + b"[" * DEPTH + data[at:], OTHER.format(at)


def deep_args(data: bytes) -> tuple[bytes, str]:
    """An event's args, halfway through the file, holding ``{"a": `` nested DEPTH deep (valid JSON)."""
    args = _ARGS.search(data, len(data) // 2)
    event = data.rindex(b"{", 0, args.start())
    nested = b'"a": {' * DEPTH + b'"b": 1' + b"}" * DEPTH + b", "
    return data[:args.end()] + nested + data[args.end():], DEEP.format(event)


MUTATIONS = [brackets_before_an_event, deep_args]


def mutated(source, mutation) -> tuple[bytes, str]:
    return mutation(gzip.decompress(source.read_bytes()))


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "dicts"])
@pytest.mark.parametrize("mutation", MUTATIONS)
@pytest.mark.parametrize("source", CORPUS, ids=lambda p: p.name)
def test_the_reader_says_where_the_nesting_is(tmp_path, source, mutation, typed):
    data, problem = mutated(source, mutation)
    for name, body in (("t.json", data), ("t.json.gz", gzip.compress(data, 1))):
        path = tmp_path / name
        path.write_bytes(body)
        with pytest.raises(TraceError) as info:
            for _ in TraceStream(str(path), typed=typed):
                pass
        assert info.value.problem == problem


def cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=subprocess_env())


@pytest.mark.slow
@pytest.mark.parametrize("mutation", MUTATIONS)
def test_the_summary_says_one_line_and_answers_the_other_ranks(tmp_path, mutation):
    data, problem = mutated(H200_TRACE, mutation)
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank0_a.pt.trace.json.gz").write_bytes(H200_TRACE.read_bytes())
    bad = run / "rank1_b.pt.trace.json"
    bad.write_bytes(data)
    alone = cli(bad)
    assert (alone.returncode, alone.stdout) == (1, "")
    assert alone.stderr == f"trace_summary: error: {bad}: {problem}\n"
    both = cli(run)
    assert both.returncode == 1 and both.stderr.endswith(f"trace_summary: error: {bad}: {problem}\n")
    assert "Traceback" not in both.stderr and "rank0_a.pt.trace.json.gz" in both.stdout
    assert "ProfilerStep#4" in both.stdout


@pytest.mark.slow
def test_the_browser_answers_422_with_the_line(tmp_path):
    cases = {f"{m.__name__}.pt.trace.json": mutated(H200_TRACE, m) for m in MUTATIONS}
    for name, (data, _) in cases.items():
        (tmp_path / name).write_bytes(data)
    with trace_browser(tmp_path) as (_, port):
        for name, (_, problem) in cases.items():
            status, _, body = http_get(f"http://127.0.0.1:{port}/overview/{name}", timeout=60)
            assert status == 422 and b"<h1>Cannot summarize this trace</h1>" in body, (status, body[:300])
            assert f"{name}: {problem}".encode() in body
            status, _, body = http_get(f"http://127.0.0.1:{port}/api/timeline/index/{name}", timeout=60)
            assert (status, body.decode()) == (422, f"{tmp_path / name}: {problem}"), body[:300]
