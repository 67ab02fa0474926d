"""Typed lowering errors: one class per check, each naming the check it stands for.

A candidate mapping that cannot become a correct OpenCL kernel is rejected with one of
these before any code is emitted. ``check`` is the name the runner reports
(``rejected:<check>``); the message says what is wrong and what to do about it.

:class:`Check` names every check a candidate can be rejected for, here and only here: the
lowering's (below), the algorithmic constraints of the sizes (``ir.errors.
ConstraintViolation``), the device's features (``codegen.device.DeviceFeatureError``) and the
explorer's early cut. (Plain ``str`` constants, not an ``enum.StrEnum``: the project supports
Python 3.10, and the names are stored as text in result stores.)
"""

from __future__ import annotations

from typing import Any

from ir.errors import ConstraintViolation, LiftmapError


class Check:
    """The names of the rejection checks (``rejected:<check>``), as plain strings."""

    LOWERING = "lowering"
    UNMAPPED_MAP = "unmapped-map"
    PARALLEL_NESTING = "parallel-nesting"
    UNSUPPORTED = "unsupported"
    CROSS_GROUP_DEPENDENCY = "cross-group-dependency"
    MEMORY_SCOPE = "memory-scope"
    DATA_RACE = "data-race"
    VECTORIZATION = "vectorization"
    SYNCHRONIZABILITY = "synchronizability"
    WORK_GROUP_SIZE = "work-group-size"
    LOCAL_MEMORY = "local-memory"
    PRIVATE_MEMORY = "private-memory"
    MAX_ALLOCATION = "max-allocation"
    ALGORITHMIC_CONSTRAINT = "algorithmic-constraint"
    DEVICE_FEATURE = "device-feature"
    EARLY_CUT = "early-cut"


REJECTION_CHECKS: tuple[str, ...] = tuple(
    v for k, v in vars(Check).items() if not k.startswith("_")
)
"""Every rejection check name, in :class:`Check` order."""

if ConstraintViolation.check != Check.ALGORITHMIC_CONSTRAINT:  # ir cannot import this module
    raise ImportError(f"ir.errors.ConstraintViolation.check is {ConstraintViolation.check!r}, "
                      f"not Check.ALGORITHMIC_CONSTRAINT ({Check.ALGORITHMIC_CONSTRAINT!r})")


class CodegenError(LiftmapError):
    """Base of the code generator's errors: the lowering's (:class:`LoweringError`, a
    candidate's rejection) and those of a caller misusing the runner, the worker pool or
    the outcome records (the device's, the build's and the workers' start errors are
    defined beside them: ``codegen.opencl_env`` and ``codegen.device``, ``codegen.runner``,
    ``codegen.worker``)."""


class KernelInputError(CodegenError, ValueError):
    """The inputs given to run a compiled program do not match its inputs: one is missing,
    or has another number of elements than its buffer."""


class InvalidArgumentError(CodegenError, ValueError):
    """An argument outside the values it accepts: a worker pool's start method, a number of
    repeats, an outcome's status."""


class LoweringError(CodegenError):
    """Base of all lowering errors. ``check`` names the check that failed."""

    check: str = Check.LOWERING
    priority: int = 100  # smaller is reported first when one candidate fails several checks

    def __init_subclass__(cls, *, check: str | None = None, priority: int | None = None,
                          **kwargs: Any) -> None:
        """A subclass names its check and priority in its bases: ``class E(LoweringError,
        check=Check.X, priority=3)``; one it leaves out is inherited."""
        super().__init_subclass__(**kwargs)
        if check is not None:
            cls.check = check
        if priority is not None:
            cls.priority = priority

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class UnmappedMapError(LoweringError, check=Check.UNMAPPED_MAP, priority=0):
    """A plain ``map`` that computes has no parallel (or sequential) mapping."""


class ParallelNestingError(LoweringError, check=Check.PARALLEL_NESTING, priority=1):
    """Nested parallel maps reuse one OpenCL dimension illegally (CC'22 rules 3 and 6)."""


class UnsupportedError(LoweringError, check=Check.UNSUPPORTED, priority=2):
    """The program uses a construct the lowering does not implement."""


class CrossGroupDependencyError(LoweringError, check=Check.CROSS_GROUP_DEPENDENCY, priority=10):
    """Work-items read what other work-groups (or other mapGlb work-items) wrote in the same
    kernel: OpenCL has no global barrier (CC'22 Table 1, M2)."""


class MemoryScopeError(LoweringError, check=Check.MEMORY_SCOPE, priority=11):
    """Local memory read by another work-group, or private memory by another work-item
    (CC'22 Table 1, M3; rules 1 and 2)."""


class DataRaceError(LoweringError, check=Check.DATA_RACE, priority=12):
    """Several work-items write the same element (a map that every work-item runs
    redundantly writes shared memory; CC'22 rule 7)."""


class UnvectorizableError(LoweringError, check=Check.VECTORIZATION, priority=13):
    """A vector load or store touches non-contiguous elements (CC'22 Table 1, M5)."""


class SynchronizabilityError(LoweringError, check=Check.SYNCHRONIZABILITY, priority=14):
    """A barrier would sit in a loop whose trip count differs between the work-items of a
    group (CC'22 Section 4.6)."""


class WorkGroupSizeError(LoweringError, check=Check.WORK_GROUP_SIZE, priority=20):
    """The work-group size exceeds the device's limits."""


class LocalMemoryError(LoweringError, check=Check.LOCAL_MEMORY, priority=21):
    """The local memory of one work-group exceeds the device's local memory."""


class PrivateMemoryError(LoweringError, check=Check.PRIVATE_MEMORY, priority=22):
    """The private arrays of one work-item exceed the configured private memory budget."""


class MaxAllocationError(LoweringError, check=Check.MAX_ALLOCATION, priority=23):
    """A global buffer exceeds the device's maximum allocation, or all exceed its memory."""


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
"""The checks of the lowering errors (a subset of :data:`REJECTION_CHECKS`)."""
