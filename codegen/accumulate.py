"""Vector accumulators: dot-product reductions accumulate in ``floatN`` registers.

A sequential loop ``L`` (a ``reduce``, or any ``mapSeq``) whose body updates a private
float ``B[e] = add(B[e], dot(x, y))`` (``x``, ``y`` of type ``floatN``; ``add`` a user
function ``a + b``, ``dot`` one that is ``dot(a, b)``) spends most of its time in the
horizontal sum of every ``dot``. This pass rewrites such a loop so that it keeps one
``floatN`` accumulator per execution of the update inside one iteration of ``L`` (a
*slot*: one per iteration of the sequential loops between ``L`` and the update)::

    floatN V[slots] = 0;                        // before L
    for r ...  V[slot] = fma(x, y, V[slot]);     // in L, instead of the update
    B[e] = add(B[e], hsumN(V[slot]));            // after L, in the same loops, same order

Every ``B[e]`` then receives the same products as before, summed in another order:
lanes first, then over ``r``, then the horizontal sum, instead of one horizontal sum per
``r``. This is a reassociation of float additions and nothing else (the products are
fused with the additions by ``fma``; ``-cl-mad-enable`` allows the same contraction
elsewhere): results match a float64 reference within ``mapper.candidates.
reduction_tolerance``, not bit for bit the unrewritten kernel.

The rewrite applies only when nothing else in ``L`` reads or writes ``B``, the update's
index does not depend on ``L``'s variable, every loop between ``L`` and the update is
sequential, and the slots fit :data:`MAX_SLOTS` (so the accumulators can stay in
registers); otherwise the loop is left as it is.
"""

from __future__ import annotations

import math
import re

from codegen.memory import Buf
from codegen.stmt import Decl, Loop, Store, leaves_of
from codegen.views import Call, Const, Mem
from ir.nodes import UserFun
from ir.sym import Cst, Expr
from ir.types import ScalarType, VectorType

MAX_SLOTS = 64  # vector accumulators per loop (16 float16 registers x 4 cover AVX-512)
_WIDTHS = (2, 3, 4, 8, 16)


_OPERATORS = {"add": "{}+{}", "mult": "{}*{}", "dot": "dot({},{})"}


def body_is(uf: UserFun, op: str) -> bool:
    """True when ``uf``'s C body is exactly ``a + b`` (op ``add``), ``a * b`` (``mult``) or
    ``dot(a, b)`` (``dot``) of its two parameters, in either order (spaces, a ``return``,
    the ``;`` and, for the infix operators, one pair of parentheses aside)."""
    if uf.arity != 2:
        return False
    a, b = uf.param_names
    body = re.sub(r"\s+", " ", uf.c_body.strip()).removeprefix("return ").rstrip(";").strip()
    body = body.replace(" ", "")
    form = _OPERATORS[op]
    forms = {form.format(a, b), form.format(b, a)}
    if op != "dot":
        forms |= {f"({f})" for f in forms}
    return body in forms


def hsum_source(fname: str, w: int) -> str:
    """A C function summing the ``w`` lanes of a ``floatw`` (pairwise halves)."""
    if w == 3:
        return f"float {fname}(float3 v) {{ return v.x + v.y + v.z; }}"
    lines, cur, width = [], "v", w
    while width > 2:
        half = width // 2
        t = f"float{half}" if half > 1 else "float"
        nxt = f"h{half}"
        lines.append(f"{t} {nxt} = {cur}.lo + {cur}.hi;")
        cur, width = nxt, half
    return (f"float {fname}(float{w} v) {{ {' '.join(lines)} return {cur}.x + {cur}.y; }}"
            if lines else f"float {fname}(float2 v) {{ return v.x + v.y; }}")


class _Match:
    __slots__ = ("store", "chain", "x", "y", "acc_first", "add_name", "width")

    def __init__(self, store, chain, x, y, acc_first, add_name, width):
        self.store, self.chain, self.x, self.y = store, chain, x, y
        self.acc_first, self.add_name, self.width = acc_first, add_name, width


def _match_update(s: Store, fun_of: dict) -> tuple | None:
    """``(x, y, acc_first, add_name, width)`` when ``s`` is ``B[e] = add(B[e], dot(x, y))``."""
    d, v = s.dest, s.value
    if s.conds or not (isinstance(d, Mem) and d.buf.space == "private" and d.buf.dtype == "float"):
        return None
    if not (isinstance(v, Call) and len(v.args) == 2):
        return None
    uf = fun_of.get(v.fname)
    if uf is None or not body_is(uf, "add") or not all(
            isinstance(a.type, ScalarType) for a in v.args):
        return None
    for k in (0, 1):
        acc, other = v.args[k], v.args[1 - k]
        if not (isinstance(acc, Mem) and acc.buf is d.buf and acc.idx == d.idx):
            continue
        if not (isinstance(other, Call) and len(other.args) == 2):
            continue
        g = fun_of.get(other.fname)
        if g is None or not body_is(g, "dot"):
            continue
        x, y = other.args
        if not (isinstance(x.type, VectorType) and isinstance(y.type, VectorType)):
            continue
        w = x.type.width.as_int()
        if w not in _WIDTHS or y.type.width.as_int() != w:
            continue
        return x, y, k == 0, v.fname, w
    return None


def _reads(leaf, buf) -> int:
    return sum(1 for m in leaves_of(leaf) if m.buf is buf)


def _candidates(lp: Loop, fun_of: dict) -> dict:
    """Buffers of ``lp``'s body whose every access is one matched update: buf -> _Match."""
    found: dict = {}
    bad: set = set()
    access: dict = {}

    def visit(stmts, chain, seq_only):
        for s in stmts:
            if isinstance(s, Loop):
                visit(s.body, (*chain, s), seq_only and s.kind == "seq")
            elif isinstance(s, Store):
                for m in leaves_of(s.value):
                    access[id(m.buf)] = access.get(id(m.buf), 0) + 1
                access[id(s.dest.buf)] = access.get(id(s.dest.buf), 0) + 1
                hit = _match_update(s, fun_of) if seq_only else None
                if hit is None or id(s.dest.buf) in found or lp.name in s.dest.idx.free_vars():
                    bad.add(id(s.dest.buf))
                    continue
                found[id(s.dest.buf)] = _Match(s, chain, *hit)
            elif isinstance(s, Decl):
                bad.add(id(s.buf))

    visit(lp.body, (), True)
    out = {}
    for k, m in found.items():
        # the update reads B once and writes it once; nothing else touches B in the loop
        if k in bad or access.get(k, 0) != 2:
            continue
        if _reads(m.x, m.store.dest.buf) or _reads(m.y, m.store.dest.buf):
            continue
        slots = math.prod(c.n for c in m.chain)
        if slots > MAX_SLOTS:
            continue
        out[k] = m
    return out


def _slot(chain: tuple) -> Expr:
    e: Expr = Cst(0)
    for c in chain:
        e = e * c.n + c.var
    return e


def _in_chain(chain: tuple, make_body, what: str, parent) -> list:
    """Statements running ``make_body()`` for every iteration of copies of ``chain``'s loops."""
    if not chain:
        body = make_body()
        for s in body:
            s.parent = parent
        return body
    c = chain[0]
    lp = Loop("seq", None, c.var, c.n, c.label, what, parent=parent)
    lp.body = _in_chain(chain[1:], make_body, what, lp)
    return [lp]


def vector_accumulate(stmts: list, fun_of: dict, names: set,
                      max_bytes: int | None = None) -> tuple[list[Buf], list[tuple[str, str]]]:
    """Rewrites, in place, every sequential loop of ``stmts`` that qualifies (see the module
    docstring), as long as the accumulators of all rewritten loops take at most
    ``max_bytes`` of private memory per work-item (an optimisation never makes a kernel
    exceed its private budget). Returns the new private buffers and the C helper functions
    they need (``(name, source)`` pairs)."""
    new_bufs: list[Buf] = []
    room = [max_bytes]
    helpers: dict[int, str] = {}

    def fresh(base: str) -> str:
        name, k = base, 0
        while name in names:
            k += 1
            name = f"{base}_{k}"
        names.add(name)
        return name

    def rewrite(lst: list, parent) -> None:
        i = 0
        while i < len(lst):
            s = lst[i]
            if not isinstance(s, Loop):
                i += 1
                continue
            rewrite(s.body, s)
            if s.kind != "seq" or s.n < 2:
                i += 1
                continue
            before, after = [], []
            cands = list(_candidates(s, fun_of).values())
            need = sum(math.prod(c.n for c in m.chain) * 4 * m.width for m in cands)
            if room[0] is not None:
                if need > room[0]:
                    i += 1
                    continue
                room[0] -= need
            for m in cands:
                b = m.store.dest.buf
                w = m.width
                vt = VectorType(ScalarType("float"), w)
                slots = math.prod(c.n for c in m.chain)
                vbuf = Buf(fresh(f"vacc_{b.cname}"), "private", f"float{w}", slots, "acc",
                           b.label, scalar=slots == 1, alloc_loops=b.alloc_loops)
                new_bufs.append(vbuf)
                hname = f"liftmap_hsum{w}"
                helpers.setdefault(w, hsum_source(hname, w))
                slot = _slot(m.chain)
                before.append(Decl(vbuf, parent=parent))
                before += _in_chain(m.chain, lambda vb=vbuf, sl=slot, t=vt: [
                    Store(Mem(vb, sl, t), Const(0.0, t))], "vector accumulators: zero", parent)
                st = m.store
                idx, ft = st.dest.idx, st.dest.type
                st.value = Call("fma", (m.x, m.y, Mem(vbuf, slot, vt)), vt)
                st.dest = Mem(vbuf, slot, vt)

                def final(b=b, idx=idx, ft=ft, vbuf=vbuf, slot=slot, vt=vt, hname=hname,
                          m=m) -> list:
                    acc = Mem(b, idx, ft)
                    part = Call(hname, (Mem(vbuf, slot, vt),), ft)
                    args = (acc, part) if m.acc_first else (part, acc)
                    return [Store(Mem(b, idx, ft), Call(m.add_name, args, ft))]

                after += _in_chain(m.chain, final, "vector accumulators: horizontal sums",
                                   parent)
            lst[i:i + 1] = [*before, s, *after]
            i += len(before) + 1 + len(after)

    rewrite(stmts, None)
    return new_bufs, [(f"liftmap_hsum{w}", helpers[w]) for w in sorted(helpers)]
