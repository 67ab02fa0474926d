"""What lowering produces and the runner consumes: kernels, buffers, launch sizes, outcomes.

A ``CompiledProgram`` is a sequence of OpenCL kernels over named buffers. The
runner allocates the global buffers, uploads the inputs, runs the kernels in
order and reads the output back. Every evaluation of a candidate ends in one
``Outcome``; nothing is raised to the caller for a candidate's failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from codegen.errors import InvalidArgumentError

DTYPES = {"float": np.float32, "int": np.int32}
ITEM_BYTES = {"float": 4, "int": 4}


@dataclass(frozen=True)
class Buffer:
    """A memory object. ``count`` is in scalars; ``role`` is input, output or temp."""

    name: str
    space: str  # global | local | private
    dtype: str  # float | int
    count: int
    role: str = "temp"

    @property
    def nbytes(self) -> int:
        return self.count * ITEM_BYTES[self.dtype]


@dataclass(frozen=True)
class Kernel:
    """One OpenCL kernel: complete source, its global-buffer arguments in order, launch sizes."""

    name: str
    source: str
    args: tuple[str, ...]
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None = None
    local_buffers: tuple[Buffer, ...] = ()
    private_bytes: int = 0  # per work-item, as allocated by the emitter


@dataclass(frozen=True)
class CompiledProgram:
    """A lowered program: kernels to run in order over global buffers."""

    kernels: tuple[Kernel, ...]
    buffers: dict[str, Buffer]
    inputs: tuple[str, ...]
    output: str
    output_shape: tuple[int, ...]
    flops: int | None = None
    build_options: tuple[str, ...] = ("-cl-mad-enable",)

    def memory_report(self) -> dict[str, int]:
        """Bytes by address space; ``global_total`` is the device memory the whole program uses."""
        glob = sum(b.nbytes for b in self.buffers.values() if b.space == "global")
        local = max((sum(b.nbytes for b in k.local_buffers) for k in self.kernels), default=0)
        private = max((k.private_bytes for k in self.kernels), default=0)
        return {
            "global_total": glob,
            "global_inputs": sum(self.buffers[n].nbytes for n in self.inputs),
            "global_output": self.buffers[self.output].nbytes,
            "global_temps": glob
            - sum(self.buffers[n].nbytes for n in self.inputs)
            - self.buffers[self.output].nbytes,
            "local_per_group": local,
            "private_per_item": private,
        }


class Status(str, Enum):
    """What became of an evaluated candidate (a string: it compares, prints, stores and
    serialises as its value, ``"ok"``...)."""

    OK = "ok"
    REJECTED = "rejected"
    COMPILE_ERROR = "compile-error"
    WRONG_RESULT = "wrong-result"
    TIMEOUT = "timeout"
    CRASH = "crash"
    # the evaluator lost the candidate twice (a Ray device actor or its node died in
    # flight, mapper/explore/ray_pool.py): not the candidate's outcome, the cluster's
    LOST = "lost"

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:  # as its text, so printed counts read as before: {'ok': 3}
        return repr(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def of(cls, value: str) -> Status:
        """``value`` as a status; an unknown one is an ``InvalidArgumentError``."""
        try:
            return cls(value)
        except ValueError:
            raise InvalidArgumentError(
                f"unknown outcome status {value!r}; the statuses are "
                f"{', '.join(s.value for s in cls)}") from None



@dataclass(frozen=True)
class Outcome:
    """The result of evaluating one candidate.

    ``status`` is a :class:`Status` (given as one or as its text); ``check`` names the
    check that rejected a candidate (``rejected:synchronizability``), ``reason`` says what
    happened in words.
    """

    status: Status
    reason: str = ""
    check: str | None = None
    time_s: float | None = None  # median kernel time (all kernels of the program)
    times_s: tuple[float, ...] = ()
    gflops: float | None = None
    memory: dict[str, int] = field(default_factory=dict)
    max_abs_error: float | None = None
    build_s: float | None = None
    lower_s: float | None = None
    source_hash: str | None = None
    run_window: tuple[float, float] | None = None  # wall clock (epoch s) of the timed runs

    def __post_init__(self) -> None:
        if type(self.status) is not Status:  # given as its text
            object.__setattr__(self, "status", Status.of(self.status))

    @property
    def label(self) -> str:
        """``ok``, ``rejected:<check>``, ``compile-error``, ..."""
        return f"rejected:{self.check}" if self.status == "rejected" and self.check else self.status

    @property
    def ok(self) -> bool:
        return self.status == "ok"
