"""What one iteration of a kernel's innermost reduction costs a CPU core.

A reduction loop whose body applies ``a`` operations per iteration to ``l`` values loaded
from global or local memory is load-bound when ``a / l`` is low: a core issues about as
many vector loads as vector FMAs per cycle, and the index arithmetic and the loop control
take issue slots from both. And its register block (the private accumulators it updates
and the values it stages in private memory) must fit the vector register file, or every
iteration spills. Both are read off the statement tree, in the program's symbolic sizes
(the tile sizes of a tuning space stay parameters), for the cost prior
(``mapper.explore.prior``) and the learned model:

* ``loop_ops``: stores of a computed value per iteration (an accumulator update is one);
* ``loop_loads``: distinct global/local leaves read per iteration: a leaf read inside an
  inner loop whose variable its index does not use is read once for all of that loop's
  iterations (the compiler keeps it in a register);
* ``loop_trips``: iterations of the reduction per work-item (its own and those of the
  sequential loops around it), so that ``work_items * loop_trips * loop_ops`` is the
  operations the kernel performs (more than the program needs where tiles overlap or
  cover padding);
* ``loop_registers``: values held in registers across an iteration: the private
  accumulators updated and the private values staged from memory. Each is one scalar or
  one vector (``codegen.accumulate`` makes a vector accumulator of a dot product's); the
  widths are the tuning's (a vector width is a parameter the prior reads on its own).

The innermost ``reduce`` loop with the most operations is the one described; a kernel
without a reduction has none of these features.
"""

from __future__ import annotations

from collections.abc import Sequence

from codegen.stmt import Loop, Store, leaves_of, walk_stmts
from codegen.views import Call, Leaf, Sel
from ir.errors import LiftmapError
from ir.sym import Cst, Expr


def _trip(lp: Loop) -> Expr:
    """Iterations per work-item: a parallel loop gives each work-item one."""
    if lp.kind != "seq":
        return Cst(1)
    return lp.n_sym if lp.n_sym is not None else Cst(lp.n)


def _product(loops: Sequence[Loop], names: frozenset[str] | None = None) -> Expr:
    """The product of the trip counts of ``loops`` (those whose variable is in ``names``
    when given)."""
    e: Expr = Cst(1)
    for lp in loops:
        if names is None or lp.var.name in names:
            e = e * _trip(lp)
    return e


def _calls(v: Leaf) -> int:
    if isinstance(v, Call):
        return 1 + sum(_calls(a) for a in v.args)
    if isinstance(v, Sel):
        return _calls(v.then) + _calls(v.other)
    return 0


def _describe(loop: Loop) -> dict[str, Expr]:
    ops: Expr = Cst(0)
    loads: Expr = Cst(0)
    regs: Expr = Cst(0)

    def visit(body: list, inner: list[Loop]) -> None:
        nonlocal ops, loads, regs
        for s in body:
            if isinstance(s, Loop):
                visit(s.body, [*inner, s])
            elif isinstance(s, Store):
                leaves = list(leaves_of(s.value))
                for leaf in leaves:
                    if leaf.buf.space != "private":
                        loads = loads + _product(inner, leaf.idx.free_vars())
                private = s.dest.buf.space == "private"
                held = _product(inner, s.dest.idx.free_vars()) if private else None
                if _calls(s.value):
                    ops = ops + _product(inner)
                    if held is not None and any(leaf.buf is s.dest.buf for leaf in leaves):
                        regs = regs + held  # an accumulator
                elif held is not None and leaves and all(
                        leaf.buf.space != "private" for leaf in leaves):
                    regs = regs + held  # a value staged for the iteration

    visit(loop.body, [])
    trips: Expr = Cst(1)  # iterations of the reduction per work-item
    lp: Loop | None = loop
    while lp is not None:
        trips = trips * _trip(lp)
        lp = lp.parent
    return {"loop_ops": ops, "loop_loads": loads, "loop_registers": regs,
            "loop_trips": trips}


def hot_loop_features(stmts: list, env: dict[str, int] | None = None) -> dict[str, Expr]:
    """``loop_ops``, ``loop_loads`` and ``loop_registers`` (see the module docstring) of
    the innermost reduction of a kernel's statements with the most operations at the sizes
    ``env`` (the first such loop where they cannot be evaluated); {} without a reduction."""
    reduces = [s for s in walk_stmts(stmts) if isinstance(s, Loop) and s.what == "reduce"]
    inner = [lp for lp in reduces
             if not any(isinstance(s, Loop) and s.what == "reduce" for s in walk_stmts(lp.body))]
    best: dict[str, Expr] = {}
    best_ops = -1.0
    for lp in inner:
        d = _describe(lp)
        try:
            n = float(d["loop_ops"].evaluate(env or {}))
        except (LiftmapError, ArithmeticError):  # a size not given: the first loop found
            n = 0.0
        if n > best_ops:
            best, best_ops = d, n
    return best
