"""Models in LightX2V's layout: networks (transformers), schedulers, runners, stand-in encoders."""
