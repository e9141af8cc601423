"""Stream the events of a Chrome / kineto trace file one at a time, plain or gzip, without loading the document.

    stream = TraceStream("rank0_host.pt.trace.json.gz")
    for event in stream:          # dicts, in file order
        ...
    stream.metadata               # every top-level key except traceEvents (deviceProperties, distributedInfo, ...)
    stream.batch_start            # with batches(): where the batch just yielded starts in the decompressed bytes

Why a hand-written reader (figures measured on a 2-core dev box, 545 MB kineto-style trace, 1.95 M events):
``json.load`` of the whole file builds every event at once (several times the file size in RAM; the TensorBoard
plugin measured ≈8×). ``ijson`` with its C backend (yajl2_c) streams in 15 MB of RAM but decodes at 22 MB/s; the
stdlib scanner event by event reaches 28 MB/s. Kineto writes ``traceEvents`` as a flat array of small objects,
so this reader cuts the byte stream at ``}, {`` boundaries (a C regex) and decodes each piece with ``orjson``
(≈100 MB/s for cutting and decoding together). A cut that falls inside a string or a nested value cannot decode,
so such an event, and any event orjson rejects (NaN, huge ints), is decoded again exactly by the stdlib parser at
that position: the fast path never changes a result, it only skips work (one difference: orjson returns
integers beyond 64 bits as floats; no field the summary reads holds such numbers). Without orjson installed the
same pieces go through ``json.loads`` (slower, same results).

Typed (``typed=True``, the summary's and the Timeline index's pass): the same cut, but each buffer's complete events
(up to its last ``}, {``) are decoded in ONE call into :mod:`records`' typed structs, only the fields the analyses
read (msgspec skips the other keys without building them): 2-3x the dict path's decoding speed (figures in
docs/trace_summary.md). An event the typed decoder rejects (a string where a number goes, a null, a float beyond a
double) is decoded generically, that event only: the batch holds its dict at the indexes ``generic`` lists, and the
pass hands it to the dict path's rules. A piece that does not decode as a whole (a cut inside a string, NaN, bytes
that are no UTF-8) is read event by event as in the dict path, each event typed where it decodes. A typed event a
rule rejects is decoded again, generically, from its bytes (``generic_of``), so the one-line reasons are the dict
path's. ``skip_head`` is a dict-path feature (cutting event by event costs more than the typed decode saves).

Gzip: inflated by ISA-L's ``igzip`` (``isal``, the ``fast`` extra) where it is installed, ~3x zlib's speed, else
by zlib (``GZIP_LIBRARY``); where isal fails, zlib reads the file again past the bytes already read, so a damaged
file is said in zlib's words either way.

Part of a file (``part=Part(start, end, before, after)``: the JSON bytes ``start..end`` read as if ``before``
came first and ``after`` last; ``halves`` reads a large trace's two halves side by side so; a gzip file's part
starts after its first ``start`` bytes are inflated and dropped): byte offsets (``batch_start``,
``events_end``, those in errors) stay the JSON's own.

Errors: a missing or unreadable file, a gzip or JSON stream that ends early, JSON that is not a trace, all raise
:class:`TraceError` with a one-line reason.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import IO, Any

import msgspec

from .errors import TraceError
from .records import COMM_EVENT, EVENT, EVENTS, Comm, Event


def _stdlib_loads(data: memoryview) -> Any:
    return json.loads(bytes(data))


_fast_loads: Callable[[memoryview], Any]
try:  # optional speed-up (pyproject main dependency); results are identical without it
    import orjson

    _fast_loads = orjson.loads
    FAST_DECODER = "orjson"
except ImportError:
    _fast_loads = _stdlib_loads
    FAST_DECODER = "json"

_isal_gzip: Any
try:  # optional (the `fast` extra): ISA-L's inflate, ~3x zlib's on kineto JSON, the same bytes
    from isal import igzip as _isal_gzip

    GZIP_LIBRARY = "isal"
except ImportError:
    _isal_gzip = None
    GZIP_LIBRARY = "zlib"

CHUNK_BYTES = 1 << 20  # a chunk's events are decoded at once: 4 MB held ~30 MB of dicts, 1 MB reads as fast
_EVENT_SEP = re.compile(rb"\}\s*,\s*\{")
_WS = re.compile(rb"[ \t\r\n]*")
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_STDLIB = json.JSONDecoder()
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])  # a piece's events as their bytes: typed events a rule rejects
_COMMA, _CLOSE = 44, 125  # ',' and '}'
_WS_BYTES = frozenset(b" \t\r\n")
TYPED = True  # the summary's and the index's pass decode typed records; tests set False to compare with dicts


def generic_value(data: bytes | memoryview | msgspec.Raw) -> Any:
    """One complete JSON value decoded as the dict path does (orjson, else the stdlib parser exactly)."""
    try:
        return _fast_loads(memoryview(data))  # orjson reads no msgspec.Raw itself
    except (ValueError, RecursionError):  # NaN, integers beyond 64 bits: the stdlib reads them
        return _STDLIB.decode(bytes(data).decode("utf-8", "surrogateescape"))


def _typed_event(data: memoryview) -> Any:
    """One event cut from the buffer: typed, else generically (ValueError when neither decodes it: exactly)."""
    try:
        return EVENT.decode(data)
    except msgspec.ValidationError:
        return _fast_loads(data)


def inflating(raw: IO[bytes], compressed: bool) -> Any:
    """The JSON bytes of an open file: the file itself, or its gzip reader (isal's where installed)."""
    if not compressed:
        return raw
    if GZIP_LIBRARY == "isal":
        return _isal_gzip.IGzipFile(fileobj=raw, mode="rb")
    return gzip.GzipFile(fileobj=raw, mode="rb")


def last_cut(buf: bytes, start: int) -> tuple[int, int] | None:
    """(just past the '}', the '{') of the last ``}, {`` in ``buf`` after ``start``; None when there is none.

    Found from the end with C-level ``rfind``, a few bytes checked around each '{' (kineto's events hold few)."""
    hi = len(buf)
    while True:
        p = buf.rfind(b"{", start + 1, hi)
        if p < 0:
            return None
        q = p - 1
        while q > start and buf[q] in _WS_BYTES:
            q -= 1
        if buf[q] == _COMMA:
            q -= 1
            while q > start and buf[q] in _WS_BYTES:
                q -= 1
            if buf[q] == _CLOSE:
                return q + 1, p
        hi = p


@dataclass(frozen=True)
class Part:
    """A file's JSON bytes ``start`` to ``end`` (None: its end; offsets in the decompressed stream of a gzip
    file), read with ``before`` ahead and ``after`` behind them: the bytes that make that part a trace of its own
    (``halves``)."""

    start: int
    end: int | None
    before: bytes = b""
    after: bytes = b""


class _PartReader:
    """``Part`` as a stream: ``read(n)`` returns ``before``, the JSON bytes ``start..end``, then ``after``.

    ``inner`` is the file (seeked to ``start``) or its gzip reader (``start`` bytes read and dropped first, on the
    first read, so that an error there is met where the reader handles one); ``position``: the bytes taken from
    ``inner`` so far, where a zlib reader that replaces a failed isal one goes on; ``counted_from``: the file's
    position once the skipped bytes are behind (progress counts from there)."""

    def __init__(self, inner: Any, raw: IO[bytes], part: Part, compressed: bool) -> None:
        self.inner, self._raw = inner, raw
        self._skip = part.start if compressed else 0
        if not compressed:
            raw.seek(part.start)
        self.position = 0 if compressed else part.start
        self.counted_from = raw.tell()
        self._end = part.end
        self._before, self._after = part.before, part.after

    def read(self, n: int) -> bytes:
        while self._skip:
            dropped = len(self.inner.read(min(self._skip, CHUNK_BYTES)))
            if not dropped:
                self._skip = 0  # the stream ends before the part starts: it is empty
                self._end = self.position
            self._skip = max(0, self._skip - dropped)
            self.position += dropped
            self.counted_from = self._raw.tell()
        if self._before:
            data, self._before = self._before, b""
            return data
        if self._end is None or self.position < self._end:
            data = self.inner.read(n if self._end is None else min(n, self._end - self.position))
            self.position += len(data)
            if data:
                return data
            self._end = self.position  # the file is shorter than the part: it ends here, as the whole file would
        data, self._after = self._after, b""
        return data

    def close(self) -> None:
        self.inner.close()


def _skip_ws(buf: bytes, pos: int) -> int:
    """The position of the first non-whitespace byte at or after ``pos``."""
    match = _WS.match(buf, pos)
    return match.end() if match else pos  # the pattern matches the empty string: always a match


class TraceStream:
    """Iterate once over a trace file's events; ``metadata`` is complete after the iteration ends."""

    def __init__(self, path: str, chunk_bytes: int = CHUNK_BYTES, skip_head: bytes | None = None,
                 on_read: Callable[[int], object] | None = None,
                 on_skipped: Callable[[memoryview], object] | None = None, typed: bool = False,
                 part: Part | None = None):
        """``on_read(n)``: called as the file is consumed, with the bytes read from disk since the last call
        (compressed bytes for gzip), so a progress bar can count against the file's size.

        ``on_skipped(piece)``: called before a batch that skipped events is yielded, with the bytes of that batch
        (its events, decoded and skipped, as they lie in the file), for a caller that needs a figure of the
        skipped ones (the Timeline's index: the times its Python frames cover). A batch that skipped events is
        yielded even when it decoded none.

        ``skip_head``: a regex (bytes) for the start of events to drop undecoded, matched right after their '{'.

        Such an event is dropped only if it also ends outside any string: no backslash and an even number of
        quotes, so the cut is not inside a string and is the event's end (kineto events hold no arrays of
        objects; if one did, the next piece would fail to decode and raise, never pass silently). Anything
        unusual is decoded normally.

        ``typed``: batches of :class:`records.Event` (see the module's docstring); ``skip_head`` and
        ``on_skipped`` are then not used.

        ``part``: only that part of the file's JSON (see the module's docstring).
        """
        self.path = str(path)
        self.chunk_bytes = chunk_bytes
        self.skipped = 0  # events matched by ``skip_head`` and not decoded
        if skip_head is None or typed:
            self._sep, self._head = _EVENT_SEP, None
        else:  # one regex finds the cut and tells whether the next event may be skipped (group 1 set)
            self._sep = re.compile(_EVENT_SEP.pattern + rb"(?:(?=(" + skip_head + rb")))?")
            self._head = re.compile(rb"\{(?=" + skip_head + rb")")
        self.metadata: dict[str, Any] = {}
        self.compressed = False
        self.bytes_read = 0  # decompressed JSON bytes consumed so far
        self._file: Any  # set by _open: the decompressed stream (the file, a gzip reader, a part of either)
        self._raw: IO[bytes]  # the file on disk, under the gzip reader if any
        self._raw_pos = 0
        self._on_read = on_read
        self._on_skipped = on_skipped
        self._part = part
        self._part_reader: _PartReader | None = None
        self._buf = b""
        self._pos = 0
        self._base = 0  # absolute offset of _buf[0] in the decompressed stream
        self._eof = False
        # Where the events lie in the decompressed stream (the file itself, when plain): ``batch_start`` is the
        # offset of the batch just yielded; its bytes run to the next batch's start, the last one's to
        # ``events_end`` (the array's ']'), events skipped undecoded in between included.
        self.batch_start = 0
        self.events_end = 0
        self.typed = typed
        # typed: the indexes of the batch just yielded that hold dicts (events decoded generically); its source
        # for ``generic_of``: the piece decoded in one call, or the bytes and the spans of its events
        self.generic: list[int] = []
        self._batch: list[Any] = []
        self._piece = b""
        self._spans: list[tuple[int, int]] | None = None
        self._raws: list[Any] | None = None
        self._index: dict[int, int] | None = None

    def __iter__(self) -> Iterator[Any]:
        for batch in self.batches():
            yield from batch

    def generic_of(self, record: Event) -> Any:
        """``record`` (an event of the typed batch just yielded) decoded generically from its bytes: what the dict
        path would have read, for the rule that rejected it to say why (off the hot path: the batch's events are
        located once, at the first call)."""
        return generic_value(self._bytes_of(record))

    def comm_of(self, record: Event) -> Comm | None:
        """The collective's metadata of ``record`` (one of the typed batch just yielded, whose ``args.collective``
        is set), read from its bytes; None when a value has another type than :class:`records.Comm` declares
        (``generic_of`` then reads it as the dict path does)."""
        try:
            return COMM_EVENT.decode(self._bytes_of(record)).args
        except msgspec.ValidationError:
            return None

    def _bytes_of(self, record: Event) -> Any:
        if self._index is None:
            self._index = {id(r): i for i, r in enumerate(self._batch)}
            if self._spans is None and self._raws is None:
                self._raws = _RAWS.decode(self._piece)
        i = self._index[id(record)]
        if self._raws is not None:
            return self._raws[i]
        start, end = self._spans[i]  # type: ignore[index]
        return memoryview(self._piece)[start:end]

    def batches(self) -> Generator[list[Any], None, None]:
        """The events in lists (one per buffer chunk): far fewer generator hops than one event at a time; dicts,
        or typed records (``typed``) with dicts at the indexes ``generic`` lists."""
        self._open()
        try:
            yield from self._document()
        finally:
            self._file.close()
            self._raw.close()  # a gzip reader leaves the file it reads open

    # -- reading ---------------------------------------------------------------------------------------
    def _open(self) -> None:
        try:
            raw = open(self.path, "rb")
        except FileNotFoundError:
            raise TraceError(self.path, "no such file") from None
        except OSError as exc:
            raise TraceError(self.path, f"cannot read ({exc.strerror or exc})") from None
        try:
            magic = raw.read(2)
            raw.seek(0)
        except OSError as exc:
            raw.close()
            raise TraceError(self.path, f"cannot read ({exc.strerror or exc})") from None
        self.compressed = magic == _GZIP_MAGIC  # by content, not by name: a misnamed file still reads
        self._raw = raw
        self._fast_gzip = self.compressed and GZIP_LIBRARY == "isal"
        self._file = inflating(raw, self.compressed)
        if self._part is not None:
            self._file = self._part_reader = _PartReader(self._file, raw, self._part, self.compressed)
            self._raw_pos = self._part_reader.counted_from
            self._base = self._part.start - len(self._part.before)  # offsets stay the file's

    def _read(self) -> bytes:
        if self._fast_gzip:
            try:
                return self._file.read(self.chunk_bytes)
            except Exception:  # whatever it is, zlib says it, as without isal
                self._gunzip_with_zlib()
        return self._read_zlib(self.chunk_bytes)

    def _gunzip_with_zlib(self) -> None:
        """Go on with zlib where isal failed: from the file's start, past the bytes already read (the same bytes),
        so a damaged file is said in zlib's words, and a stream only isal refuses is read."""
        self._fast_gzip = False
        part = self._part_reader
        (part.inner if part is not None else self._file).close()
        self._raw.seek(0)
        inflate = gzip.GzipFile(fileobj=self._raw, mode="rb")
        left = part.position if part is not None else self.bytes_read
        while left:
            skipped = len(self._read_zlib(min(left, self.chunk_bytes), inflate))
            if not skipped:
                break
            left -= skipped
        if part is not None:
            part.inner = inflate
        else:
            self._file = inflate

    def _read_zlib(self, n: int, inflate: Any = None) -> bytes:
        try:
            return (self._file if inflate is None else inflate).read(n)
        except EOFError:
            raise TraceError(self.path, "truncated gzip stream (the file was cut off while being written?)") from None
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise TraceError(self.path, f"corrupt gzip data ({exc})") from None
        except OSError as exc:
            raise TraceError(self.path, f"cannot read ({exc.strerror or exc})") from None

    def _fill(self) -> None:
        """Append the next chunk to the buffer, dropping what was already consumed."""
        data = self._read()
        if self._on_read is not None:
            if self._part_reader is not None:  # the bytes a part skips are not its to count
                self._raw_pos = max(self._raw_pos, self._part_reader.counted_from)
            position = self._raw.tell()
            if position > self._raw_pos:  # (after isal gave way to zlib, the file is read again from its start)
                self._on_read(position - self._raw_pos)
                self._raw_pos = position
        if not data:
            self._eof = True
            return
        self.bytes_read += len(data)
        self._base += self._pos
        with memoryview(self._buf) as rest:  # one copy of the unread rest and the chunk: no slice in between
            self._buf = b"".join((rest[self._pos:], data))
        self._pos = 0

    def _peek(self) -> bytes:
        """The next non-whitespace byte (not consumed), or b'' at the end of the stream."""
        while True:
            self._pos = _skip_ws(self._buf, self._pos)
            if self._pos < len(self._buf):
                return self._buf[self._pos:self._pos + 1]
            if self._eof:
                return b""
            self._fill()

    # -- structure -------------------------------------------------------------------------------------
    def _document(self) -> Iterator[list[Any]]:
        self._fill()
        while len(self._buf) < len(_UTF8_BOM) and not self._eof:  # a chunk shorter than the BOM holds part of it
            self._fill()
        if self._buf.startswith(_UTF8_BOM):
            self._pos = len(_UTF8_BOM)
        first = self._peek()
        if first == b"":
            raise TraceError(self.path, "empty file, not a trace")
        if first == b"[":  # Chrome's "JSON array format": the document is the event list itself
            self._pos += 1
            yield from self._event_batches()
            self._expect_end()
            return
        if first != b"{":
            raise TraceError(self.path, f"not a trace: not JSON (starts with {self._snippet()})")
        self._pos += 1
        found_events = False
        expect_comma = False
        while True:
            c = self._peek()
            if c == b"}":
                self._pos += 1
                break
            if expect_comma:
                if c != b",":
                    self._malformed("expected ',' or '}' between top-level keys")
                self._pos += 1
                c = self._peek()
            expect_comma = True
            if c != b'"':
                self._malformed("expected a top-level key")
            key = self._exact_value()
            if self._peek() != b":":
                self._malformed("expected ':' after a top-level key")
            self._pos += 1
            if key == "traceEvents" and self._peek() == b"[":
                self._pos += 1
                found_events = True
                yield from self._event_batches()
            else:
                self.metadata[key] = self._exact_value()
        self._expect_end()
        if not found_events:
            raise TraceError(self.path, "not a trace: a JSON object without a traceEvents list")

    def _event_batches(self) -> Iterator[list[Any]]:
        """The items of the traceEvents array; on entry the '[' is consumed, on exit the ']'."""
        c = self._peek()
        if c == b"]":
            self.events_end = self._base + self._pos
            self._pos += 1
            return
        if c != b"{":
            self._not_events(c)
        while True:
            piece = self._typed_piece() if self.typed else None
            if piece is not None:
                yield piece
                exact = False
            else:
                exact = yield from self._cut_events()
            if not exact and not self._eof:
                self._fill()  # the rest of this buffer is one incomplete event; append the next chunk
                if not self._eof:
                    continue
            # Decode one event exactly: after a failed cut, or the array's last event at the end of the stream
            # (at its '{', checked before: an object).
            self._peek()
            self.batch_start = self._base + self._pos
            event = self._exact_value()
            yield self._yielding([event], mixed=True) if self.typed else [event]
            c = self._peek()
            if c == b"]":
                self.events_end = self._base + self._pos
                self._pos += 1
                return
            if c != b",":
                self._malformed("expected ',' or ']' after an event in traceEvents")
            self._pos += 1
            c = self._peek()
            if c != b"{":
                self._not_events(c)

    def _typed_piece(self) -> list[Any] | None:
        """Typed: the buffer's complete events decoded in one call (None: no cut in it, or the piece does not
        decode as a whole and is read event by event); on return the position is at the next event's '{'."""
        buf, start = self._buf, self._pos
        cut = last_cut(buf, start)
        if cut is None:
            return None
        end, nxt = cut
        with memoryview(buf) as view:
            piece = b"".join((b"[", view[start:end], b"]"))  # one copy, not two
        try:
            batch: list[Any] = EVENTS.decode(piece)
            raws = None
        except msgspec.ValidationError:  # an event of another type than records names: that event generically
            try:
                raws = _RAWS.decode(piece)
            except (msgspec.DecodeError, RecursionError):
                return None
            batch = []
            for raw in raws:
                try:
                    batch.append(EVENT.decode(raw))
                except msgspec.ValidationError:
                    batch.append(generic_value(raw))
        except (msgspec.DecodeError, RecursionError):  # nesting too deep: event by event, where the exact parser
            return None                                 # names the byte
        self.batch_start = self._base + start
        self._pos = nxt
        return self._yielding(batch, piece, raws=raws, mixed=raws is not None)

    def _cut_events(self) -> Generator[list[Any], None, bool]:
        """The buffer's events up to its last cut, one ``}, {`` cut at a time (typed or generic, as the stream
        reads); returns True when a cut did not decode: the next event is then decoded exactly."""
        buf = self._buf
        view = memoryview(buf)
        count, find = buf.count, buf.find
        start = self._pos  # at the '{' of the next event
        batch_start = self._base + start
        skippable = self._head is not None and self._head.match(buf, start) is not None
        exact = False
        skipped = 0
        batch: list[Any] = []
        append = batch.append
        spans: list[tuple[int, int]] | None = [] if self.typed else None
        decode = _typed_event if self.typed else _fast_loads
        for match in self._sep.finditer(buf, start):
            end = match.start() + 1
            if skippable and count(b'"', start, end) % 2 == 0 and find(b"\\", start, end) < 0:
                skipped += 1
            else:
                try:
                    append(decode(view[start:end]))
                except (ValueError, RecursionError):  # cut inside a string or nested value, or a strict decoder
                    exact = True
                    break
                if spans is not None:
                    spans.append((start, end))
            start = match.end() - 1  # the lookahead consumes nothing: the match ends just past '{'
            skippable = match.lastindex is not None
        if skipped and self._on_skipped is not None:
            with view[batch_start - self._base:start] as piece:  # valid during the call only
                self._on_skipped(piece)
        view.release()
        self.skipped += skipped
        self._pos = start
        if batch or skipped:
            self.batch_start = batch_start
            yield self._yielding(batch, buf, spans, mixed=True) if spans is not None else batch
        return exact

    def _yielding(self, batch: list[Any], piece: bytes = b"", spans: list[tuple[int, int]] | None = None,
                  raws: list[Any] | None = None, mixed: bool = False) -> list[Any]:
        """Typed: note what ``generic_of`` needs about the batch about to be yielded, and where it holds dicts."""
        self._batch, self._piece, self._spans, self._raws, self._index = batch, piece, spans, raws, None
        self.generic = [i for i, e in enumerate(batch) if e.__class__ is not Event] if mixed else []
        return batch

    def _expect_end(self) -> None:
        if self._peek() != b"":
            self._malformed("unexpected data after the end of the JSON document")

    # -- exact decoding and errors ------------------------------------------------------------------------
    def _exact_value(self) -> Any:
        """Decode the JSON value at the current position with the stdlib parser, reading more as needed."""
        self._peek()  # raw_decode takes no leading whitespace
        window = 1 << 12  # most events are far smaller; grows x4 while the value runs past it
        while True:
            avail = len(self._buf) - self._pos
            if window > avail and not self._eof:
                self._fill()
                continue
            data = self._buf[self._pos:self._pos + window]
            reaches_end = self._pos + window >= len(self._buf)
            text = data.decode("utf-8", "surrogateescape")
            try:
                value, end = _STDLIB.raw_decode(text)
            except json.JSONDecodeError as exc:
                incomplete = exc.pos >= len(text) - 1 or exc.msg.startswith("Unterminated string")
                if incomplete and not (reaches_end and self._eof):
                    window *= 4
                    continue
                if incomplete:
                    self._truncated()
                offset = self._base + self._pos + len(text[:exc.pos].encode("utf-8", "surrogateescape"))
                raise TraceError(self.path, f"malformed JSON at byte {offset}: {exc.msg}") from None
            except RecursionError:  # hundreds of nested values (no trace holds them): damaged or hostile bytes
                offset = self._base + self._pos
                raise TraceError(self.path, f"malformed JSON at byte {offset}: nesting too deep") from None
            if end >= len(text) and not (reaches_end and self._eof):
                window *= 4  # a number or literal may continue past the window: decode again with more
                continue
            self._pos += len(text[:end].encode("utf-8", "surrogateescape"))
            return value

    def _snippet(self) -> str:
        return repr(self._buf[self._pos:self._pos + 24].decode("utf-8", "replace"))

    def _truncated(self) -> None:
        raise TraceError(self.path, "truncated trace: the JSON ends early (the file was cut off while being written?)")

    def _malformed(self, what: str) -> None:
        if self._peek() == b"":
            self._truncated()
        raise TraceError(self.path, f"malformed JSON at byte {self._base + self._pos}: {what}")

    def _not_events(self, c: bytes) -> None:
        if c == b"":
            self._truncated()
        raise TraceError(self.path, "not a trace: traceEvents holds something other than event objects (at byte "
                                    f"{self._base + self._pos})")
