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
  sequential loops around it; a loop in lanes counts its vectors), so that
  ``work_items * loop_trips * loop_ops`` times the vector width is the
  operations the kernel performs (more than the program needs where tiles overlap or
  cover padding);
* ``loop_registers``: the private accumulators an iteration updates, held in registers
  across it. Each is one scalar or one vector (``codegen.accumulate`` makes a vector
  accumulator of a dot product's); the widths are the tuning's (a vector width is a
  parameter the prior reads on its own).
* ``loop_operands``: registers the operands of an iteration take at once, at best: the
  loads of its computations, and the values it stages in private memory, are grouped by
  the register-block loops (written inside the reduction, or added by the search) their
  index uses (an outer product's ``uK`` weight vectors use ``k``, its ``uX`` inputs
  ``x``; a convolution's ``sigma`` staged inputs the staging loop's variable); the
  largest group streams through one register while every other group is held for its
  reuse (``uK x uX`` holds ``min(uK, uX) + 1``: 6 staged inputs x 2 weight vectors hold
  3, not 6 + 1).

A map around the reduction that runs in lanes or unrolled (a search's register block,
``u*``: ``codegen.lanes.jam`` runs its iterations inside the reduction) multiplies the
operations and the registers by its iterations in vectors, and the loads whose index
uses its variable; its iterations are then not counted in ``loop_trips`` (a plain matmul
blocked ``uA`` x ``uB`` does ``uA*uB`` operations on ``uA + uB`` loads per iteration). A
load whose lanes are not contiguous in a loop in lanes (a gather) counts one load per
lane.

The innermost ``reduce`` loop with the most operations is the one described; a kernel
without a reduction has none of these features.
"""

from __future__ import annotations

from collections.abc import Sequence

from codegen.lanes import access_stride
from codegen.stmt import Loop, Store, leaves_of, walk_stmts
from codegen.views import Call, Leaf, Sel
from ir.errors import LiftmapError
from ir.sym import Cst, Expr
from ir.sym_expr import smax


def _trip(lp: Loop) -> Expr:
    """Iterations per work-item (a loop in lanes: in vectors); a parallel loop gives each
    work-item one."""
    if lp.kind != "seq":
        return Cst(1)
    n = lp.n_sym if lp.n_sym is not None else Cst(lp.n)
    return n / lp.width_sym if lp.width_sym is not None else n


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


def _jammed(child: Loop) -> bool:
    """Whether ``child``'s parent is a map in lanes (or unrolled, one lane) around it that
    ``codegen.lanes.jam`` runs inside it as a register block: its only other loops run
    once."""
    lp = child.parent
    return (lp is not None and lp.kind == "seq" and lp.is_map and lp.width_sym is not None
            and all(s is child or (s.n <= 1 and (s.n_sym is None or s.n_sym.is_const))
                    for s in lp.body if isinstance(s, Loop)))


def _describe(loop: Loop) -> dict[str, Expr]:
    ops: Expr = Cst(0)
    loads: Expr = Cst(0)
    regs: Expr = Cst(0)
    groups: dict[frozenset[str], Expr] = {}  # loads by the block loops their index uses
    # the maps around the reduction that run inside it as a register block (the search's
    # unrolled maps, ``u*``): each iteration of the reduction does their work
    blocks: list[Loop] = []
    lp: Loop | None = loop
    while lp is not None and _jammed(lp):
        assert lp.parent is not None
        blocks.append(lp.parent)
        lp = lp.parent

    def per(loops: Sequence[Loop], names: frozenset[str] | None = None) -> Expr:
        e = _product(loops, names)
        for b in blocks:
            if names is None or b.var.name in names:
                e = e * _trip(b)
        return e

    def gathered(idx: Expr, loops: Sequence[Loop]) -> Expr:
        """The lanes of a load that are not contiguous in a loop in lanes: each a load of
        its own (a gather), 1 for a vector load or a broadcast."""
        e: Expr = Cst(1)
        for lp in loops:
            w = lp.width_sym
            if w is not None and not w.is_const and access_stride(idx, lp.var, 2) is None:
                e = e * w
        return e

    def visit(body: list, inner: list[Loop]) -> None:
        nonlocal ops, loads, regs
        for s in body:
            if isinstance(s, Loop):
                visit(s.body, [*inner, s])
            elif isinstance(s, Store):
                leaves = list(leaves_of(s.value))
                computed = _calls(s.value) > 0
                block_vars = frozenset(b.var.name for b in [*inner, *blocks])
                for leaf in leaves:
                    if leaf.buf.space != "private":
                        n = per(inner, leaf.idx.free_vars()) * gathered(
                            leaf.idx, [loop, *inner, *blocks])
                        loads = loads + n
                        if computed:  # an operand (a staged value is counted in regs)
                            used = block_vars & leaf.idx.free_vars()
                            groups[used] = groups.get(used, Cst(0)) + n
                private = s.dest.buf.space == "private"
                # a private value declared in the block: one copy per block iteration
                held = per(inner, s.dest.idx.free_vars() | {b.var.name for b in blocks}) \
                    if private else None
                if _calls(s.value):
                    ops = ops + per(inner)
                    if held is not None and any(leaf.buf is s.dest.buf for leaf in leaves):
                        regs = regs + held  # an accumulator
                elif held is not None and leaves and all(
                        leaf.buf.space != "private" for leaf in leaves):
                    # a value staged for the iteration: an operand group of its own
                    used = block_vars & s.dest.idx.free_vars()
                    groups[used] = groups.get(used, Cst(0)) + held

    visit(loop.body, [])
    trips: Expr = Cst(1)  # iterations of the reduction per work-item
    lp = loop
    while lp is not None:
        if not any(lp is b for b in blocks):  # a block's iterations are in ops
            trips = trips * _trip(lp)
        lp = lp.parent
    operands: Expr = Cst(0)
    if groups:
        sizes = list(groups.values())
        total, largest = sizes[0], sizes[0]
        for n in sizes[1:]:
            total, largest = total + n, smax(largest, n)
        operands = total - largest + 1
    return {"loop_ops": ops, "loop_loads": loads, "loop_registers": regs,
            "loop_operands": operands, "loop_trips": trips}


def hot_loop_features(stmts: list, env: dict[str, int] | None = None) -> dict[str, Expr]:
    """``loop_ops``, ``loop_loads``, ``loop_registers``, ``loop_operands`` and
    ``loop_trips`` (see the module docstring) of
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
