"""A record as a strategy observes it, for tests that drive a strategy by hand."""

from __future__ import annotations

from mapper.encoding import MapCodes
from mapper.explore.record import Record


def observed(status: str, gflops: float | None = None, time_s: float | None = None) -> Record:
    """A ``Record`` with only what a strategy reads: the status and the speed."""
    return Record(key="test", run_id="test", strategy="test", mapping=MapCodes({}),
                  status=status, gflops=gflops, time_s=time_s)
