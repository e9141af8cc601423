"""One atomic write for the stack: readers (TensorBoard, the trace browser, a polling process) see the old file or
the whole new one, never a half-written one.

The drop-in profiler (``lightx2v/utils/torch_trace_profiler.py``) keeps its own copy of this rule, because it must
run alone in a user's checkout; everything else in the stack writes through here.
"""

from __future__ import annotations

import os
import tempfile
from typing import Optional, Union


def write_atomically(path: Union[str, os.PathLike], data: Union[str, bytes], *, mode: Optional[int] = 0o644) -> None:
    """Write ``data`` to ``path`` through a hidden temporary file in the same folder, then rename it into place.

    ``str`` is written as UTF-8 (unencodable characters replaced). ``mode`` is the new file's permission bits
    (``None`` keeps the temporary file's 0600). On any failure the temporary file is removed and the error is
    raised; ``path`` is left as it was.
    """
    directory, name = os.path.split(os.path.abspath(os.fspath(path)))
    payload = data.encode("utf-8", errors="replace") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
