"""Every view torch-tb-profiler 0.4.3 answers for one trace, as JSON on stdout: the data its routes send
(Overview, Operator, Kernel, Module, operator tree, memory, call stacks), built in this process with our parser
fixes applied, all of them or all but those named.

    python tests/programs/tb_views.py TRACE [FIX,FIX...]   # the fixes to leave out (e.g. stream_parse)
"""

from __future__ import annotations

import json
import sys

from lightx2v.tensorboard import patches


def main() -> None:
    path, left_out = sys.argv[1], set(filter(None, (sys.argv[2] if len(sys.argv) > 2 else "").split(",")))
    for fix in patches.FIXES:
        if fix.where == "parser" and fix.name not in left_out:
            assert fix.check() is None, fix.name
            fix.apply()
    from torch_tb_profiler.profiler import data
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    profile_data = data.RunProfileData.parse("w", "default", path, None)
    run = RunGenerator("w", "default", profile_data).generate_run_profile()
    views = {name: value for name, value in sorted(vars(run).items()) if _is_json(value)}
    views["streamed"] = getattr(profile_data, "lightx2v_streamed", False)
    views["module_view"] = run.get_module_view()
    views["operator_tree"] = run.get_operator_tree()
    if getattr(run, "memory_stats", None) is not None or getattr(profile_data, "memory_snapshot", None):
        views["memory_stats"] = run.get_memory_stats()
    json.dump(views, sys.stdout, sort_keys=True, default=repr)


def _is_json(value) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


if __name__ == "__main__":
    main()
