"""The bench: suites of CUDA kernels, checked and timed on a GPU.

`curriculum.bench.api` is the suite API that `kernels/<topic>/suite.py` imports.
"""

from curriculum.bench.api import (
    Benchmark,
    LibraryBaseline,
    OutputSpec,
    Roofline,
    Suite,
    Version,
    discover_versions,
)

__all__ = [
    "Benchmark",
    "LibraryBaseline",
    "OutputSpec",
    "Roofline",
    "Suite",
    "Version",
    "discover_versions",
]
