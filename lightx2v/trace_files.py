"""One rule for "this file is a trace", shared by the summary, the trace browser and the profiler notice.

A file is a trace when its name is not hidden (writers' temp names, ``.trace_browser.json``) and

- its name is one TensorBoard's PyTorch Profiler plugin loads (``*.pt.trace.json[.gz]``, the drop-in's
  ``TENSORBOARD_TRACE_RE``): the profiler's naming contract. Such a file is a trace by its name alone, so a
  damaged one (cut off while being written) is reported as damaged by its readers, not skipped; or
- it is ``*.json`` / ``*.json.gz`` whose first bytes show a trace: a ``"traceEvents"`` key, or an array of event
  objects (Chrome's JSON array format). By content, because the same folder holds JSON that is no trace: the
  demo writes its run metadata as ``save_results/qwen_image_t2i.json``. Gzip is recognized by its magic bytes,
  as the summary's reader does, and a head that is cut off still counts. Such a trace is torch.profiler's
  (kind CHROME) when its head shows kineto: its header keys (``schemaVersion``, ``deviceProperties``,
  ``distributedInfo``: kineto writes them first, 2021-2026) or an event of its categories; else it is another
  tool's Chrome trace (FOREIGN: Chrome DevTools, a browser's, ...), which the Timeline and Perfetto open but the
  summary does not read and no run counts; or
- it is Perfetto's own binary format (``*.pftrace``, ``*.perfetto-trace``): a trace, but not JSON, so only
  Perfetto opens it (the summary and the offline views read JSON).

    classify("save_results/qwen_image_t2i.json")   # Verdict(kind=None, reason='JSON without traceEvents ...')
    classify("run/rank0_host.pt.trace.json.gz")     # Verdict(kind='tensorboard', reason='')
"""

from __future__ import annotations

import functools
import os
import re
import stat
import zlib
from dataclasses import dataclass

from lightx2v.utils.torch_trace_profiler import TENSORBOARD_TRACE_RE

TENSORBOARD = "tensorboard"  # named as the plugin loads it
CHROME = "chrome"  # other JSON trace of torch.profiler's, recognized by content
FOREIGN = "foreign"  # a JSON trace another tool wrote (no kineto in its head): viewable, not summarized
PERFETTO = "perfetto"  # Perfetto's binary formats
JSON_KINDS = frozenset({TENSORBOARD, CHROME})  # what the summary reads and a run is made of
FOREIGN_REASON = ("not written by torch.profiler (no kineto header or events near its start: a Chrome trace of "
                  "another tool?); the Timeline and Perfetto open it, the summary reads torch.profiler's traces")

JSON_SUFFIXES = (".json", ".json.gz")
PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace")
TRACE_SUFFIXES = JSON_SUFFIXES + PERFETTO_SUFFIXES
SNIFF_BYTES = 64 * 1024  # kineto writes traceEvents after a short header (schema, devices, distributed info)

_GZIP_MAGIC = b"\x1f\x8b"
_EVENT_ARRAY = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*\[\s*[{\]]")
_KINETO = re.compile(rb'"(?:schemaVersion|deviceProperties|distributedInfo)"\s*:|"cat"\s*:\s*"(?:cpu_op|operator|'
                     rb'Operator|user_annotation|gpu_user_annotation|python_function|kernel|Kernel|cuda_runtime|'
                     rb'cuda_driver|Runtime|gpu_memcpy|Memcpy|gpu_memset|Memset|cpu_instant_event)"')


@dataclass(frozen=True)
class Verdict:
    kind: str | None  # TENSORBOARD, CHROME, PERFETTO, or None: not a trace
    reason: str  # why it is not a trace ("" when it is one)


def is_tensorboard_name(name: str) -> bool:
    """Whether TensorBoard's plugin loads a file of this name (hidden names excluded)."""
    return not name.startswith(".") and TENSORBOARD_TRACE_RE.match(name) is not None


def classify(path: str, name: str | None = None) -> Verdict:
    """Whether the file at ``path`` is a trace, and of which kind; its content is read (cached) only when the name
    alone cannot tell. ``name``: the name it is listed or asked for under, when ``path`` is a link's target."""
    name = os.path.basename(path) if name is None else name
    if name.startswith("."):
        return Verdict(None, "a hidden file")
    if is_tensorboard_name(name):
        return Verdict(TENSORBOARD, "")
    if name.endswith(PERFETTO_SUFFIXES):
        return Verdict(PERFETTO, "")
    if not name.endswith(JSON_SUFFIXES):
        return Verdict(None, "not a .json or .json.gz file")
    try:
        st = os.stat(path)
    except OSError as exc:
        return Verdict(None, f"cannot read ({exc.strerror or exc})")
    if not stat.S_ISREG(st.st_mode):
        return Verdict(None, "not a regular file")  # a FIFO would block the read
    return _sniff(os.path.realpath(path), st.st_size, st.st_mtime_ns)


def is_trace(path: str) -> bool:
    return classify(path).kind is not None


def run_members(traces: list[tuple[str, str]]) -> list[str]:
    """Which JSON traces of one folder, ``(path, kind)`` pairs, are the ranks of its run: the TensorBoard-named
    ones when there are any (a chrome trace beside them is another capture), else the chrome traces."""
    tensorboard = [path for path, kind in traces if kind == TENSORBOARD]
    return tensorboard or [path for path, kind in traces if kind == CHROME]


def is_json_trace_name(name: str) -> bool:
    """Whether a trace of this name is JSON (the summary and the offline views read it), not Perfetto's binary."""
    return name.endswith(JSON_SUFFIXES)


@functools.lru_cache(maxsize=4096)
def _sniff(real: str, size: int, mtime_ns: int) -> Verdict:  # size and mtime: a rewritten file is sniffed again
    try:
        with open(real, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError as exc:
        return Verdict(None, f"cannot read ({exc.strerror or exc})")
    if head.startswith(_GZIP_MAGIC):
        try:  # what the first bytes decompress to; a stream cut off later does not matter here
            head = _gunzip_head(head)
        except zlib.error:
            return Verdict(None, "corrupt gzip data")
    is_object = head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{")
    if _EVENT_ARRAY.match(head) or is_object and b'"traceEvents"' in head:
        return Verdict(CHROME, "") if _KINETO.search(head) else Verdict(FOREIGN, "")
    return Verdict(None, "JSON without traceEvents near its start" if is_object else "not JSON")


def _gunzip_head(data: bytes) -> bytes:
    """The first SNIFF_BYTES that gzip ``data`` decompresses to, across members (``cat a.gz b.gz``: a writer that
    appends may start a member every few bytes), as ``gzip`` reads them."""
    out = b""
    while data and len(out) < SNIFF_BYTES:
        inflater = zlib.decompressobj(wbits=31)
        out += inflater.decompress(data, SNIFF_BYTES - len(out))
        if not inflater.eof:
            break
        data = inflater.unused_data.lstrip(b"\0")  # zero padding between members, skipped as gzip does
    return out
