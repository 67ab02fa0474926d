"""The buffer record of the lowering: one :class:`Buf` per value a kernel stores.

Views (:mod:`codegen.views`) address scalars of a ``Buf``; memory (:mod:`codegen.memory`)
decides a buffer's layout, address space and size; the statement tree
(:mod:`codegen.stmt`) declares private ones. It lives here, below all three, so that each
depends on it and none on another for it (issue 23: ``memory`` and ``views`` imported each
other).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ir.sym import Expr

ITEM_BYTES = {"float": 4, "int": 4}


@dataclass(eq=False)
class Buf:
    """A buffer of scalars: ``count`` items of ``dtype`` in ``space``.

    ``role`` is input, output, temp or acc (a reduce accumulator). ``alloc_loops`` are the
    loops around the allocation point; ``expanded_by`` those the buffer is replicated for.
    """

    name: str
    space: str
    dtype: str
    count: int
    role: str = "temp"
    label: str = ""
    scalar: bool = False  # a private single value, printed as a plain variable
    alloc_loops: tuple = ()
    expanded_by: tuple = ()
    glb_dims: frozenset = field(default_factory=frozenset)  # mapGlb dims around a local buffer
    c_name: str = ""  # its name in OpenCL C when ``name`` is not usable there
    # ``count`` in the program's symbolic sizes (None: not known symbolically); the
    # resource constraints of the tuning space are built from it (codegen.resources)
    sym_count: Expr | None = None
    # a buffer in vector lanes (codegen.lanes): its width in the program's symbolic sizes
    # (the tuning parameter), which the resources multiply its scalar count by
    lanes: Expr | None = None

    @property
    def cname(self) -> str:
        return self.c_name or self.name

    @property
    def nbytes(self) -> int:
        """Bytes of the buffer (``dtype`` may be a vector type such as ``float8``)."""
        base = self.dtype.rstrip("0123456789")
        width = int(self.dtype[len(base):] or 1)
        return self.count * width * ITEM_BYTES[base]
