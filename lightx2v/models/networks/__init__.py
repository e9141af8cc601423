"""Networks in LightX2V's layout, one sub-package per model class."""
