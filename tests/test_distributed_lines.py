"""The ranks of a job share one terminal or torchrun's pipe: each line a rank writes must go out in one write, or
another rank's line lands inside it (seen in CI: a rank's "UP" line between a peer's warning and its newline,
since ``print`` writes the text and the newline separately)."""

from __future__ import annotations

import io
import sys

import pytest
import torch.distributed as dist

from lightx2v.utils import distributed


class Writes(io.StringIO):
    """A stderr that keeps each write call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, s: str) -> int:
        self.calls.append(s)
        return super().write(s)


def test_say_writes_the_line_and_its_newline_at_once(monkeypatch):
    err = Writes()
    monkeypatch.setattr(sys, "stderr", err)
    distributed.say("warning: rank 1 is failing")
    assert err.calls == ["warning: rank 1 is failing\n"]


def test_a_failing_ranks_teardown_warning_is_one_write(monkeypatch, tmp_path):
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    err = Writes()
    monkeypatch.setattr(sys, "stderr", err)
    try:
        with pytest.raises(ValueError):
            try:
                raise ValueError("this rank failed")
            finally:
                distributed.teardown()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert err.calls and all(c.endswith("\n") and c.count("\n") == 1 for c in err.calls), err.calls
    assert "rank 0 is failing (ValueError)" in err.calls[0]
