"""A rank made late on purpose: the demo and test knob behind "who waited for whom".

`python -m lightx2v.infer ... --late_rank R --late_ms MS [--late_steps 1,3]`: in the chosen `model.infer` calls,
rank R sleeps MS milliseconds just before its first collective of the call — the first Ulysses all-to-all with
sequence parallelism, else the CFG all-gather — inside a `late_rank_delay` region. Its trace shows it there; its
peers' traces show them waiting about MS in that collective. Nothing else changes: the result is the same.

Calls are counted from 0 over the run, every `model.infer` call (the profiler's repeated calls included). With the
capture at the first denoising step (the default), call N is the trace's `ProfilerStep#N`: the capture makes
wait + warmup + active calls, and the trace keeps the last `active` of them.

Torch-free at import, so the CLI can parse `--late_steps` before paying for torch.
"""

from __future__ import annotations

import dataclasses
import time


def parse_calls(text: str) -> frozenset[int]:
    """'1,3' → {1, 3}: call indices, >= 0, comma-separated; a ValueError saying what is wrong otherwise."""
    calls = set()
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or not part.isascii():
            raise ValueError(f"{text!r}: give model.infer call indices (>= 0) separated by commas, e.g. 1,3")
        calls.add(int(part))
    return frozenset(calls)


@dataclasses.dataclass
class LateRank:
    """Rank `rank` sleeps `ms` before its first collective of each call in `calls` (None: every call)."""

    rank: int
    ms: float
    calls: frozenset[int] | None = None
    _due: bool = dataclasses.field(default=False, init=False, repr=False)

    def start_call(self, call: int, rank: int) -> None:
        """Called by the model at the start of call `call` on rank `rank`: arm the delay when both match."""
        self._due = rank == self.rank and (self.calls is None or call in self.calls)

    def before_collective(self) -> None:
        """Called before every collective of a call; sleeps once, before the first, when armed."""
        if not self._due:
            return
        self._due = False
        import torch
        from torch.profiler import record_function

        with record_function("late_rank_delay"):
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.synchronize()  # the device's queued work first: late on the device too, by `ms`
            time.sleep(self.ms / 1000)
