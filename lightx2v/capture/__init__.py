"""Arm the next capture of a running process from outside: `python -m lightx2v.capture`, and the trace browser's
"Capture next call" button. Both go through `control`, which speaks the profiler's file protocol (see the "remote
arming" section of `lightx2v/utils/torch_trace_profiler.py`) and never imports torch."""
