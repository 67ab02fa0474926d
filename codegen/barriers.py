"""Dependences between work-items: barriers, synchronizability and the scope checks.

Every store and every memory read of a kernel is an *access* with a flat index over the
loop variables around it. Given the launch configuration, the variable of a
work-distribution loop is replaced by its thread decomposition (``i = l0 + L*k`` for a
``mapLcl(0)`` loop with ``L`` threads, ``i = l0`` when it runs once per thread), so an
index becomes an expression over thread ids (``_g0``, ``_wg0``, ``_l0``) and per-thread
loop counters.

*Ownership*: a write index ``W = c0 + sum c_v * v`` with positive coefficients lets us
read the writer's thread id back from any element: ``digit_t(x) = (x - c0)//c_t % m_t``.
A reader at index ``R`` reads only what it wrote itself when ``digit_t(R)`` simplifies
to its own ``t`` for every thread id ``t`` of the writer (CC'22 Table 1, M6). Otherwise
the ids that differ classify the dependence:

* only local ids differ: the two statements are in one work-group and a barrier
  between them suffices (M4) -- unless the barrier would sit in a loop whose trip count
  differs between the work-items of a group (:class:`SynchronizabilityError`, CC'22 4.6);
* group ids differ: local memory -> :class:`MemoryScopeError` (M3), global memory ->
  :class:`CrossGroupDependencyError`;
* ``mapGlb`` ids differ: :class:`CrossGroupDependencyError` (M2: no global barrier);
* private memory read by another work-item: :class:`MemoryScopeError`.

The same digits check every write for races: each thread id that varies among the
work-items executing a store must be recoverable from the written index
(:class:`DataRaceError`, the redundant execution CC'22 rule 7 forbids).
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.buffers import Buf
from codegen.errors import (
    CrossGroupDependencyError,
    DataRaceError,
    LoweringError,
    MemoryScopeError,
    SynchronizabilityError,
)
from codegen.launch import LaunchConfig, uniform_in_group
from codegen.stmt import Barrier, Loop, Store, leaves_of, walk_stmts
from codegen.views import VecMem, lane_var
from ir.sym import Cst, Expr, Rel, Var

# ----------------------------------------------------------------- thread substitution


def thread_vars(cfg: LaunchConfig) -> dict[int, list[tuple[str, int, str]]]:
    """Per dimension: (name, count, class) of the thread ids (class glb, grp or lcl)."""
    out: dict[int, list[tuple[str, int, str]]] = {}
    for d, m in cfg.modes.items():
        if m == "glb":
            out[d] = [(f"_g{d}", cfg.global_size[d], "glb")]
        elif m in ("grp", "mixed"):
            ld = cfg.local[d]
            assert ld is not None  # configure() gives every group dimension a local size
            out[d] = [(f"_wg{d}", cfg.groups[d], "grp"), (f"_l{d}", ld, "lcl")]
        else:
            out[d] = []
    return out


def loop_subst(lp: Loop, cfg: LaunchConfig) -> tuple[Expr, dict[str, int]]:
    """The loop variable of a distributed loop in thread ids, and the restricted ranges
    (number of values) of the ids it pins."""
    d, n, t = lp.par_dim, lp.n, lp.threads
    assert t is not None  # configure() sets the threads of every distributed loop
    restricted: dict[str, int] = {}
    if lp.kind == "glb" and cfg.modes[d] == "glb":
        names = [f"_g{d}"]
    elif lp.kind == "glb":  # mapGlb in a dimension that also has groups: g = wg*L + l
        ld = cfg.local[d]
        assert ld is not None  # a group dimension has a local size (configure())
        if n <= ld:  # only the first n work-items of group 0 run it
            restricted.update({f"_wg{d}": 1, f"_l{d}": n})
            return Var(f"_l{d}", 0, n - 1), restricted
        tv = Var(f"_wg{d}", 0, cfg.groups[d] - 1) * ld + Var(f"_l{d}", 0, ld - 1)
        if t >= n:
            return tv, restricted
        return tv + t * Var(f"_k_{lp.name}", 0, -(-n // t) - 1), restricted
    elif lp.kind == "wrg":
        names = [f"_wg{d}"]
    else:
        names = [f"_l{d}"]
    (name,) = names
    if t >= n:
        restricted[name] = n
        return Var(name, 0, n - 1), restricted
    return Var(name, 0, t - 1) + t * Var(f"_k_{lp.name}", 0, -(-n // t) - 1), restricted


@dataclass
class Access:
    """One read or write of a buffer by a store.

    ``idx`` is the index in thread ids (distributed loop variables replaced by their
    decomposition), ``loop_idx`` the index in loop variables; ``dist`` are the
    distributed loops around the store, ``ranges`` the number of values of every thread
    id among the work-items that run it.
    """

    buf: Buf
    idx: Expr
    loop_idx: Expr
    store: Store
    write: bool
    order: int
    ranges: dict[str, int]
    dist: tuple[Loop, ...]
    env: dict[str, Expr]


def ancestors(s) -> list:
    """The loops around a statement, outermost first."""
    out = []
    p = s.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out[::-1]


def collect_accesses(stmts: list, cfg: LaunchConfig) -> list[Access]:
    """Every access of every store, in program order (a store's reads before its write)."""
    tv = thread_vars(cfg)
    full = {name: cnt for vs in tv.values() for name, cnt, _ in vs}
    cache: dict[int, tuple] = {}
    out: list[Access] = []
    order = 0
    for s in walk_stmts(stmts):
        if not isinstance(s, Store):
            continue
        env, pinned, ranges, dist = _store_env(s, cfg, full, cache)
        order += 1
        for leaf in leaves_of(s.value):
            li = _full_index(leaf, pinned)
            out.append(Access(leaf.buf, li.subs(env), li, s, False, order, ranges, dist, env))
        li = _full_index(s.dest, pinned)
        out.append(Access(s.dest.buf, li.subs(env), li, s, True, order, ranges, dist, env))
    return out


def _store_env(s: Store, cfg, full: dict, cache: dict):
    key = id(s.parent)
    hit = cache.get(key)
    if hit is not None:
        return hit
    env: dict[str, Expr] = {}
    pinned: dict[str, Expr] = {}  # loops of one iteration: their variable is 0
    ranges = dict(full)
    dist = []
    for lp in ancestors(s):
        if lp.n == 1:
            pinned[lp.name] = Cst(0)
        if lp.kind in ("glb", "wrg", "lcl"):
            e, restricted = loop_subst(lp, cfg)
            env[lp.name] = e
            ranges.update(restricted)
            dist.append(lp)
    # ids with a single value are 0 (simplification keeps such variables otherwise)
    single = {t: 0 for t, cnt in ranges.items() if cnt <= 1}
    if single:
        env = {k: v.subs(single) for k, v in env.items()}
    hit = cache[key] = (env, pinned, ranges, tuple(dist))
    return hit


def _full_index(leaf, pinned: dict) -> Expr:
    idx = leaf.idx.subs(pinned) if pinned else leaf.idx
    if isinstance(leaf, VecMem) and leaf.width > 1:  # a vector of one lane is its element
        idx = idx + lane_var(leaf.width)
    return idx


def owner_ids(lp: Loop, it: Expr, cfg: LaunchConfig) -> list[tuple[str, Expr]]:
    """The thread ids of the work-item that runs iteration ``it`` of a distributed loop."""
    d, t, n = lp.par_dim, lp.threads, lp.n
    assert t is not None  # configure() sets the threads of every distributed loop
    g = it % t if t < n else it
    if lp.kind == "glb" and cfg.modes[d] != "glb":
        ld = cfg.local[d]
        assert ld is not None  # a group dimension has a local size (configure())
        return [(f"_wg{d}", g // ld), (f"_l{d}", g % ld)]
    name = {"glb": f"_g{d}", "wrg": f"_wg{d}", "lcl": f"_l{d}"}[lp.kind]
    return [(name, g)]


# ---------------------------------------------------------------------------- digits


class Digits:
    """Recovers the variables of an affine write index from an element index."""

    def __init__(self, c0: int, coefs: list[tuple[str, int]]):
        self.c0 = c0
        self.coefs = coefs  # sorted by coefficient
        self.mods: dict[str, int | None] = {}
        self.ok: dict[str, bool] = {}
        for j, (v, c) in enumerate(coefs):
            nxt = coefs[j + 1][1] if j + 1 < len(coefs) else None
            if nxt is None:
                self.mods[v], self.ok[v] = None, True
            else:
                self.mods[v], self.ok[v] = nxt // c, (nxt % c == 0 and nxt > c)
        self.coef = dict(coefs)

    def digit(self, name: str, x: Expr) -> Expr | None:
        """The value of variable ``name`` at the write that wrote element ``x``."""
        if name not in self.coef or not self.ok[name]:
            return None
        q = (x - self.c0) // self.coef[name]
        m = self.mods[name]
        return q if m is None else q % m


def decompose(e: Expr) -> Digits | None:
    """Digits of an affine index with positive integer coefficients, else None."""
    coefs = _affine(e)
    if coefs is None or any(c <= 0 for v, c in coefs.items() if v):
        return None
    return Digits(coefs[""], sorted(((v, c) for v, c in coefs.items() if v),
                                    key=lambda vc: (vc[1], vc[0])))


# ------------------------------------------------------------------- classification


def classify(w: Access, r: Access, kinds: dict[str, str], cfg: LaunchConfig) -> str:
    """``own`` when the reader reads only what it wrote; else the class of thread ids
    that differ: ``lcl`` (same group), ``grp`` (other groups), ``glb`` (other mapGlb
    work-items) or ``unknown`` (index not analysable).

    The writer's loop variables are read back from the element index (:class:`Digits` of
    the write index over loop variables), then the writer's thread ids from them."""
    differ = set()
    # ids pinned to 0 at the writer (a guard lets one work-item write) but not at the reader
    for t, cnt in w.ranges.items():
        if cnt <= 1 < r.ranges.get(t, 1):
            differ.add(kinds[t])
    single = {t: 0 for t, cnt in r.ranges.items() if cnt <= 1}
    dg = None
    for lp in w.dist:
        if lp.name not in w.loop_idx.free_vars():
            continue  # every iteration writes the same elements (a race, reported apart)
        if dg is None:
            dg = decompose(w.loop_idx)
            if dg is None:
                return _unknown_writer(w, r, kinds, cfg)
        it = dg.digit(lp.name, r.loop_idx)  # in the reader's loop variables, then threads
        if it is None:
            return _unknown_writer(w, r, kinds, cfg)
        it = it.subs(r.env)
        for tname, e in owner_ids(lp, it, cfg):
            if tname not in kinds or w.ranges.get(tname, 0) <= 1:
                continue
            want = Var(tname).subs(single) if single else Var(tname)
            if e != want:
                differ.add(kinds[tname])
    return _worst(differ)


def _unknown_writer(w: Access, r: Access, kinds: dict[str, str], cfg: LaunchConfig) -> str:
    """The class when the writer of an element cannot be read back from its index: the
    writer and the reader share the iterations of the distributed loops around both, so
    only the ids of the writer's other distributed loops can differ. When those that vary
    are all local ids, the writer is in the reader's work-group (``lcl``: a barrier
    orders them); else ``unknown``."""
    ids = set()
    for lp in w.dist:
        if any(lp is x for x in r.dist):
            continue
        ids |= {t for t, _ in owner_ids(lp, Var(lp.name), cfg) if w.ranges.get(t, 0) > 1}
    if all(kinds.get(t) == "lcl" for t in ids):
        return "lcl"
    return "unknown"


def _worst(differ: set) -> str:
    for k in ("glb", "grp", "lcl"):
        if k in differ:
            return k
    return "own"


def racing_ids(a: Access, kinds: dict[str, str], cfg: LaunchConfig) -> list[str]:
    """Thread ids that vary among the work-items running this store but cannot be told
    apart by the element it writes (a write-write race); empty when race-free."""
    local_only = a.buf.space == "local"
    varying = []
    for t, cnt in a.ranges.items():
        if cnt <= 1:
            continue
        k = kinds[t]
        if local_only:
            if k == "grp":
                continue
            if k == "glb" and cfg.local.get(int(t[2:])) == 1:
                continue
        varying.append(t)
    if not varying:
        return []
    recovered: set[str] = set()
    parts = [(p, p.free_vars()) for p in _index_parts(a)]
    digits: dict[int, Digits | None] = {}  # each part decomposed once
    for lp in a.dist:
        pi = next((i for i, (_, fv) in enumerate(parts) if lp.name in fv), None)
        if pi is None:
            continue
        part = parts[pi][0]
        if pi not in digits:
            digits[pi] = decompose(part)
        dg = digits[pi]
        if dg is None:  # not analysable: only ask that the ids appear in the index
            recovered |= {t for t, _ in owner_ids(lp, Var(lp.name), cfg)
                          if t in a.idx.free_vars()}
            continue
        it = dg.digit(lp.name, part)
        if it is None:
            continue
        for tname, e in owner_ids(lp, it.subs(a.env), cfg):
            if e == Var(tname):
                recovered.add(tname)
    return [t for t in varying if t not in recovered]


def _index_parts(a: Access) -> list[Expr]:
    """Expressions whose values together name the element a write stores: its index, or,
    for a store guarded by ``0 <= C < m`` (a write into a cropped output), ``C`` and the
    index with ``C`` as one digit ``z`` in ``[0, m)`` (when ``z`` can be read back from
    it, distinct values of ``C`` and of the other variables are distinct elements)."""
    idx = a.loop_idx
    if not a.write or not a.store.conds:
        return [idx]
    pinned = {lp.name: 0 for lp in ancestors(a.store) if lp.n == 1}
    conds = [c.subs(pinned) if pinned else c for c in a.store.conds]
    parts: list[Expr] = []
    for c in conds:
        if c.op != "<" or not c.rhs.is_const:
            continue
        m, low = c.rhs.as_int(), c.lhs
        coefs = _affine(low)  # loop variables are >= 0: so is low with such coefficients
        if m <= 0 or coefs is None or (Rel(">=", low, 0) not in conds
                                        and any(k < 0 for k in coefs.values())):
            continue
        v0 = next((v for v, k in coefs.items() if v and k == 1), None)
        if v0 is None:
            continue
        z = Var(f"_crop{len(parts)}", 0, m - 1)
        folded = idx.subs({v0: z - (low - Var(v0))})
        dg = decompose(folded)
        back = dg.digit(z.name, folded) if dg is not None else None
        if back is None or back != z:
            continue
        parts.append(low)
        idx = folded
    return [*parts, idx]


def _affine(e: Expr) -> dict[str, int] | None:
    """The integer coefficients of an affine expression by variable (``""``: the
    constant), or None."""
    fv = sorted(e.free_vars())
    zero = {v: 0 for v in fv}
    c0 = e.subs(zero)
    if not c0.is_const:
        return None
    out = {"": c0.as_int()}
    rest = e - c0
    for v in fv:
        ce = e.subs({**zero, v: 1}) - c0
        if not ce.is_const:
            return None
        out[v] = ce.as_int()
        rest = rest - out[v] * Var(v)
    return out if rest == 0 else None


# ------------------------------------------------------------------------- analysis


def _path(s) -> list:
    return [*ancestors(s), s]


def _container_index(container: Loop | None, top: list, child) -> int:
    body = top if container is None else container.body
    for i, x in enumerate(body):
        if x is child:
            return i
    raise ValueError("statement not in its parent")  # builtin: internal invariant, a bug if reached


def analyze(stmts: list, cfg: LaunchConfig, map_of: dict,
            synced: list[Loop] | None = None) -> list[LoweringError]:
    """Inserts barriers into ``stmts`` and returns the problems found (not raised).
    ``synced`` receives the loops around a needed barrier, whose trip counts must be the
    same for every work-item of a group (the synchronisability condition)."""
    tv = thread_vars(cfg)
    kinds = {name: cls for vs in tv.values() for name, _, cls in vs}
    accs = collect_accesses(stmts, cfg)
    issues: list[LoweringError] = []
    seen_race: set[int] = set()
    for a in accs:
        if a.write and a.buf.space in ("global", "local") and id(a.store) not in seen_race:
            bad = racing_ids(a, kinds, cfg)
            if bad:
                seen_race.add(id(a.store))
                issues.append(_race_error(a, bad, map_of))

    writes: dict[int, list[Access]] = {}
    for a in accs:
        if a.write:
            writes.setdefault(id(a.buf), []).append(a)
    needs: dict[tuple, dict] = {}  # (container id) -> {...}
    done: set[tuple] = set()
    for r in accs:
        if r.write or r.buf.role == "input":
            continue
        for w in writes.get(id(r.buf), ()):
            if w.order > r.order:
                continue
            key = (id(w.store), id(r.store), id(r.buf), str(r.idx))
            if key in done:
                continue
            done.add(key)
            cls = classify(w, r, kinds, cfg)
            if cls == "own":
                continue
            issue = _place(w, r, cls, stmts, cfg, needs, map_of, synced)
            if issue is not None:
                issues.append(issue)
    _insert_barriers(stmts, needs)
    return issues


def _place(w: Access, r: Access, cls: str, top: list, cfg: LaunchConfig, needs: dict,
           map_of: dict, synced: list[Loop] | None = None) -> LoweringError | None:
    space = r.buf.space
    where = f"{_who(w.store, map_of)} writes {r.buf.name} and {_who(r.store, map_of)} reads it"
    if space == "private":
        return MemoryScopeError(
            f"{where} from another work-item, but {r.buf.name} is private memory (one per "
            "work-item); keep the producer and the consumer in the same work-item (make the "
            "maps between them mapSeq) or use local/global memory (CC'22 rule 1)")
    if cls in ("glb", "unknown") or (cls == "grp" and space == "global"):
        why = ("from other mapGlb work-items" if cls == "glb" else
               "from other work-groups" if cls == "grp" else
               "at an index whose writer cannot be determined")
        return CrossGroupDependencyError(
            f"{where} {why} in the same kernel; OpenCL has no barrier across work-groups "
            "(CC'22 Table 1, M2); map the producer and the consumer so that each work-item "
            "(or each work-group, with mapWrg/mapLcl) reads what it wrote")
    if cls == "grp":
        return MemoryScopeError(
            f"{where} from another work-group, but {r.buf.name} is local memory, private to "
            "a work-group (CC'22 Table 1, M3); distribute both over the same mapWrg or use "
            "global memory")
    pw, pr = _path(w.store), _path(r.store)
    p = 0
    while p < min(len(pw), len(pr)) and pw[p] is pr[p]:
        p += 1
    if p == len(pw) or p == len(pr):
        return DataRaceError(
            f"{where} in the same statement from another work-item of the group; no "
            "barrier can separate them")
    container = pw[p - 1] if p > 0 else None
    iw = _container_index(container, top, pw[p])
    ir = _container_index(container, top, pr[p])
    chain = _path(container) if container is not None else []
    if synced is not None:
        synced.extend(lp for lp in chain if all(lp is not x for x in synced))
    for lp in chain:
        if not uniform_in_group(lp, cfg):
            return SynchronizabilityError(
                f"{where}, so a barrier is needed between them, inside {lp.what} ({lp.n} "
                f"iterations over {lp.threads} threads): work-items of a group run different "
                "numbers of iterations and would wait at the barrier forever (CC'22 Section "
                "4.6); choose sizes or local sizes that divide the trip count")
    fence = "local" if space == "local" else "global"
    ent = needs.setdefault(id(container), {"container": container, "intervals": [],
                                           "end": set(), "why": {}})
    if iw < ir:
        ent["intervals"].append((iw, ir, fence))
        ent["why"].setdefault(ir, where)
    elif container is not None:
        ent["end"].add(fence)
    if any(_loop_repeats(lp) and _reused_by(r.buf, lp) for lp in chain):
        ent["end"].add(fence)  # the next iteration rewrites what slower work-items read
    return None


def _loop_repeats(lp: Loop) -> bool:
    if lp.kind == "seq":
        return lp.n > 1
    return lp.threads is not None and lp.threads < lp.n


def _reused_by(buf, lp: Loop) -> bool:
    return any(x is lp for x in buf.alloc_loops) and not any(x is lp for x in buf.expanded_by)


def _insert_barriers(top: list, needs: dict) -> None:
    for ent in needs.values():
        container = ent["container"]
        body = top if container is None else container.body
        placed: dict[int, set] = {}
        for iw, ir, fence in sorted(ent["intervals"], key=lambda x: (x[1], x[0])):
            hit = next((k for k in placed if iw < k <= ir), None)
            if hit is None:
                placed[ir] = {fence}
            else:
                placed[hit].add(fence)
        for pos in sorted(placed, reverse=True):
            b = Barrier(frozenset(placed[pos]), ent["why"].get(pos, ""), container)
            body.insert(pos, b)
        if ent["end"] and container is not None:
            body.append(Barrier(frozenset(ent["end"]), "before the next iteration reuses "
                                "the buffer", container))


def _who(s: Store, map_of: dict) -> str:
    for lp in reversed(ancestors(s)):
        if lp.is_map:
            return map_of.get(id(lp), lp.what)
    return "the kernel's top level"


def _race_error(a: Access, bad: list[str], map_of: dict) -> DataRaceError:
    ids = ", ".join(_id_text(t) for t in bad)
    return DataRaceError(
        f"{_who(a.store, map_of)} writes {a.buf.name} ({a.buf.space} memory) at {a.idx.to_c()}, "
        f"the same elements for every value of {ids}: every such work-item runs it "
        "redundantly and they race (CC'22 rule 7: use every parallel dimension in every map "
        "nest); parallelise a map of this nest in that dimension or make the other nests "
        "sequential")


def _id_text(t: str) -> str:
    if t.startswith("_wg"):
        return f"the group id {t[3:]}"
    if t.startswith("_l"):
        return f"the local id {t[2:]}"
    return f"the global id {t[2:]}"


def private_bytes(bufs) -> int:
    """Bytes of private memory one work-item allocates."""
    return sum(b.nbytes for b in bufs if b.space == "private")


def local_bytes(bufs) -> int:
    """Bytes of local memory one work-group allocates."""
    return sum(b.nbytes for b in bufs if b.space == "local")


