"""Two printing decisions that keep a kernel's private arrays in registers (issue 9).

* **Vector private arrays.** A private array of scalars that the kernel only ever reads
  and writes as whole ``floatN`` vectors at offsets that are multiples of ``N`` is
  declared as an array of ``floatN`` (``float16 p[3]`` instead of ``float p[48]``), and
  accessed as ``p[k]`` instead of ``vload16(k, p)`` / ``vstore16(x, k, p)``. Same bytes,
  same values; LLVM then promotes each element to one vector register, where the
  ``float`` array reinterpreted as vectors was split into partial loads and shuffles.
* **Order of an unrolled register block.** In a fully unrolled nest of two loops whose
  iterations are independent (each iteration writes its own private elements and reads
  no element another iteration writes), any order of the iterations gives the same
  result. The printer puts the loop with more iterations outside: a value that depends
  only on the outer loop is then loaded once and used by the whole inner loop, and only
  the values that depend on the inner loop (the fewer) have to stay in registers across
  outer iterations. For a block of ``a x b`` accumulators updated from ``a`` and ``b``
  operands this needs ``a*b + min(a, b) + 1`` registers instead of ``a*b + max(a, b) + 1``.
"""

from __future__ import annotations

from collections.abc import Iterable

from codegen.stmt import Loop, Store, leaves_of
from codegen.views import Mem, VecMem
from ir.errors import SymbolicError

SCALAR_DTYPES = ("float", "int")


def _accesses(stmts: Iterable) -> Iterable[Mem | VecMem]:
    """Every memory leaf a statement list writes or reads (conditions included)."""
    for s in stmts:
        if isinstance(s, Loop):
            yield from _accesses(s.body)
        elif isinstance(s, Store):
            yield s.dest
            yield from leaves_of(s.value)


def vector_private_arrays(body: list) -> dict[str, int]:
    """``{buffer name: N}`` for the private scalar arrays of a kernel body that are only
    accessed as whole ``N``-vectors at offsets that are multiples of ``N``."""
    width: dict[str, int] = {}
    refused: set[str] = set()
    for leaf in _accesses(body):
        b = leaf.buf
        if b.space != "private" or b.scalar or b.dtype not in SCALAR_DTYPES or b.name in refused:
            continue
        w = leaf.width if isinstance(leaf, VecMem) else 1
        aligned = w > 1 and b.count % w == 0 and (leaf.idx // w) * w == leaf.idx
        if not aligned or width.setdefault(b.name, w) != w:
            refused.add(b.name)
    return {name: w for name, w in width.items() if name not in refused}


def _cells(leaf: Mem | VecMem, env: dict) -> set[tuple[str, int]]:
    """The elements (buffer, scalar offset) one access touches, or a set with a marker
    ``(name, -1)`` when its index is not a constant in ``env``."""
    if not leaf.idx.free_vars() <= env.keys():
        return {(leaf.buf.name, -1)}
    try:
        start = leaf.idx.evaluate(env)
    except SymbolicError:  # e.g. an exact division that is not integral: do not reorder
        return {(leaf.buf.name, -1)}
    w = leaf.width if isinstance(leaf, VecMem) else 1
    return {(leaf.buf.name, start + k) for k in range(w)}


def independent_nest(outer: Loop, env: dict) -> Loop | None:
    """The inner loop of ``outer`` when ``outer``'s body is one sequential loop whose body
    is only stores into private memory, and the ``outer.n * inner.n`` iterations are
    independent: no iteration reads or writes an element another iteration writes. Else
    None. Checked by evaluating every index of every iteration (the nest is unrolled, so
    it is small)."""
    if len(outer.body) != 1 or not isinstance(outer.body[0], Loop):
        return None
    inner = outer.body[0]
    if inner.kind != "seq" or not inner.body or \
            not all(isinstance(s, Store) for s in inner.body):
        return None
    if any(s.dest.buf.space != "private" for s in inner.body):
        return None
    written_names = {s.dest.buf.name for s in inner.body}
    reads_of = [[leaf for leaf in leaves_of(s.value) if leaf.buf.name in written_names]
                for s in inner.body]  # reads of other buffers cannot conflict
    written_by: dict[tuple[str, int], int] = {}
    touched: list[set[tuple[str, int]]] = []
    for i in range(outer.n):
        for j in range(inner.n):
            it = {**env, outer.name: i, inner.name: j}
            writes: set[tuple[str, int]] = set()
            reads: set[tuple[str, int]] = set()
            for s, leaves in zip(inner.body, reads_of):
                writes |= _cells(s.dest, it)
                for leaf in leaves:
                    reads |= _cells(leaf, it)
            if any(cell[1] < 0 for cell in writes):
                return None
            k = len(touched)
            for cell in writes:
                if written_by.setdefault(cell, k) != k:
                    return None
            touched.append(reads)
    for k, reads in enumerate(touched):
        for cell in reads:
            if cell[0] in written_names and (cell[1] < 0 or written_by.get(cell, k) != k):
                return None
    return inner
