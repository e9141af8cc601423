"""The typed reading pass against the generic (dict) one: the same answers, byte for byte.

The summary's ``--json``, ``--diff --json`` and the Timeline's step index, each made both ways (``reader.TYPED``,
the switch the command reads) on the three committed corpora (the H200 fixture, HTA's traces, torch-tb-profiler's
samples), and the summary of one trace holding each class of malformed event, each compared whole. The typed
decoder's fallbacks (an odd value, a piece cut inside a string) are driven on purpose here.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import asdict

import msgspec
import pytest

from lightx2v.trace_browser import offline
from lightx2v.trace_browser import step_index as step_index_module
from lightx2v.trace_browser.step_index import PIECE_BYTES, build_index, index_keeper, step_index
from lightx2v.trace_browser.window import step_window
from lightx2v.trace_summary import __main__ as cli
from lightx2v.trace_summary import reader
from lightx2v.trace_summary.analyze import analyze_trace
from lightx2v.trace_summary.model import RankSummary
from lightx2v.trace_summary.reader import TraceStream
from lightx2v.trace_summary.records import Event
from lightx2v.utils.torch_trace_profiler import TRACE_BROWSER_DIR

from conftest import FIXTURES, H200_TRACE
from helpers.steps_trace import steps_trace
from helpers.summary import cpu_op, kernel, step_events, trace_doc, write_json

CORPUS = sorted(p for p in FIXTURES.rglob("*.json.gz") if not p.name.endswith("_et.json.gz"))
RUN_DIRS = sorted({p.parent for p in FIXTURES.joinpath("tb_plugin").rglob("*.json.gz")})
DIFFS = [(FIXTURES / "hta/trace_diff/control", FIXTURES / "hta/trace_diff/test"),
         (FIXTURES / "hta/trace_compare/base", FIXTURES / "hta/trace_compare/test"),
         (RUN_DIRS[0], RUN_DIRS[1]),
         (H200_TRACE, FIXTURES / "hta/ns_resolution_trace")]


def both_ways(monkeypatch, capsys, *argv: str) -> tuple[str, str]:
    """The command's stdout with the typed pass and with the generic one (exit status 0 both times)."""
    out = []
    for typed in (True, False):
        monkeypatch.setattr(reader, "TYPED", typed)
        assert cli.main(list(argv)) == 0
        out.append(capsys.readouterr().out)
    return out[0], out[1]


def corpus_id(path) -> str:
    return str(path.relative_to(FIXTURES))


@pytest.mark.parametrize("path", CORPUS + RUN_DIRS, ids=corpus_id)
def test_the_summary_json_is_the_same_read_typed_or_generic(monkeypatch, capsys, path):
    typed, generic = both_ways(monkeypatch, capsys, str(path), "--json")
    assert json.loads(typed)["runs"][0]["ranks"]  # a real answer, not two empty ones
    assert typed == generic


@pytest.mark.parametrize("base,new", DIFFS, ids=lambda p: corpus_id(p).replace("/", "."))
def test_the_diff_json_is_the_same_read_typed_or_generic(monkeypatch, capsys, base, new):
    typed, generic = both_ways(monkeypatch, capsys, "--diff", str(base), str(new), "--json")
    assert json.loads(typed)["ranks"]
    assert typed == generic


# --- malformed events: the classes the hardening covered, each decoded typed where it can be ---------------------

GOOD = [*step_events("ProfilerStep#1", 0, 1000, 5, 990), kernel("gemm_kernel", 10, 400),
        kernel("gemm_kernel", 450, 800), cpu_op("aten::mm", 5, 300), cpu_op("aten::add", 310, 320),
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 1000500, "dur": 20,
         "args": {"bytes": 4096}}]
K, OP = kernel("bad_kernel", 900, 950), cpu_op("aten::bad", 900, 950)
MEM = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1000100.0, "s": "t",
       "args": {"Addr": 1, "Bytes": 8, "Total Allocated": 8, "Total Reserved": 16, "Device Type": 1, "Device Id": 0}}
DROP = object()


def broken(template: dict, args: dict | None = None, **fields: object) -> dict:
    event = copy.deepcopy(template)
    for where, changes in ((event, fields), (event.get("args", {}), args or {})):
        for key, value in changes.items():
            if value is DROP:
                del where[key]
            else:
                where[key] = value
    return event


MALFORMED = {  # each: typed records that a rule rejects, and values the typed decoder rejects (decoded generically)
    "dur negative": [broken(K, dur=-50.0), broken(OP, dur=-1)],
    "ts not a number": [broken(OP, ts="5130951173000"), broken(K, ts=True), broken(K, ts=None)],
    "ts missing": [broken(K, ts=DROP)],
    "dur missing": [broken(OP, dur=DROP)],
    "dur not a number": [broken(K, dur=[1])],
    "ts not finite": [broken(K, ts=1e400)],  # written as Infinity: the piece is read event by event
    "ts beyond a double": [broken(K, ts=10 ** 400)],
    "name not a string": [broken(K, name=7), broken(OP, name={"x": 1})],
    "name missing": [broken(OP, name=DROP)],
    "pid/tid unusable": [broken(OP, tid=[1, 2]), broken(K, pid={"a": 1}), broken(OP, pid=1.5)],
    "cat not a string": [broken(K, cat=["kernel"])],
    "bytes odd": [broken(GOOD[-1], args={"bytes": -4096}), broken(GOOD[-1], args={"bytes": 1.5}),
                  broken(GOOD[-1], args={"bytes": None})],
    "ids odd": [broken(OP, args={"External id": "7"}), broken(K, args={"correlation": 2 ** 64}),
                broken(OP, args={"External id": None}), broken(K, args={"External id": True})],
    "args no object": [broken(OP) | {"args": [1]}, broken(K) | {"args": None}],
    "memory": [broken(MEM, ts=DROP), broken(MEM, ts="5"), broken(MEM, args={"Bytes": DROP}),
               broken(MEM, args={"Bytes": None}), broken(MEM, args={"Addr": 8.0}),
               broken(MEM, args={"Total Reserved": None}), broken(MEM, args={"Total Reserved": DROP}),
               broken(MEM, args={"Bytes": 1 << 63}), broken(MEM, args={"Device Id": True}),
               broken(MEM) | {"args": None}, broken(MEM) | {"args": [1]}, broken(MEM, pid=[1]),
               broken(MEM, name="[OutOfMemory]")],
    "frames": [{"ph": "X", "cat": "python_function", "name": "lib/python3.11/site-packages/x.py(1): f", "pid": 1,
                "tid": 1, "ts": "5", "dur": 1},  # a frame the fold drops: never looked at, either way
               {"ph": "X", "cat": "python_function", "name": "torch/nn/m.py(3): g", "pid": 1, "tid": 1, "dur": 1},
               {"ph": "X", "cat": "python_function", "name": "lib/python3.11/site-packages/y.py(2): h", "pid": 1,
                "tid": 1, "dur": -1},
               {"ph": "X", "cat": "python_function", "name": "model.py(7): forward", "pid": 1, "tid": 1,
                "ts": 1000200, "dur": -1}],  # one kept: its bad dur is said
    "a name holding a cut": [broken(OP, name="aten::x }, { y"), broken(K, name='k "}, {" \\ z'),
                             broken(OP, name="aten::mm", args={"Input Dims": [[64, 128], [128, 32]],
                                                               "Input type": ["float", "float"], "flops": 524288})],
}


def summary_both_ways(path) -> tuple[RankSummary, RankSummary]:
    typed, generic = (analyze_trace(str(path), typed=typed) for typed in (True, False))
    return typed, generic


@pytest.mark.parametrize("kind", MALFORMED)
def test_each_malformed_class_gets_the_same_answers_and_reasons_typed_or_generic(tmp_path, kind):
    events = [*GOOD, MEM, *MALFORMED[kind], *GOOD[-3:]]
    path = write_json(tmp_path / "t.pt.trace.json", trace_doc(events))
    typed, generic = summary_both_ways(path)
    assert repr(typed) == repr(generic)  # every figure, every float to the last digit
    assert typed.skipped_events or kind in ("ids odd", "args no object", "a name holding a cut")


def test_the_typed_reader_decodes_only_the_events_it_must_generically(tmp_path):
    odd = broken(K, ts="5")
    path = write_json(tmp_path / "t.pt.trace.json", trace_doc([*GOOD, odd, *GOOD]), indent=None)
    stream = TraceStream(str(path), typed=True)
    kinds = []
    for batch in stream.batches():
        kinds += [type(e) for e in batch]
        assert stream.generic == [i for i, e in enumerate(batch) if type(e) is dict]
    # the odd event and the array's last one (decoded exactly at the end of the stream) are dicts, the rest typed
    assert kinds == [Event] * len(GOOD) + [dict] + [Event] * (len(GOOD) - 1) + [dict]


def test_a_rejected_record_is_decoded_again_from_its_bytes(tmp_path):
    bad = broken(K, dur=-5.0)
    path = write_json(tmp_path / "t.pt.trace.json", trace_doc([*GOOD, bad, *GOOD]))
    stream = TraceStream(str(path), typed=True, chunk_bytes=1 << 20)
    batch = next(stream.batches())
    (record,) = [e for e in batch if isinstance(e, Event) and e.dur == -5.0]
    assert stream.generic_of(record) == bad
    assert [stream.generic_of(e) for e in batch[:len(GOOD)]] == GOOD


def test_a_piece_cut_inside_a_string_is_read_event_by_event_each_typed(tmp_path):
    events = [cpu_op(f"op{i}", i, i + 1) for i in range(300)]
    events[150]["name"] = "a }, { b"
    for e in events[140:160]:
        e["args"]["Input Dims"] = [[e["ts"], 2], []]
    path = write_json(tmp_path / "t.pt.trace.json", trace_doc(events), indent=None)
    fell_back = 0
    for chunk in [*range(200, 1100, 37), 1 << 20]:  # some buffers end inside the name, the piece fails as a whole
        stream = TraceStream(str(path), typed=True, chunk_bytes=chunk)
        got = []
        for batch in stream.batches():
            got += batch
            for e in batch:
                if isinstance(e, Event):  # every typed one reads again as the dict path reads it
                    assert stream.generic_of(e) == events[len(got) - len(batch) + batch.index(e)]
        assert [e.name if isinstance(e, Event) else e["name"] for e in got] == [e["name"] for e in events]
        assert [json.loads(bytes(e.args.input_dims) or b"null") for e in got if isinstance(e, Event)] == \
            [e["args"].get("Input Dims") for e, r in zip(events, got, strict=True) if isinstance(r, Event)]
        assert sum(isinstance(e, Event) for e in got) >= 298
        fell_back += isinstance(got[150], dict)  # read event by event, the cut one exactly: the others typed
    assert fell_back >= 3


def test_a_collective_s_metadata_is_read_again_from_its_bytes_for_its_events_only(tmp_path):
    comm = {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 1000600, "dur": 5,
            "args": {"External id": 9, "Collective name": "allreduce", "Group size": 2, "Process Group Ranks": [0, 1],
                     "Seq": 3}}
    odd = broken(comm, args={"Group size": 2.5, "Seq": 4})
    path = write_json(tmp_path / "t.pt.trace.json", trace_doc([*GOOD, comm, odd, *GOOD]))
    stream = TraceStream(str(path), typed=True)
    batch = next(stream.batches())
    collectives = [e for e in batch if e.args is not None and e.args.collective is not None]
    assert len(collectives) == 2 and stream.generic == []  # both typed: their metadata is not decoded yet
    first = stream.comm_of(collectives[0])
    assert (first.collective, first.group_size, first.pg_ranks, first.seq) == ("allreduce", 2, [0, 1], 3)
    assert stream.comm_of(collectives[1]) is None and stream.generic_of(collectives[1]) == odd


@pytest.mark.parametrize("path", CORPUS, ids=corpus_id)
@pytest.mark.parametrize("piece", [PIECE_BYTES, 1 << 14], ids=["4MB", "16KB"])
def test_the_step_index_is_the_same_read_typed_or_generic(path, piece):
    typed, generic = (json.dumps(asdict(build_index(str(path), piece, typed=typed))) for typed in (True, False))
    assert json.loads(typed)["chunks"]
    assert typed == generic


# --- the trace browser: one pass for a run's Overview and its ranks' Timeline indexes -----------------------------

def test_the_overview_of_a_run_makes_each_ranks_timeline_index_in_the_same_pass(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    traces = [steps_trace(run / f"rank{r}_host.pt.trace.json", steps=40 + r) for r in (0, 1)]
    assert offline.overview_page(str(tmp_path), "run/").status == 200
    standalone = {t: build_index(t) for t in traces}

    def no_second_pass(*args, **kwargs):
        raise AssertionError("the Timeline read the trace again")

    monkeypatch.setattr(step_index_module, "build_index", no_second_pass)
    cache = str(tmp_path / TRACE_BROWSER_DIR / "index")
    for t in traces:
        kept = step_index(t, cache)
        alone = standalone[t]
        assert (kept.steps, kept.span, kept.events, kept.skipped, kept.metadata) == \
            (alone.steps, alone.span, alone.events, alone.skipped, alone.metadata)
        assert (kept.size, kept.mtime_ns) == (os.path.getsize(t), os.stat(t).st_mtime_ns)
        for k in (0, 20, len(kept.steps) - 1):  # its pieces are others (the summary's reads, merged): same windows
            for frames in (False, True):
                assert step_window(t, kept, k, frames) == step_window(t, alone, k, frames)


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "generic"])
def test_an_index_made_along_the_summary_s_pass_serves_the_same_windows_from_other_pieces(tmp_path, typed):
    trace = steps_trace(tmp_path / "rank0_host.pt.trace.json", steps=2600)  # ~2.7 MB: three of the pass's reads
    cache = str(tmp_path / "index")
    analyze_trace(trace, typed=typed, also=index_keeper(cache, trace, merge_below=3 << 19))  # pieces of 1.5 MB
    kept, alone = step_index(trace, cache), build_index(trace, typed=typed)
    assert [c.start for c in kept.chunks] != [c.start for c in alone.chunks] and len(kept.chunks) == 2
    assert (kept.steps, kept.span, kept.events, kept.skipped) == (alone.steps, alone.span, alone.events,
                                                                  alone.skipped)
    for k in (0, 1300, 2599):
        for frames in (False, True):
            assert step_window(trace, kept, k, frames) == step_window(trace, alone, k, frames)
    assert index_keeper(cache, trace) is None  # kept: the next pass makes none


def as_dicts(events: list) -> list:
    return [msgspec.structs.asdict(e) if isinstance(e, Event) else e for e in events]


@pytest.mark.parametrize("text", [
    '\ufeff{"traceEvents": [{"ph": "X", "name": "a", "ts": 1}, {"ph": "X", "name": "b", "ts": 2}], "m": 1}',
    '  [{"ph": "X", "name": "a", "ts": 1},\n {"ph": "X", "name": "b", "ts": 2}]',
    '{"traceEvents": [{"ph": "X", "name": "a", "ts": 1}, {"ph": "X", "name": "b", "ts": 2}, {"ph": "X", "na',
    '{"traceEvents": [{"ph": "X", "name": "a", "ts": 1}, {"ph": "X", "name": "b", "ts": 2}]',
    '{"traceEvents": [{"ph": "X", "name": "a", "ts": 1} {"ph": "X", "name": "b", "ts": 2}]}',
    '{"traceEvents": [{"ph": "X", "name": "a", "ts": 1}, 7, {"ph": "X"}]}',
    '{"traceEvents": [{"ph": "X", "name": "a", "ts": NaN}, {"ph": "X", "name": "}, {", "ts": 2}]}',
])
@pytest.mark.parametrize("chunk", [7, 40, 1 << 20])
def test_the_document_is_read_and_refused_alike_typed_or_generic(tmp_path, text, chunk):
    """The BOM, Chrome's array form, a file cut off, malformed JSON between events, something other than an event:
    the same events (typed ones as their fields) or the same one-line error, whichever pass reads."""
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    said = []
    for typed in (True, False):
        stream = TraceStream(str(path), chunk_bytes=chunk, typed=typed)
        try:
            events = [e for batch in stream.batches() for e in batch]
            said.append((as_dicts(events) if typed else events, stream.metadata))
        except reader.TraceError as exc:
            said.append(str(exc))
    typed_said, generic_said = said
    if isinstance(generic_said, str):
        assert typed_said == generic_said
    else:
        fields = [{k: v for k, v in e.items() if v not in (None, msgspec.UNSET)} for e in typed_said[0]]
        assert [{k: v for k, v in e.items() if k in ("ph", "name", "ts")} for e in generic_said[0]] == fields
        assert typed_said[1] == generic_said[1]
