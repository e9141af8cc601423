"""Large traces in torch-tb-profiler 0.4.3: the fixes that let it load and show a with_stack capture of a real
pipeline (hundreds of MB to GB), measured by `benchmarks/bench_tensorboard_large.py`; registered in
`patches.FIXES`.

- `step_ranges` (parser): the Overview's per-step costs intersect each step with the whole trace's busy ranges,
  and 0.4.3 walks every list from its start for every step: O(steps x ranges), minutes on a trace of a thousand
  steps. The lists it passes there are sorted and disjoint (`merge_ranges` output, and intersections and
  differences of such), so for one step the walk can start at the first range ending after the step starts and
  stop after the last starting at or before its end (bisect; a zero-long step on a range's start is
  that range's one point): the same ranges out.
"""

from __future__ import annotations

import bisect
import logging
from typing import Any

from lightx2v.tensorboard.fix import code_names, is_fixed, mark_fixed, missing

logger = logging.getLogger("lightx2v.tensorboard")

BISECT_FROM = 16
"""Ranges in a list past which one step's intersection bisects (below it the plugin's walk is as quick)."""


# --- step_ranges -----------------------------------------------------------------------------------------------

def _start(item: tuple) -> Any:
    return item[0]


def _end(item: tuple) -> Any:
    return item[1]


def check_step_ranges() -> str | None:
    from torch_tb_profiler.profiler import overall_parser

    problem = missing(overall_parser, "intersection_ranges_lists", "OverallParser")
    if problem:
        return problem
    if "intersection_ranges_lists" not in code_names(overall_parser.OverallParser.aggregate):
        return "OverallParser.aggregate no longer calls intersection_ranges_lists"
    return None


def apply_step_ranges() -> None:
    from torch_tb_profiler.profiler import overall_parser

    original = overall_parser.intersection_ranges_lists
    if is_fixed(original):
        return

    def intersection_ranges_lists(range_list1, range_list2):
        if len(range_list1) == 1 and len(range_list2) > BISECT_FROM:
            begin, end = range_list1[0]
            first = bisect.bisect_right(range_list2, begin, key=_end)
            last = bisect.bisect_right(range_list2, end, lo=first, key=_start)
            range_list2 = range_list2[first:last]
        return original(range_list1, range_list2)

    mark_fixed(intersection_ranges_lists, original)
    overall_parser.intersection_ranges_lists = intersection_ranges_lists
