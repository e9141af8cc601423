"""LightX2V-style inference with kernel-level torch.profiler traces served by TensorBoard."""

# The drop-in profiler (utils/torch_trace_profiler.py) imports nothing of this project; after each capture it calls
# the summary handler its host package names here (``<trace>.summary.txt`` and a few log lines).
TORCH_TRACE_SUMMARY_HANDLER = "lightx2v.trace_summary.hook:write_capture_summary"
