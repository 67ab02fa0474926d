"""Typed lowering errors: one class per check, each naming the check it stands for.

A candidate mapping that cannot become a correct OpenCL kernel is rejected with one of
these before any code is emitted. ``check`` is the name the runner reports
(``rejected:<check>``); the message says what is wrong and what to do about it.
"""

from __future__ import annotations


class LoweringError(Exception):
    """Base of all lowering errors. ``check`` names the check that failed."""

    check = "lowering"
    priority = 100  # smaller is reported first when one candidate fails several checks

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class UnmappedMapError(LoweringError):
    """A plain ``map`` that computes has no parallel (or sequential) mapping."""

    check = "unmapped-map"
    priority = 0


class ParallelNestingError(LoweringError):
    """Nested parallel maps reuse one OpenCL dimension illegally (CC'22 rules 3 and 6)."""

    check = "parallel-nesting"
    priority = 1


class UnsupportedError(LoweringError):
    """The program uses a construct the lowering does not implement."""

    check = "unsupported"
    priority = 2


class CrossGroupDependencyError(LoweringError):
    """Work-items read what other work-groups (or other mapGlb work-items) wrote in the same
    kernel: OpenCL has no global barrier (CC'22 Table 1, M2)."""

    check = "cross-group-dependency"
    priority = 10


class MemoryScopeError(LoweringError):
    """Local memory read by another work-group, or private memory by another work-item
    (CC'22 Table 1, M3; rules 1 and 2)."""

    check = "memory-scope"
    priority = 11


class DataRaceError(LoweringError):
    """Several work-items write the same element (a map that every work-item runs
    redundantly writes shared memory; CC'22 rule 7)."""

    check = "data-race"
    priority = 12


class UnvectorizableError(LoweringError):
    """A vector load or store touches non-contiguous elements (CC'22 Table 1, M5)."""

    check = "vectorization"
    priority = 13


class SynchronizabilityError(LoweringError):
    """A barrier would sit in a loop whose trip count differs between the work-items of a
    group (CC'22 Section 4.6)."""

    check = "synchronizability"
    priority = 14


class WorkGroupSizeError(LoweringError):
    """The work-group size exceeds the device's limits."""

    check = "work-group-size"
    priority = 20


class LocalMemoryError(LoweringError):
    """The local memory of one work-group exceeds the device's local memory."""

    check = "local-memory"
    priority = 21


class PrivateMemoryError(LoweringError):
    """The private arrays of one work-item exceed the configured private memory budget."""

    check = "private-memory"
    priority = 22


class MaxAllocationError(LoweringError):
    """A global buffer exceeds the device's maximum allocation, or all exceed its memory."""

    check = "max-allocation"
    priority = 23


ALL_ERRORS = (
    UnmappedMapError,
    ParallelNestingError,
    UnsupportedError,
    CrossGroupDependencyError,
    MemoryScopeError,
    DataRaceError,
    UnvectorizableError,
    SynchronizabilityError,
    WorkGroupSizeError,
    LocalMemoryError,
    PrivateMemoryError,
    MaxAllocationError,
)
CHECKS = tuple(e.check for e in ALL_ERRORS)
