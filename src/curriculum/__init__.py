"""curriculum: a static-site generator for measured GPU-kernel engineering courses."""

__version__ = "0.1.0"
