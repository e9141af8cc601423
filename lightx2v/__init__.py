"""LightX2V-style inference with kernel-level torch.profiler traces served by TensorBoard."""
