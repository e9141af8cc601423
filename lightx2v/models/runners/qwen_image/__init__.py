"""The Qwen-Image runner: encoders, denoising loop with the profiled `infer_main`, outputs."""
