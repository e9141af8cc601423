"""The one exception this package raises for bad input, so the CLI can print it as a single line."""

from __future__ import annotations


class TraceError(Exception):
    """A path that cannot be summarized: missing, not a trace, truncated, or a directory without traces.

    The message names the path and the problem; the CLI prints it as one line and exits non-zero.
    """

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, str]]:  # to come back from a worker process
        return TraceError, (self.path, self.problem)
