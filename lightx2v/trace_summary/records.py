"""The typed records one reading pass decodes a kineto trace's events into: only the fields an analysis reads.

    events = EVENTS.decode(b"[" + piece + b"]")
    for e in events:
        if e.cat == "kernel" and e.args is not None:
            e.args.correlation, e.args.collective      # -1 / None where the event has none
    COMM_EVENT.decode(event_bytes).args              # a collective's metadata (Comm), from that event's bytes

Why typed: building a Python dict for every key of every event is most of a pass's cost (a 216 MB with_stack
trace: ``orjson`` 69-77 MB/s into dicts; msgspec into these Structs 142-159 MB/s, measured the same day on the same
machine); msgspec skips the keys a Struct does not name without building them. Field names follow kineto's JSON keys
(the key is in ``name=`` where it is not a Python name), so a reader can look each one up in a trace.

What each analysis reads (so that a field is added here, once, when a question needs it):

- every event: ``ph``, ``cat``, ``name``, ``pid``, ``tid``, ``ts``, ``dur``; flow arrows (``ph`` "s"/"f") also ``id``
  (the Timeline's index);
- links (``launch``, ``attribution``, the Timeline): ``External id``, ``correlation``; GPU activity its ``device``
  and ``stream`` (a kernel's ``pid``/``tid`` name them too), memcpy/memset their ``bytes``;
- FLOP models (``flops``): ``Input Dims``, ``Input type``, ``Concrete Inputs`` kept undecoded (:class:`msgspec.Raw`)
  until an op with a model asks, and torch's own ``flops``;
- ``[memory]`` instants (``memory``): ``Bytes``, ``Total Allocated``, ``Total Reserved``, ``Device Type``,
  ``Device Id``, ``Addr``;
- collectives (communication, across ranks): ``Collective name`` on every event (:class:`Args`), and the metadata
  (:class:`Comm`, read again from the event's bytes for the few events that carry a name: a struct's fields cost
  every event its decoding, 31 of them about a third more than 16, measured) PyTorch's c10d writes on
  ``record_param_comms`` (CPU) and, in newer kineto, copies onto the NCCL/RCCL kernel it launched: ``dtype``, ``In msg
  nelems``, ``Out msg nelems``, ``In split size``, ``Out split size``, ``Group size``, ``Process Group Name``
  (older traces: ``Process Group ID``), ``Process Group Description``, ``Process Group Ranks``, ``Global rank
  start``, ``Global rank stride``, ``Rank``, ``Src Rank``, ``Dst Rank`` (point-to-point), ``Seq`` (the group's
  sequence number, which matches one collective across the ranks of a run); the gloo backend writes none of these
  (its ``c10d::*`` op and its ``gloo:*`` annotation carry only shapes).

Types are those kineto writes, with the variants seen in the public corpus (HTA's test traces, torch-tb-profiler's
samples, torch 2.0-2.13): ``stream`` is a number, or a string ("0x0") on ROCm runtime events; the split sizes and
``Process Group Ranks`` are strings ("[0, 1]") or lists. Every field has a default, so a missing key is never an
error. A value of another type (a string where a number goes, null, NaN, a float beyond a double's range) fails
the typed decode (msgspec names the event: "at `$[12].ts`"; for :class:`Comm`, that event's second decode): the
reader then decodes that event generically and hands it to the pass's malformed-event rules (one line per field and
problem), never failing the file on it. An absent ``name``, ``ts`` or ``dur`` is ``UNSET`` (JSON null fails the
decode instead), so those rules can tell "missing" from "not a number"; so is an absent ``[memory]`` argument.
Times keep the JSON's number type (an integer stays an int), and integers beyond 64 bits decode as Python ints, as
the stdlib parser reads them. Decoding costs grow with the fields a struct names (each one is filled with every
default, and emptied again): a field is added only when an analysis reads it.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

NO_ID = -1  # an absent External id or correlation (kineto's ids are positive)
NO_RAW = msgspec.Raw(b"")  # an absent undecoded value (a present one is never empty)


class Args(msgspec.Struct, gc=False):
    """The ``args`` keys the analyses read; ``None`` (or NO_ID for the links) where the event has none."""

    # links
    external_id: int = msgspec.field(name="External id", default=NO_ID)
    correlation: int = NO_ID
    device: int | None = None
    stream: int | str | None = None
    bytes: int | None = None  # memcpy / memset size
    # recorded shapes (record_shapes=True), decoded only for ops a FLOP model reads; torch's own count
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=NO_RAW)
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=NO_RAW)
    concrete_inputs: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=NO_RAW)
    flops: int | None = None
    # [memory] instants (profile_memory=True): UNSET where absent, and JSON null fails the decode, as the memory
    # rules tell a missing value from one that is no integer
    alloc_bytes: int | UnsetType = msgspec.field(name="Bytes", default=UNSET)
    total_allocated: int | UnsetType = msgspec.field(name="Total Allocated", default=UNSET)
    total_reserved: int | UnsetType = msgspec.field(name="Total Reserved", default=UNSET)
    device_type: int | UnsetType = msgspec.field(name="Device Type", default=UNSET)
    device_id: int | UnsetType = msgspec.field(name="Device Id", default=UNSET)
    addr: int | UnsetType = msgspec.field(name="Addr", default=UNSET)
    # collectives: the name tells a collective's events (record_param_comms, the NCCL/RCCL kernel it launched);
    # their metadata is :class:`Comm`, decoded for those events only (``TraceStream.comm_of``)
    collective: str | None = msgspec.field(name="Collective name", default=None)


class Comm(msgspec.Struct, gc=False):
    """A collective's metadata (``args`` of ``record_param_comms`` and of the kernel it launched)."""

    collective: str | None = msgspec.field(name="Collective name", default=None)
    dtype: str | None = None
    in_nelems: int | None = msgspec.field(name="In msg nelems", default=None)
    out_nelems: int | None = msgspec.field(name="Out msg nelems", default=None)
    in_split: str | list[int] | None = msgspec.field(name="In split size", default=None)
    out_split: str | list[int] | None = msgspec.field(name="Out split size", default=None)
    group_size: int | None = msgspec.field(name="Group size", default=None)
    pg_name: str | None = msgspec.field(name="Process Group Name", default=None)
    pg_id: int | None = msgspec.field(name="Process Group ID", default=None)
    pg_desc: str | None = msgspec.field(name="Process Group Description", default=None)
    pg_ranks: str | list[int] | None = msgspec.field(name="Process Group Ranks", default=None)
    global_rank_start: int | None = msgspec.field(name="Global rank start", default=None)
    global_rank_stride: int | None = msgspec.field(name="Global rank stride", default=None)
    rank: int | None = msgspec.field(name="Rank", default=None)
    src_rank: int | None = msgspec.field(name="Src Rank", default=None)
    dst_rank: int | None = msgspec.field(name="Dst Rank", default=None)
    seq: int | None = msgspec.field(name="Seq", default=None)


class Event(msgspec.Struct, gc=False):
    """One trace event: its phase, category, name, process and thread, times (µs), flow id and args."""

    ph: str | None = None
    cat: str | None = None
    name: str | UnsetType = UNSET
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | UnsetType = UNSET  # as written: an integer stays one (the Timeline's index keeps it so)
    dur: int | float | UnsetType = UNSET
    id: int | str | None = None
    args: Args | None = None


class CommEvent(msgspec.Struct, gc=False):
    """An event read again for its collective's metadata only."""

    args: Comm | None = None


EVENTS = msgspec.json.Decoder(list[Event])  # one decode call per piece of complete events: "[" + piece + "]"
EVENT = msgspec.json.Decoder(Event)  # one event, where a piece failed and the reader looks event by event
COMM_EVENT = msgspec.json.Decoder(CommEvent)  # a collective's event, again, from its bytes
