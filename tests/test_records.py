"""The reading pass's typed records (lightx2v.trace_summary.records): every event of the public corpus decodes into
them with the values the JSON holds, collectives' metadata in both schemas kineto writes, and an odd value fails
the decode at that event (the reader's cue to decode it generically), never silently."""

from __future__ import annotations

import gzip
import json

import msgspec
import orjson
import pytest

from lightx2v.trace_summary.records import COMM_EVENT, EVENT, EVENTS, NO_ID, NO_RAW, UNSET, Args, Comm, Event

from conftest import REPO_ROOT

FIXTURES = sorted(p for p in (REPO_ROOT / "tests" / "fixtures").rglob("*.json.gz")
                  if not p.name.endswith("_et.json.gz"))  # an execution trace, not kineto's: no events to decode
EVENT_KEYS = {"ph": "ph", "cat": "cat", "name": "name", "pid": "pid", "tid": "tid", "ts": "ts", "dur": "dur",
              "id": "id"}


def trace_events(path):
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(REPO_ROOT / "tests" / "fixtures")))
def test_every_event_of_the_corpus_decodes_typed_with_the_values_its_json_holds(path):
    events = trace_events(path)
    records = EVENTS.decode(orjson.dumps(events))
    assert len(records) == len(events)
    fields = [(field, "args") for field in msgspec.structs.fields(Args)]
    fields += [(field, "comm") for field in msgspec.structs.fields(Comm)]
    for record, ev in zip(records, events, strict=True):
        for attr, key in EVENT_KEYS.items():
            assert getattr(record, attr) == ev.get(key, UNSET if attr in ("name", "ts", "dur") else None), (attr, ev)
        args = ev.get("args")
        assert (record.args is None) == (args is None)
        comm = COMM_EVENT.decode(orjson.dumps(ev)).args
        for field, where in fields if args is not None else ():
            value = getattr(record.args if where == "args" else comm, field.name)
            if field.encode_name not in args:
                assert value == field.default
            elif isinstance(value, msgspec.Raw):
                assert orjson.loads(bytes(value)) == args[field.encode_name]
            else:
                assert value == args[field.encode_name], (field.encode_name, ev)


COMMS_2023 = {  # record_param_comms as torch 2.1 wrote it (HTA's nccl_parser_config): ranks and splits as text
    "ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 7, "tid": 7, "ts": 10.5, "dur": 3.0,
    "args": {"External id": 12, "Ev Idx": 11, "Collective name": "allreduce", "dtype": "Float",
             "In msg nelems": 2049000, "Out msg nelems": 2049000, "Group size": 2, "In split size": "[]",
             "Out split size": "[]", "Global rank start": 0, "Global rank stride": 1, "Process Group Name": "0",
             "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]"}}
COMMS_KERNEL_2026 = {  # the NCCL kernel carrying its collective's metadata, with the group's sequence number
    "ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "pid": 0, "tid": 21, "ts": 100.0, "dur": 40.25,
    "args": {"External id": 30, "correlation": 91, "device": 0, "stream": 21, "Collective name": "_allgather_base",
             "dtype": "BFloat16", "In msg nelems": 4096, "Out msg nelems": 16384, "Group size": 4,
             "Process Group Name": "1", "Process Group Description": "seq_p", "Process Group Ranks": [0, 1, 2, 3],
             "Rank": 2, "Seq": 57, "In split size": [], "Out split size": []}}
COMMS_OLD_ID = {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 0, "dur": 1,
                "args": {"Collective name": "broadcast", "Process Group ID": 0, "Group size": 1, "Rank": 0,
                         "Src Rank": 0, "Dst Rank": 1}}


def test_collectives_metadata_decodes_in_each_schema_kineto_writes():
    records = EVENTS.decode(orjson.dumps([COMMS_2023, COMMS_KERNEL_2026, COMMS_OLD_ID]))
    assert [r.args.collective for r in records] == ["allreduce", "_allgather_base", "broadcast"]
    old, new, older = (COMM_EVENT.decode(orjson.dumps(e)).args for e in (COMMS_2023, COMMS_KERNEL_2026, COMMS_OLD_ID))
    assert (old.collective, old.dtype, old.in_nelems, old.out_nelems, old.group_size,
            old.pg_name, old.pg_desc, old.pg_ranks, old.in_split, old.seq) == \
        ("allreduce", "Float", 2049000, 2049000, 2, "0", "default_pg", "[0, 1]", "[]", None)
    assert (old.global_rank_start, old.global_rank_stride, records[0].args.external_id) == (0, 1, 12)
    assert (new.collective, new.pg_ranks, new.rank, new.seq, records[1].args.correlation,
            records[1].args.device, records[1].args.stream, new.in_split) == \
        ("_allgather_base", [0, 1, 2, 3], 2, 57, 91, 0, 21, [])
    assert (older.pg_id, older.pg_name, older.src_rank, older.dst_rank) == (0, None, 0, 1)
    assert records[2].args.external_id == NO_ID and records[2].args.correlation == NO_ID
    assert records[2].args.input_dims is NO_RAW


@pytest.mark.parametrize("event,where", [
    ({"ph": "X", "ts": "5", "dur": 1, "name": "a"}, "$[1].ts"),
    ({"ph": "X", "ts": 5, "dur": None, "name": "a"}, "$[1].dur"),
    ({"ph": "X", "ts": 5, "dur": 1, "name": None}, "$[1].name"),
    ({"ph": "X", "ts": 5, "dur": 1, "name": "a", "pid": 1.5}, "$[1].pid"),
    ({"ph": "X", "ts": 5, "dur": 1, "name": "a", "args": {"External id": "12"}}, "$[1].args.External id"),
    ({"ph": "X", "ts": 5, "dur": 1, "name": "a", "args": {"Collective name": 7}}, "$[1].args.Collective name"),
    ({"ph": "X", "ts": 5, "dur": 1, "name": "a", "args": []}, "$[1].args"),
])
def test_an_odd_value_fails_the_decode_at_that_event(event, where):
    good = {"ph": "X", "ts": 1, "dur": 1, "name": "ok"}
    with pytest.raises(msgspec.ValidationError) as raised:
        EVENTS.decode(orjson.dumps([good, event, good]))
    assert str(raised.value).endswith(f"at `{where}`")


def test_an_odd_collective_value_fails_the_second_decode_only():
    event = {"ph": "X", "name": "record_param_comms", "args": {"Collective name": "allreduce", "Group size": 2.5}}
    assert EVENT.decode(orjson.dumps(event)).args.collective == "allreduce"
    with pytest.raises(msgspec.ValidationError) as raised:
        COMM_EVENT.decode(orjson.dumps(event))
    assert str(raised.value).endswith("at `$.args.Group size`")


def test_absent_times_and_names_read_unset_and_json_has_no_nan():
    record = EVENT.decode(b'{"ph": "X", "cat": "cpu_op"}')
    assert record == Event(ph="X", cat="cpu_op") and record.ts is UNSET and record.name is UNSET
    with pytest.raises(msgspec.DecodeError):
        EVENT.decode(b'{"ts": NaN}')


def test_times_keep_their_json_number_type_and_memory_arguments_tell_absent_from_null():
    record = EVENT.decode(b'{"ph": "X", "ts": 5, "dur": 2.5, "args": {"Bytes": 8, "Addr": 1}}')
    assert (record.ts, type(record.ts), record.dur) == (5, int, 2.5)  # the Timeline's index writes 5, not 5.0
    assert (record.args.alloc_bytes, record.args.addr, record.args.total_reserved) == (8, 1, UNSET)
    for key in ("Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id", "Addr"):
        with pytest.raises(msgspec.ValidationError):  # null is no integer: the memory rule says so, generically
            EVENT.decode(orjson.dumps({"args": {key: None}}))
