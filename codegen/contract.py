"""Multiply-adds: ``add(c, mult(a, b))`` in a kernel's values becomes one fused call.

User functions become C functions (``uf_add_x16``: ``return a + b;``), and Clang contracts a
multiply and an add into an FMA only inside one expression, never across two calls, even
with ``-cl-mad-enable``: ``acc = uf_add_x16(acc, uf_mult_x16(x, w))`` runs as ``vmulps`` +
``vaddps``. This pass rewrites every call of an addition of its two parameters one of whose
arguments is a call of a multiplication of its two parameters (the C bodies exactly
``a + b`` and ``a * b``, either order: :func:`codegen.accumulate.body_is`), where both
factors, the addend and the result have one float type (``float`` or one ``floatN``), into
``liftmap_mad_floatN(a, b, c)``: a helper whose body is the single expression
``a * b + c``. Nested values and both branches of a padding select are rewritten too.

Why a helper and not a builtin (measured on PoCL 3.1, LLVM 15, AMD Zen 5: objdump of the
work-group function PoCL built for a ``float16`` loop, built with ``-cl-mad-enable``)::

    c = mad(a, b, c)                  vmulps + vaddps (PoCL's mad is not fused)
    c = fma(a, b, c)                  vfmadd231ps zmm
    c = a * b + c                     vfmadd231ps zmm (also without -cl-mad-enable)
    c = liftmap_mad_float16(a, b, c)  vfmadd231ps zmm (this pass's helper, inlined)
    c = add(c, mul(a, b))             vmulps + vaddps (two calls: never contracted)

and the same for a ``float`` loop (``vfmadd231ss``, or ``vmulss`` + ``vaddss`` for ``mad``).
``mad`` gains nothing here; ``fma`` must be correctly rounded, so a device without FMA
hardware emulates it, and :class:`codegen.target.Device` does not record whether a device
has FMA. ``a * b + c`` in one expression is contracted by OpenCL C's default
``FP_CONTRACT`` (which ``-cl-mad-enable`` allows too) into LLVM's ``fmuladd``: an FMA where
the target has one, a multiply and an add where it has none (LLVM's definition; no such
device was measured). Results change in their last bits (a fused product is not rounded
on its own), well within the tolerances of the checks against the reference interpreter.

**Where a chain is the bottleneck, the multiply-add waits.** An accumulation
``acc = add(acc, mult(a, b))`` whose loop updates only a few accumulators per iteration
runs at the latency of its update chain, not the throughput of the units: a fused update
takes the FMA's latency (4 cycles on Zen 3-5) where the unfused one takes only the
addition's (2 on Zen 5, 3 on Zen 3 and 4; the product is off the chain). A scalar plain
matmul with one accumulator ran 2.0x slower contracted (Zen 5: 116 against 59 ms at
512^3). So an accumulation is contracted only where its loop body makes at least
:data:`MIN_CHAINS` such updates per iteration (a register block), enough independent chains
to hide the longer latency (the updates beside it, times the iterations of the register
block's loops around it); a value that is not an accumulation is always contracted.
"""

from __future__ import annotations

from codegen.accumulate import body_is
from codegen.stmt import Loop, Store
from codegen.views import Call, Leaf, Mem, Sel, VecMem
from ir.nodes import UserFun
from ir.types import ScalarType, Type, VectorType

HELPER_PREFIX = "liftmap_mad_"
MIN_CHAINS = 4  # accumulator updates per loop iteration from which fused updates win


def float_ctype(t: Type) -> str | None:
    """The OpenCL C name of ``t`` when it is ``float`` or a ``floatN`` of a constant width
    (``float`` for width 1), else None."""
    if isinstance(t, ScalarType):
        return "float" if t.name == "float" else None
    if isinstance(t, VectorType) and t.elem.name == "float" and t.width.is_const:
        w = t.width.as_int()
        return "float" if w == 1 else f"float{w}"
    return None


def mad_source(ctype: str) -> str:
    """The helper computing ``a * b + c`` in ``ctype`` (one expression: contracted)."""
    return (f"{ctype} {HELPER_PREFIX}{ctype}({ctype} a, {ctype} b, {ctype} c) "
            "{ return a * b + c; }")


def _is(fun_of: dict[str, UserFun], v: Leaf, op: str) -> bool:
    if not (isinstance(v, Call) and len(v.args) == 2):
        return False
    uf = fun_of.get(v.fname)
    return uf is not None and body_is(uf, op)


def contract_value(v: Leaf, fun_of: dict[str, UserFun], used: set[str]) -> Leaf:
    """``v`` with every ``add(c, mult(a, b))`` or ``add(mult(a, b), c)`` of one float type
    made a call of the helper ``liftmap_mad_<type>(a, b, c)`` (innermost first); the C types
    of the helpers it calls are added to ``used``. An unchanged value is returned itself."""
    if isinstance(v, Sel):
        then, other = contract_value(v.then, fun_of, used), contract_value(v.other, fun_of, used)
        return v if then is v.then and other is v.other else Sel(v.conds, then, other)
    if not isinstance(v, Call):
        return v
    args = tuple(contract_value(a, fun_of, used) for a in v.args)
    if any(a is not b for a, b in zip(args, v.args)):
        v = Call(v.fname, args, v.type)
    if not _is(fun_of, v, "add"):
        return v
    ctype = float_ctype(v.type)
    if ctype is None:
        return v
    for k in (1, 0):  # the product: the second argument first (``add(acc, mult(x, y))``)
        prod, addend = v.args[k], v.args[1 - k]
        if not _is(fun_of, prod, "mult"):
            continue
        assert isinstance(prod, Call)
        x, y = prod.args
        if all(float_ctype(t) == ctype for t in (x.type, y.type, addend.type)):
            used.add(ctype)
            return Call(HELPER_PREFIX + ctype, (x, y, addend), v.type)
    return v


def _accumulates(s: Store, fun_of: dict[str, UserFun]) -> bool:
    """Whether ``s`` is ``d = add(d, mult(a, b))`` (either order): an accumulation."""
    v = s.value
    if not _is(fun_of, v, "add"):
        return False
    assert isinstance(v, Call)
    for k in (0, 1):
        acc, prod = v.args[k], v.args[1 - k]
        if _is(fun_of, prod, "mult") and isinstance(acc, (Mem, VecMem)) \
                and acc.buf is s.dest.buf and acc.idx == s.dest.idx:
            return True
    return False


def contract_multiply_adds(stmts: list, fun_of: dict[str, UserFun]) -> list[tuple[str, str]]:
    """Rewrites, in place, the value of every store of ``stmts`` with
    :func:`contract_value`, but an accumulation with fewer than :data:`MIN_CHAINS`
    independent chains: the accumulations beside it in its loop body, times the
    iterations of the loops around it that update another accumulator each (a register
    block: their variables index the accumulator). Returns the helper functions the values
    now call, as ``(name, source)`` pairs."""
    used: set[str] = set()

    def chains(s: Store, beside: int, around: list[Loop]) -> int:
        n, names = beside, s.dest.idx.free_vars()
        for lp in reversed(around):
            if lp.var.name not in names:
                break  # the loop the chain runs along (a reduction's)
            n *= max(1, lp.n)
        return n

    def visit(body: list, around: list[Loop]) -> None:
        beside = sum(1 for s in body if isinstance(s, Store) and _accumulates(s, fun_of))
        for s in body:
            if isinstance(s, Loop):
                visit(s.body, [*around, s])
            elif isinstance(s, Store):
                if _accumulates(s, fun_of) and chains(s, beside, around) < MIN_CHAINS:
                    continue  # a latency-bound chain: the unfused update is shorter
                s.value = contract_value(s.value, fun_of, used)

    visit(stmts, [])
    return [(HELPER_PREFIX + t, mad_source(t)) for t in sorted(used)]
