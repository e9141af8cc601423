"""Stand-ins for the VAE: the embedded workload decodes nothing, it previews latents."""
