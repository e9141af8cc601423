"""The stack's output, relayed: supervisord and its programs write into pipes that `serve` reads and copies to its
own stdout and stderr, a whole line per write.

Why not let them write to the terminal themselves: supervisord's programs reopen `/dev/stdout`. For a pipe or a
terminal that is the same stream, but for a file opened with `>` (`lightx2v-serve > serve.log`, `nohup`) it is a
new open file at offset 0, which overwrites the lines `serve` and the other programs wrote. And when the reader
goes away (`lightx2v-serve | tee log`, then Ctrl-C kills tee too), a program that writes gets EPIPE, and
supervisord can die of it before it stops its programs. A pipe that `serve` drains to the end, whatever becomes
of its own output, avoids both: the file gets every line, and nobody in the stack ever sees EPIPE.
"""

from __future__ import annotations

import os
import selectors
import threading
import time

# A partial line (a prompt, a progress bar's first draw) is passed on after this long without its end
PARTIAL_AFTER_S = 0.5
_ENDS = (b"\n", b"\r")  # \r: a progress bar's redraw is a line of its own


class Relay:
    """Two pipes (the children's stdout and stderr) copied to `out_fd` and `err_fd` by one thread.

    Use: give `child_stdout` / `child_stderr` to the child, `started()` after it is spawned, `say()` for this
    process's own lines, `close()` at the end (it returns once every writer of the pipes has exited)."""

    def __init__(self, out_fd: int = 1, err_fd: int = 2):
        self._lock = threading.RLock()  # say() from a signal handler may interrupt a write
        self._broken: set[int] = set()
        self._out_fd, self._err_fd = out_fd, err_fd
        out_r, self.child_stdout = os.pipe()
        err_r, self.child_stderr = os.pipe()
        self._targets = {out_r: out_fd, err_r: err_fd}
        self._thread = threading.Thread(target=self._copy, name="serve-relay", daemon=True)

    def started(self) -> None:
        """The child holds its ends now: close ours (so the pipes end when the children do) and start copying."""
        for fd in (self.child_stdout, self.child_stderr):
            os.close(fd)
        self._thread.start()

    def say(self, text: str, error: bool = False) -> None:
        """One line of this process's own, never interleaved with a child's line."""
        self._write(self._err_fd if error else self._out_fd, (text + "\n").encode(errors="replace"))

    def close(self, timeout: float = 10.0) -> None:
        """Wait until the children's last bytes are copied (the pipes end when every process holding them ends)."""
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _write(self, fd: int, data: bytes) -> None:
        """All of `data` in as few writes as the kernel takes; an output that is gone is dropped, never raised."""
        with self._lock:
            if fd in self._broken:
                return
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(fd, view):]
            except OSError:  # EPIPE (the reader left), EIO (the terminal closed), EBADF: keep draining anyway
                self._broken.add(fd)

    def _copy(self) -> None:
        pending = {fd: b"" for fd in self._targets}
        since = {fd: 0.0 for fd in self._targets}
        with selectors.DefaultSelector() as selector:
            for fd in self._targets:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                for key, _ in selector.select(timeout=PARTIAL_AFTER_S):
                    fd = key.fd
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        selector.unregister(fd)
                        os.close(fd)
                        self._flush(fd, pending, whole=True)
                        continue
                    waiting = bool(pending[fd])
                    pending[fd] += chunk
                    if self._flush(fd, pending, whole=False) or not waiting:
                        since[fd] = time.monotonic()  # what is left is a new partial line: its wait starts
                now = time.monotonic()
                for fd, text in pending.items():
                    if text and now - since[fd] >= PARTIAL_AFTER_S:
                        self._flush(fd, pending, whole=True)

    def _flush(self, fd: int, pending: dict[int, bytes], whole: bool) -> bool:
        """Pass on `fd`'s complete lines (all of it when `whole`), keeping a partial last line for later; whether
        anything was passed on."""
        text = pending[fd]
        cut = len(text) if whole else max(text.rfind(end) for end in _ENDS) + 1
        if cut:
            self._write(self._targets[fd], text[:cut])
            pending[fd] = text[cut:]
        return cut > 0
