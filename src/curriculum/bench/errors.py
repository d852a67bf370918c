"""The bench's exception family, each mapped to an exit code by the CLI.

A failed correctness check or a refused measurement is not an exception: it
is an outcome of one case, reported, and the run goes on to the next case.
These are the conditions that stop a run before or between cases.
"""

from __future__ import annotations


class BenchError(Exception):
    """A condition that stops `curriculum bench`; `exit_code` is what the CLI returns."""

    exit_code = 2


class NoGpuError(BenchError):
    """No usable CUDA device: CuPy missing, no device, or devices hidden."""


class SuiteError(BenchError):
    """A suite that cannot be loaded or that does not claim its files exactly once."""


class ResultsFileError(BenchError):
    """An existing results file that cannot be read or belongs to another GPU."""


class UsageError(BenchError):
    """Options that do not make sense together, e.g. a malformed --shard."""
