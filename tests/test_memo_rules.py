"""`lightx2v.trace_browser.memo`: a value per key, computed once however many threads ask at once (a burst of
requests for a new trace's Overview summarizes it once), an exception shared and not kept, the oldest dropped."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from lightx2v.trace_browser.memo import Memo

THREADS = 16


def ask_at_once(memo: Memo, key, compute) -> list:
    """THREADS threads ask for `key` together; what each got (a value or the exception)."""
    got: list = [None] * THREADS
    start = threading.Barrier(THREADS)

    def ask(i: int) -> None:
        start.wait()
        try:
            got[i] = memo.get(key, compute)
        except Exception as exc:  # the test looks at it
            got[i] = exc

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    return got


def in_get(frame) -> bool:
    while frame is not None:
        if frame.f_code is Memo.get.__code__:
            return True
        frame = frame.f_back
    return False


def slow_compute(result, calls: list):
    """A computation that runs until every asking thread is inside ``Memo.get`` (read from their stacks; 10 s at
    most), so the others ask while it is under way, whatever the machine's load."""
    def compute():
        calls.append(1)
        deadline = time.monotonic() + 10
        while sum(in_get(f) for f in sys._current_frames().values()) < THREADS and time.monotonic() < deadline:
            time.sleep(0.01)
        if isinstance(result, Exception):
            raise result
        return result
    return compute


def test_concurrent_callers_share_one_computation():
    memo: Memo[str] = Memo(keep=4)
    calls: list = []
    assert ask_at_once(memo, "k", slow_compute("value", calls)) == ["value"] * THREADS
    assert len(calls) == 1
    assert memo.get("k", lambda: "other") == "value"  # kept


def test_an_exception_reaches_every_waiting_caller_and_is_not_kept():
    memo: Memo[str] = Memo(keep=4)
    calls: list = []
    got = ask_at_once(memo, "k", slow_compute(ValueError("cannot read"), calls))
    assert all(isinstance(g, ValueError) and str(g) == "cannot read" for g in got)
    assert len(calls) == 1
    assert memo.get("k", lambda: "read now") == "read now"


def test_the_least_recently_used_keys_are_dropped():
    memo: Memo[int] = Memo(keep=2)
    memo.get("a", lambda: 1)
    memo.get("b", lambda: 2)
    memo.get("a", lambda: pytest.fail("kept"))  # a is now the most recent
    memo.get("c", lambda: 3)
    assert memo.get("a", lambda: 10) == 1 and memo.get("b", lambda: 20) == 20


def test_a_value_computed_elsewhere_is_kept_unless_one_is_kept_already():
    memo: Memo[str] = Memo(keep=2)
    assert not memo.holds("a")
    memo.put("a", "read together")
    assert memo.holds("a") and memo.get("a", lambda: "computed") == "read together"
    memo.put("a", "later")
    assert memo.get("a", lambda: "computed") == "read together"
    memo.put("b", "b")
    memo.put("c", "c")  # the bound holds for kept values too
    assert not memo.holds("a") and memo.holds("c")
