"""Flow-matching Euler scheduler for the Qwen-Image-style model."""
