"""A compact Qwen-Image-style MMDiT with synthetic (seeded random) weights."""
