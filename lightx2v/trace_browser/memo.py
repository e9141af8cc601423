"""What the server keeps between requests: a value per key, computed once however many requests ask at once.

    pages = Memo(keep=16)
    body = pages.get(key, lambda: render(...))   # the first caller computes; callers meanwhile wait for its value

``functools.lru_cache`` computes a missing value in every thread that asks before the first one is done: 200
browser tabs opening a new trace's Overview would summarize it 200 times over. Here the others wait and share the
first caller's value (or its exception). Keys name what the value depends on, the files' size, mtime and inode
included, so a rewritten trace is a new key and the old value ages out (the ``keep`` most recently used stay).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Pending:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: object = None
        self.error: BaseException | None = None


class Memo(Generic[T]):
    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._values: OrderedDict[Hashable, T] = OrderedDict()
        self._pending: dict[Hashable, _Pending] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value kept for ``key``, else ``compute()``'s (once: concurrent callers wait for it); an exception
        reaches every caller waiting for it and nothing is kept."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            pending = self._pending.get(key)
            owner = pending is None
            if owner:
                pending = self._pending[key] = _Pending()
        assert pending is not None
        if not owner:
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            return pending.value  # type: ignore[return-value]
        try:
            value = compute()
        except BaseException as exc:
            pending.error = exc
            raise
        else:
            pending.value = value
            with self._lock:
                self._values[key] = value
                while len(self._values) > self.keep:
                    self._values.popitem(last=False)
            return value
        finally:
            with self._lock:
                del self._pending[key]
            pending.done.set()

    def holds(self, key: Hashable) -> bool:
        """Whether a value for ``key`` is kept (or being computed)."""
        with self._lock:
            return key in self._values or key in self._pending

    def put(self, key: Hashable, value: T) -> None:
        """Keep ``value``, computed elsewhere (with others, at once), unless one is kept or being computed."""
        with self._lock:
            if key in self._values or key in self._pending:
                return
            self._values[key] = value
            while len(self._values) > self.keep:
                self._values.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
