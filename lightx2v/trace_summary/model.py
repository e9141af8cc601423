"""The summary's data: plain dataclasses whose field names are the stable ``--json`` schema (docs/trace_summary.md).

Times are microseconds (the trace's own unit), percentages are 0-100. A field that does not apply is ``None``
(e.g. GPU fields of a CPU-only trace), never left out, so consumers can rely on every key being present.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

# 2: RankSummary.efficiency; 3: RankSummary.frames; 4: SyncWait.line; 5: CpuOpStat.self_us without the op's
# runtime calls (TensorBoard's) and self_with_runtime_us, RankSummary.trace_start_us, RunSummary.spans;
# 6: RankSummary.communication, RunSummary.communication, Straggler.waits_caused_us; 7: RankSummary.gpu_clock,
# FrameStat.line
SCHEMA = "lightx2v.trace_summary/7"


@dataclass
class Device:
    id: Optional[int]
    name: str
    memory_bytes: Optional[int]
    compute_capability: Optional[str]


@dataclass
class SyncWait:
    """GPU idle time spent while the host sat in one synchronizing call (by its op and the call's name)."""

    op: str  # the top-level op around the call ("aten::item"), "" when the call ran outside any op
    call: str  # "cudaStreamSynchronize", "cudaDeviceSynchronize", a blocking "cudaMemcpy", ...
    idle_us: float
    gaps: int
    line: str = ""  # where in the user's code the call sat ("two_functions.py:41 main"); "" without with_stack


@dataclass
class IdleCauses:
    """A window's GPU idle time split by cause (``steps``); the five add up to the idle time."""

    host_wait_us: float  # the next GPU event was launched only after the GPU went idle, no sync involved
    sync_us: float  # ... because the host sat in a synchronizing call (cudaStreamSynchronize, .item(), ...)
    short_gaps_us: float  # gaps < SHORT_GAP_US between GPU events that were already queued: launch-bound
    other_us: float  # longer gaps between queued events (waits on events, other streams)
    unknown_us: float  # gaps ended by an event whose launch the trace does not record
    dominant: str  # "host wait", "sync", "short gaps", "other", "unknown", or "" without idle time
    syncs: list[SyncWait] = field(default_factory=list)  # most idle time first


@dataclass
class IdleStats:
    """GPU idle time inside a window (a step): everything not covered by kernel/memcpy/memset intervals."""

    window_us: float
    idle_us: float
    ratio: float  # idle_us / window_us, 0..1
    largest_gap_us: float
    largest_gap_at_us: float  # where the largest gap starts, from the start of its step
    largest_gap_step: str  # the step holding the largest gap
    gaps_over_10us: int
    flagged: bool  # ratio >= IDLE_FLAG_RATIO
    causes: Optional[IdleCauses] = None


@dataclass
class StepStats:
    name: str  # "ProfilerStep#4", or "(whole trace)" when the trace has no step annotations
    number: Optional[int]
    start_us: float  # trace timestamp of the step start
    wall_us: float  # the step's window: its CPU span, extended over the GPU tail up to the next step's start
    cpu_us: float  # the CPU-side ProfilerStep span alone
    gpu_busy_us: Optional[float]  # GPU busy (any work) inside the window
    gpu_busy_pct: Optional[float]
    kernel_count: Optional[int]  # kernels launched in the step (their launch inside its CPU span)
    idle: Optional[IdleStats]
    gpu_launched_us: Optional[float] = None  # summed time of the GPU work (kernels, copies, sets) launched in it
    gpu_lag_us: Optional[float] = None  # how long after the CPU step ended its last GPU work finished (>= 0)


@dataclass
class KernelStat:
    name: str
    short_name: str
    calls: int
    total_us: float
    mean_us: float
    pct_of_gpu_time: float  # share of summed GPU activity (kernels + memcpy + memset)


@dataclass
class CpuOpStat:
    """One CPU op name. Self time is TensorBoard's self host duration: without child ops and without the CUDA
    runtime/driver calls the op made itself (``cpu_ops``)."""

    name: str
    calls: int
    self_us: float
    total_us: float
    mean_self_us: float
    pct_of_cpu_self: float  # share of the summed self time of all CPU ops
    # self time counting the runtime calls the op made itself (cudaMemcpyAsync, syncs) as its own; None only in a
    # summary made by hand
    self_with_runtime_us: Optional[float] = None


@dataclass
class MemOpStat:
    kind: str  # "memcpy" or "memset"
    name: str  # e.g. "Memcpy HtoD (Pageable -> Device)"
    calls: int
    total_us: float
    bytes: Optional[int]


@dataclass
class GpuTotals:
    busy_us: float  # union of all GPU activity intervals in the trace
    activity_us: float  # plain sum of their durations (>= busy_us when streams overlap)
    kernel_count: int
    kernel_us: float
    memcpy_us: float
    memset_us: float
    streams: int
    devices: int  # devices with GPU activity (distinct pids of its events), named in deviceProperties or not


@dataclass
class SkippedEvents:
    """Events (or one field of them) left out because a field the summary reads is malformed."""

    field: str  # "ts", "dur", "name", "pid/tid", "cat", "args.bytes"
    problem: str  # e.g. "negative", "not a number"
    count: int
    example: str  # the name of the first such event ("" when it has none)
    dropped: bool  # True: the whole event was left out; False: only this field (e.g. a memcpy's unknown bytes)


@dataclass
class GpuClockCheck:
    """GPU events whose times contradict the host's record of the same work (``gpu_clock``): counted in what their
    durations and launches answer, left out of what lays their times on the CPU's timeline."""

    gpu_events: int  # kernels, memcpys and memsets checked
    before_launch: int  # start before their own launch call began
    after_sync: int  # end after a device-wide synchronize, called once their launch had returned, returned
    far_off: int  # lie more than gpu_clock.FAR_US outside the CPU events' span
    off: int  # distinct events in any of those
    whole_clock: bool  # the GPU clock itself is off the CPU's (one offset explains it: ``gpu_clock``)
    offset_us: Optional[float]  # whole_clock: the least offset of the GPU's times the trace proves (late > 0)
    example: str  # the first off event's name ("" when none is off)


@dataclass
class SkippedFile:
    """A file of a folder argument that is not a trace (or not one this summary reads), and why."""

    file: str
    reason: str


@dataclass
class DamagedFile:
    """A trace file of a run that could not be read (truncated, corrupt); the run's other files are reported."""

    file: str
    problem: str


@dataclass
class Launch:
    """GPU work charged to the op that launched it: one (top-level op, label, launcher, kernel) with its totals."""

    op: str  # the top-level op under the step: the outermost cpu_op around the launcher ("" when none is known)
    label: str  # the nearest record_function (user_annotation) label around the launcher ("" when none)
    launcher: str  # the op whose External id the kernel carries (the innermost op: the lowering)
    kind: str  # "kernel", "memcpy" or "memset"
    name: str  # the kernel's (or memory op's) full name
    calls: int
    total_us: float


@dataclass
class LaunchLinks:
    """How the trace's GPU events were linked to the ops that launched them (launch.launch_chain)."""

    gpu_events: int  # kernels, memcpys and memsets
    with_launch_record: int  # whose runtime/driver call (same correlation id) is in the trace
    by_launch_chain: int  # linked through that call to the op enclosing it on its thread
    by_external_id: int  # without a launch record, linked by an External id that agrees with the chain
    label_only: int  # launched outside any op but inside a record_function label: charged to the label
    unlinked: int  # neither an op nor a label known
    external_id: str  # what the trace's External id was found to be, e.g. "agrees with the launch chain on ..."


@dataclass
class StepSeries:
    """Per-step values of one rank (``steps[i]`` is the i-th step), kept for telling change from noise."""

    steps: list[str]
    wall_us: list[float]
    kernel_us: dict[str, list[float]]  # kernel name -> its time launched in each step
    cpu_self_us: dict[str, list[float]]  # CPU op name -> its self time in each step (by the op's start)
    group_us: dict[tuple[str, str], list[float]]  # (label, top-level op) -> GPU time launched in each step


@dataclass
class FrameTree:
    """The kept Python frames as a prefix tree (``frames``), each node's own work per step; not in ``--json``.

    Node 0 is the root: work with no frame around it. A node is one frame name under one parent node (a frame
    called from two places is two nodes). Values are per step (means over the steps); ``ops`` splits each node's
    own work by its top-level op, the tree's last level.
    """

    names: list[str]  # per node: the frame as the trace writes it ("model.py(21): forward"), "" for the root
    kinds: list[str]  # "user", "module" (nn.Module), "library" (torch, stdlib, site-packages, built-ins)
    parent: list[int]  # -1 for the root
    calls: list[int]  # frame events of this node in the trace
    gpu_us: list[float]  # self: GPU work (kernels, memcpy, memset) launched with this as the innermost frame
    kernel_us: list[float]  # self: of which kernels
    cpu_us: list[float]  # self: CPU ops' self time
    alloc_bytes: list[float]  # self: bytes allocated (profile_memory) on ``memory_device``
    ops: dict[tuple[int, str], list[float]]  # (node, top-level op or "") -> [gpu, kernel, cpu, alloc] self
    step_gpu_us: dict[int, list[float]]  # node -> its self GPU time in each step (nodes with any)
    step_cpu_us: dict[int, list[float]]  # node -> its self CPU op time in each step
    steps: int
    memory_device: str  # "cuda" (any CUDA allocations) or "cpu"; "" without allocations
    running: frozenset[str] = frozenset()  # names recorded on the stack when the capture began (their line is the
    # one they were running: ``frames.running_at_start``), not entered during it (their line is the def line)


@dataclass
class CollectiveCall:
    """One call of a collective on one rank (``comm``), whichever schema the trace writes it in; not in ``--json``.

    Times are trace timestamps (µs). ``arrival_us``/``end_us`` are the GPU kernel's on a GPU trace (a NCCL kernel
    starts when its stream reaches it and ends when the peers are done), else the host's: the call, and the end of
    its work (gloo: the ``gloo:*`` annotation on the backend's thread; the caller blocks until then). A backend
    thread that takes the work up late (a busy CPU) shows as transfer, not as the rank arriving late: the rank's
    program had reached the collective.
    """

    kind: str  # "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "barrier", "send", ...
    group: str  # the process group's name ("0"), "" when the trace does not say (gloo): the run's one group
    group_desc: str  # "default_pg", "" when not recorded
    ranks: Optional[list[int]]  # the group's global ranks, when recorded
    seq: Optional[int]  # the group's sequence number (kineto's ``Seq``), None when not recorded
    dtype: str  # "Float", "float", "BFloat16", "" when not recorded
    in_nelems: Optional[int]
    out_nelems: Optional[int]
    on_gpu: bool  # times are the GPU kernels'
    timed: bool  # arrival and end are the collective's (False: a NCCL call whose kernel is not in the capture)
    device: Optional[int]
    call_us: Optional[float]  # when the host called it (None: a kernel without its launch in the trace)
    arrival_us: float
    end_us: float
    comm_us: float  # the work: kernel time (their union), gloo's work, or the call's wall
    step: str  # the step holding the call ("ProfilerStep#2"), "" outside every step
    site: str  # where it was called: the user's line (with_stack), else the label or top-level op around it
    before_op: str = ""  # what this rank did before it arrived: the top-level op with most time since its last
    before_us: float = 0.0  # ... collective (or its step's start) on its thread, and that op's time there
    before_line: str = ""  # ... and the user's line around that op (with_stack)
    exposed_us: float = 0.0  # of comm_us, not overlapped by compute (``exposed``)
    backend_thread: int = -1  # gloo: the backend's thread that ran the work (each group has its own); -1: none


@dataclass
class RankTables:
    """Every kernel, CPU op and launch of a trace (``top_*`` are their first rows): what ``--diff`` compares.

    Left out of the summary's ``--json`` (it can be long); the diff's JSON reports the comparison."""

    kernels: list[KernelStat]  # all kernels, most time first
    cpu_ops: list[CpuOpStat]  # all CPU ops, most self time first
    launches: list[Launch]  # most time first
    series: Optional[StepSeries] = None
    frames: Optional[FrameTree] = None  # with_stack traces only
    collectives: list[CollectiveCall] = field(default_factory=list)  # in the order the host called them
    process_groups: dict[str, list[int]] = field(default_factory=dict)  # the rank's groups (pg_config): desc -> ranks


@dataclass
class MemoryOp:
    """A CPU op by the memory it allocated (``[memory]`` events with positive ``Bytes``) on one device.

    An allocation belongs to the innermost ``cpu_op`` enclosing it on the same thread ("self"); ``total_bytes``
    also counts what the op's children allocated (an op name nested in itself counts once).
    """

    name: str
    allocations: int  # allocations made directly in the op
    self_bytes: int
    total_bytes: int  # with children
    live_at_peak_bytes: int  # of its self allocations, still not freed at the device's peak


@dataclass
class StepMemory:
    """Allocated memory around one ``ProfilerStep#N`` (its CPU-side span: allocations are made by the CPU)."""

    name: str
    number: Optional[int]
    start_us: float
    end_us: float
    allocated_start_bytes: int  # allocated just before the step's first memory event (at its start)
    allocated_end_bytes: int  # after its last memory event
    growth_bytes: int  # end - start: memory the step did not give back
    peak_allocated_bytes: int
    peak_reserved_bytes: Optional[int]
    grew: bool  # growth_bytes >= the leak threshold (memory.leak_threshold)


@dataclass
class MemoryCurve:
    """Allocated and reserved over time, downsampled (<= memory.CURVE_POINTS points, the peak always kept)."""

    ts_us: list[float]  # trace timestamps
    allocated_bytes: list[int]
    reserved_bytes: list[Optional[int]]
    peak_index: int  # index of the peak-allocated point in these lists


@dataclass
class DeviceMemory:
    """The memory answers for one device of one trace (``Device Type``/``Device Id`` of the events)."""

    device: str  # "cuda:0", "cpu"
    device_type: int  # the trace's "Device Type": 0 CPU, 1 CUDA
    device_id: Optional[int]  # None for the CPU (the trace writes -1)
    events: int  # [memory] events of this device
    allocations: int
    allocated_bytes: int  # summed over all allocations
    peak_allocated_bytes: int
    peak_allocated_at_us: float  # trace timestamp of the peak
    peak_step: Optional[str]  # the step holding the peak, None when it is outside every step
    peak_reserved_bytes: Optional[int]  # None when the trace records no reserved totals (CPU)
    leak_threshold_bytes: int  # a step grows "too much" at or above this (memory.leak_threshold)
    leak: bool  # at least LEAK_MIN_STEPS steps grew by the threshold or more
    steps: list[StepMemory]
    top_ops: list[MemoryOp]  # by self bytes, then with children
    unattributed_bytes: int  # allocated outside any cpu_op (e.g. by the allocator on another thread)
    out_of_memory_events: int  # [OutOfMemory] events on this device
    curve: MemoryCurve


@dataclass
class SnapshotSite:
    """Bytes live at a snapshot's peak, grouped by the innermost frame in the user's code that allocated them."""

    location: str  # "model.py:120" (the file's path as recorded, cut to its last two parts)
    function: str
    filename: str  # the frame's full file name
    line: int
    bytes: int
    blocks: int


@dataclass
class SnapshotSummary:
    """What one ``rank<R>_<host>.memory_snapshot.pickle`` (torch.cuda.memory._snapshot) says about the peak."""

    file: str
    device: Optional[int]
    source: str  # "device_traces" (the peak replayed from the allocator's history) or "segments" (now, no history)
    peak_bytes: int
    peak_at_us: Optional[float]  # the history's time of the peak (its own clock), None from segments
    reserved_bytes: int  # summed segment sizes when the snapshot was taken
    sites: list[SnapshotSite]  # largest first
    other_bytes: int  # live at the peak, with no frame in the user's code (or no frames recorded)


@dataclass
class MemorySummary:
    """The memory section of a trace; RankSummary.memory is None when the trace has no memory events or snapshot."""

    devices: list[DeviceMemory]
    snapshots: list[SnapshotSummary] = field(default_factory=list)


@dataclass
class PeakSpec:
    """What the device can do (``peaks``): dense TFLOP/s per dtype and memory bandwidth, with the figures' source."""

    device: str  # the trace's device name ("NVIDIA H200"), "" when it records none
    gpu: str  # the peak table's row ("H200 SXM"), or "--peak" for an override
    tflops: dict[str, float]  # dense peak by dtype: "fp8", "bf16" (= fp16), "tf32", "fp32" (the CUDA cores)
    tbps: float  # memory bandwidth, TB/s
    source: str


@dataclass
class OpEfficiency:
    """One op and shape (its calls inside the steps, with the GPU work each launched) against the roofline."""

    op: str  # "aten::addmm" (or op class in ``ClassEfficiency.op_class``)
    op_class: str  # GEMM, attention, convolution, normalization, softmax, activation, elementwise, copy
    shapes: str  # "[9216] x [4096, 3072] x [3072, 9216] bf16": its tensor inputs and their dtype
    dtype: str  # the peak's dtype key
    calls: int
    kernels: list[str]  # short names of the GPU work it launched, most time first (CPU trace: empty)
    time_us: float  # their summed GPU time (CPU trace: the op's own time)
    flops: Optional[float]  # None: no shapes (or shapes the model does not fit)
    bytes: Optional[float]
    tflops_per_s: Optional[float]
    tb_per_s: Optional[float]
    intensity: Optional[float]  # FLOPs per byte
    bound: str  # "compute" or "memory" (intensity vs the ridge point peak / bandwidth); "" without a peak
    roofline_pct: Optional[float]  # achieved / the roof at its intensity (= ideal time / time); None without peak
    headroom_us: Optional[float]  # per step: time it would save at the target share of its roofline


@dataclass
class ClassEfficiency:
    op_class: str
    dtype: str  # the dtype of most of its time (whose peak its roofline mostly is), "" without shapes
    calls: int
    time_us: float
    flops: Optional[float]  # of its ops with a figure (None: none has one)
    bytes: Optional[float]
    tflops_per_s: Optional[float]
    tb_per_s: Optional[float]
    intensity: Optional[float]
    bound: str
    roofline_pct: Optional[float]  # the class's ideal time (sum over its ops) / its time
    headroom_us: Optional[float]  # per step, the sum over its ops


@dataclass
class Efficiency:
    """How far from the hardware limit (``efficiency``): per op class and op, the step's MFU, the headroom."""

    shapes_recorded: bool  # the trace has Input Dims (record_shapes=True)
    hint: str  # how to get what is missing ("" when nothing is)
    peak: Optional[PeakSpec]  # None: unknown device and no --peak (FLOPs and rates still given)
    target_pct: float  # the share of the roofline headroom is counted against (default 80)
    steps: int
    step_wall_us: float  # summed over the steps
    gpu: bool  # times are GPU time (False: a CPU trace, the ops' own time)
    modeled_us: float  # time of the ops with a model (inside the steps)
    unmodeled_us: float  # GPU time (CPU: op time) of the rest: no model, no shapes, or launched outside any op
    matrix_flops: float  # GEMM, convolution and attention FLOPs inside the steps
    step_tflops_per_s: Optional[float]  # matrix_flops / step_wall_us
    mfu_pct: Optional[float]  # the time the matrix FLOPs need at their dtype's peak / the steps' wall time
    headline: str  # "GEMM: 15.383 ms at 73% of its roofline; at 80%, -1.32 ms per step"
    classes: list[ClassEfficiency]  # most headroom first
    ops: list[OpEfficiency]  # most headroom first (the --top first ones)
    torch_flops_checked: int = 0  # ops with torch's own ``flops`` argument (with_flops=True), used instead
    torch_flops_disagree: int = 0  # ... of which the model differs by more than 1%


@dataclass
class FrameStat:
    """One frame (by its name, wherever it was called from), per step: inclusive and self (``frames``)."""

    frame: str  # as the trace writes it: "gpu_anchor.py(21): forward", "nn.Module: Linear_0"
    kind: str  # "user", "module" or (``--frames-all``) "library"
    location: str  # "gpu_anchor.py:21" (the file cut to its last two parts; "" for a module)
    function: str  # "forward", or the module's name "Linear_0"
    line: str  # what ``location``'s line is: "def" (the function's def line: entered during the capture),
    # "running" (on the stack when the capture began: the line it was running, its call of the frame below), ""
    calls: int  # its frame events in the trace
    gpu_us: float  # inclusive: GPU work launched inside it (kernels, memcpy, memset)
    gpu_self_us: float  # launched with it as the innermost kept frame
    kernel_us: float  # inclusive, kernels only
    cpu_us: float  # inclusive: CPU ops' self time inside it
    cpu_self_us: float
    alloc_bytes: float  # inclusive: allocated inside it (profile_memory)
    alloc_self_bytes: float
    gpu_pct: Optional[float]  # of all GPU work in the steps (None: no GPU work)
    cpu_pct: Optional[float]  # of all CPU op self time in the steps
    top_op: str  # the top-level op with the most GPU time under it (CPU time on a CPU trace), "" when none


@dataclass
class ModuleStat:
    """The nn.Module frames of one class ("Linear" for "nn.Module: Linear_0" ... "Linear_47"), per step."""

    module_class: str
    instances: int  # distinct module names
    calls: int
    gpu_us: float
    kernel_us: float
    cpu_us: float
    alloc_bytes: float
    gpu_pct: Optional[float]
    cpu_pct: Optional[float]


@dataclass
class Frames:
    """Where in your code (``frames``): work by the Python frames around it; None without python_function events.

    Values are per step (means over the steps), over the work inside the steps.
    """

    frame_events: int  # the Python frame events kept: your code's and nn.Module's (every one with --all-frames)
    folded: bool  # True: torch, stdlib, site-packages and built-in frames folded into their caller
    steps: int
    gpu: bool  # the trace has GPU work
    gpu_us: float  # all GPU work launched in the steps, per step
    cpu_us: float  # all CPU ops' self time in the steps, per step
    alloc_bytes: float  # allocated in the steps on memory_device, per step
    memory_device: str  # "cuda", "cpu", or "" without allocations
    unattributed_gpu_us: float  # with no frame around its launch
    unattributed_cpu_us: float
    frames: list[FrameStat]  # user frames, most self GPU time first, then self CPU op time: the --top first
    modules: list[ModuleStat]  # by class, most GPU time first (then CPU time)


@dataclass
class CommStep:
    """One step of one rank: its communication against its compute (``exposed``; µs inside the step's window)."""

    step: str
    wall_us: float
    comm_us: float  # union of the communication (NCCL kernels; CPU: the collectives' walls on the caller)
    exposed_us: float  # of it, not overlapped by compute
    overlap_pct: Optional[float]  # (comm - exposed) / comm; None without communication
    compute_us: float  # union of the compute (compute kernels; CPU: the top-level ops other than collectives)
    idle_us: float  # neither: wall - union of all GPU activity (CPU: of compute and communication)
    calls: int  # collectives called in the step


@dataclass
class RankComm:
    """A rank's communication (``exposed``): the whole trace (HTA's figures) and per step."""

    on_gpu: bool  # measured on the GPU's kernels (HTA's definition); False: on the host calls (CPU-only trace)
    calls: int  # collectives called
    kinds: dict[str, int]  # calls by collective ("all_to_all": 6)
    comm_us: float  # the whole trace
    exposed_us: float
    overlap_pct: Optional[float]
    steps: list[CommStep]


@dataclass
class RankSummary:
    """Everything reported about one trace file (one rank / worker)."""

    file: str
    size_bytes: int
    compressed: bool
    worker: str
    rank: Optional[int]
    world_size: Optional[int]
    devices: list[Device]
    versions: dict[str, str]
    event_count: int
    trace_span_us: float
    steps: list[StepStats]
    gpu: Optional[GpuTotals]
    idle: Optional[IdleStats]  # all steps together
    top_kernels: list[KernelStat]
    top_cpu_ops: list[CpuOpStat]
    cpu_self_total_us: float
    memory_ops: list[MemOpStat]
    gpu_comm_us: Optional[float]  # time in communication kernels (NCCL/RCCL) inside steps
    trace_start_us: Optional[float] = None  # trace timestamp where the span starts (None: no timed events)
    notes: list[str] = field(default_factory=list)
    skipped_events: list[SkippedEvents] = field(default_factory=list)  # malformed events left out, by field
    tables: Optional[RankTables] = field(default=None, repr=False)  # everything, for --diff; not in --json
    memory: Optional[MemorySummary] = None  # profile_memory events and/or a memory snapshot; None without either
    launch_links: Optional[LaunchLinks] = None  # None without GPU activity
    efficiency: Optional[Efficiency] = None  # None: no timed ops to measure
    frames: Optional[Frames] = None  # None: no Python frames in the trace (with_stack=False)
    communication: Optional[RankComm] = None  # None: no collectives and no communication kernels
    gpu_clock: Optional[GpuClockCheck] = None  # None without GPU activity


@dataclass
class ClockOffset:
    """How far one rank's clock is from the first rank's (``clocks``): from the ends of the collectives both
    took part in, which every rank leaves together."""

    rank: Optional[int]
    worker: str
    offset_us: float  # this rank's timestamps minus the first rank's for the same moment (median over collectives)
    spread_us: float  # the largest distance of one collective's end difference from the offset
    collectives: int  # how many ends it is estimated from (0: none shared; offset 0 assumed)
    applied: bool = False  # beyond its spread: the rank's times are corrected by it (``clocks``)


@dataclass
class RankStepWaits:
    """One rank in one step, with the run's matched collectives (``comm_waits``)."""

    rank: Optional[int]
    worker: str
    comm_us: float  # its communication in the step (``exposed``)
    exposed_us: float
    exposed_pct: Optional[float]  # of its step's wall time
    waited_us: float  # its time in collectives before the last peer arrived
    transfer_us: float  # its time in collectives after that
    caused_us: float  # the others' waits at the collectives it arrived at last


@dataclass
class StepWaits:
    """One step of the run: who waited for whom, and for what."""

    step: str
    ranks: list[RankStepWaits]
    late_rank: Optional[int]  # the rank the others waited for (None: nobody waited long, see comm_waits.LATE_*)
    late_worker: str
    late_wait_us: float  # the others' mean wait for it in this step
    collective: str  # where they waited the longest: the collective's kind ...
    site: str  # ... and its call site
    collective_wait_us: float  # ... and their mean wait there
    doing: str  # what the late rank did before it arrived: its top-level op ...
    doing_us: float  # ... and that op's time since its previous collective
    doing_line: str  # ... the user's line around it (with_stack)


@dataclass
class WaitPair:
    """One rank's waiting for another, over the run's steps."""

    waiter: Optional[int]
    waiter_worker: str
    late: Optional[int]
    late_worker: str
    wait_us: float  # per step (mean over the run's steps)
    steps: int  # steps in which it waited for it at all


@dataclass
class CollectiveStat:
    """The collectives of one kind, group and call site, per step and rank (means): exposed, wait, transfer,
    and their bandwidth (``bandwidth``)."""

    kind: str
    group: str
    site: str
    instances: int  # matched across the ranks (calls on a single rank: its calls)
    exposed_us: float  # per step, mean over the ranks
    wait_us: Optional[float]  # None: none of them has every rank's call (waits not known)
    transfer_us: Optional[float]
    bytes: Optional[int]  # the message size nccl-tests calls S (None: the trace records no size)
    algbw_gbps: Optional[float]  # S / transfer time, GB/s
    busbw_gbps: Optional[float]  # algbw x nccl-tests' factor for the kind and group size
    link: str  # the link's row in bandwidth.LINKS ("" when the device has none: a CPU, an unknown GPU)
    link_gbps: Optional[float]  # its peak, one direction, GB/s
    link_pct: Optional[float]  # busbw / peak
    could_win_us: Optional[float]  # per step: transfer time saved at the target share of the peak


@dataclass
class RunComm:
    """The run's communication across its ranks (``comm``, ``clocks``, ``comm_waits``, ``bandwidth``)."""

    ranks: int  # ranks whose collectives were matched
    on_gpu: bool
    collectives: int  # matched instances
    complete: int  # of which every rank's call is there (their waits are known)
    clocks: list[ClockOffset]
    steps: list[StepWaits]
    pairs: list[WaitPair]  # most waiting first
    top: list[CollectiveStat]  # most exposed time first
    notes: list[str]  # one line per problem (missing ranks, another run's files, unmatched calls, clocks)


@dataclass
class RankRow:
    rank: Optional[int]
    worker: str
    steps: int
    step_wall_us: float  # mean over the file's steps
    gpu_busy_us: Optional[float]  # mean per step
    gpu_busy_pct: Optional[float]
    gpu_comm_us: Optional[float]  # mean per step


@dataclass
class Straggler:
    rank: Optional[int]
    worker: str
    # "waits_caused" (the rank the others waited for in collectives, ``comm_waits``), else "step_wall", or
    # "gpu_compute" (busy minus communication, when step times are in lock-step)
    criterion: str
    step_wall_us: float
    slower_than_fastest_pct: float  # by the criterion's measure
    spread_pct: float  # (slowest - fastest) / fastest step wall time
    waits_caused_us: Optional[float] = None  # "waits_caused": the others' mean wait for it per step


@dataclass
class RunSummary:
    label: str
    path: str
    ranks: list[RankSummary]  # with ``spans``: oldest first
    comparison: Optional[list[RankRow]]  # only with several ranks
    straggler: Optional[Straggler]  # None for spans
    skipped_files: list[SkippedFile] = field(default_factory=list)  # files of a folder argument that are no traces
    damaged_files: list[DamagedFile] = field(default_factory=list)  # rank files that could not be read
    spans: bool = False  # True: the files are spans (captures at different times, no rank), not ranks (``ranks``)
    communication: Optional[RunComm] = None  # several ranks with collectives


def to_json(runs: list[RunSummary]) -> dict[str, Any]:
    """The ``--json`` document: {"schema": SCHEMA, "runs": [...]} with the dataclasses' fields."""
    return {"schema": SCHEMA, "runs": [_rounded(_asdict(run)) for run in runs]}


def _asdict(run: RunSummary) -> dict[str, Any]:
    """The run's fields without the ranks' ``tables`` (the diff's input, not part of the summary schema)."""
    bare = dataclasses.replace(run, ranks=[dataclasses.replace(r, tables=None) for r in run.ranks])
    out = dataclasses.asdict(bare)
    for rank in out["ranks"]:
        del rank["tables"]
    return out


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value
