"""Tuning search space: parameters with finite domains, restrictions, exact counting and
uniform sampling without materialising the Cartesian product.

How the space is built (see ``docs/tuning-space.md``):

1. Every restriction (string, callable or :class:`Restriction`) is compiled twice, scalar and
   numpy-vectorised (``constraints.restrictions``).
2. A dependency graph links the parameters that share a restriction; its connected components
   are independent *groups*, and the space is the product of the groups' valid rows.
3. Within a group the parameters get an order (``space.order``) minimising the estimated
   rows generated, from each restriction's measured selectivity (all orders up to 4
   parameters, a dynamic programme over subsets up to 16, greedy above).  Orienting the
   dependency edges along it gives a DAG whose topological order it is; each restriction is
   checked as soon as its last parameter is bound (the GPGPU'20 paper's "parameter
   ordering", Section 5.3).
4. A group's valid rows are built column by column: the partial table is repeated times the
   next domain and filtered with the vectorised restrictions that just became fully bound,
   in chunks of at most ``chunk_rows`` rows.  Rows are stored as domain indices (uint8 for
   domains of up to 256 values).
5. A configuration's index is a mixed-radix number over the groups (last group fastest),
   so counting, indexing, membership and uniform sampling never touch the product.

Kernel Tuner's forms are accepted as they are: ``restrictions=None``, a single function, a
callable taking the configuration as a dict (``lambda p: p["block_size_x"] > 1``) and, with
``max_threads=``, its implicit limit on the product of the block sizes.  A group whose valid
rows would exceed ``max_rows`` (estimated before enumerating it, checked while enumerating)
raises :class:`SpaceTooLargeError` instead of running out of memory.

An empty space is not an error at construction: ``count() == 0``, :meth:`explain_empty`
names the restriction after which a group became empty, and indexing, sampling or
:meth:`require_nonempty` raise :class:`EmptySpaceError` with that text.  Iterating an empty
space yields nothing.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import operator
import random
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from constraints.restrictions import (
    EmptyParameterDomainError,
    EmptySpaceError,
    LateRestrictionWarning,
    NotAPredicateError,
    Restriction,
    RestrictionEvaluationError,
    RestrictionSyntaxError,
    SpaceError,
    SpaceTooLargeError,
    UnknownNameError,
    parse_restriction,
    restriction_from_callable,
)

__all__ = [
    "SearchSpace",
    "Restriction",
    "SpaceError",
    "UnknownNameError",
    "NotAPredicateError",
    "RestrictionSyntaxError",
    "EmptyParameterDomainError",
    "EmptySpaceError",
    "RestrictionEvaluationError",
    "SpaceTooLargeError",
    "LateRestrictionWarning",
    "MAX_ROWS",
    "KERNEL_TUNER_BLOCK_SIZE_NAMES",
]

RestrictionLike = str | Callable[..., Any] | tuple[Callable[..., Any], Sequence[str]] | Restriction
Restrictions = Sequence[RestrictionLike] | RestrictionLike | None

CHUNK_ROWS = 1 << 21
"""Default maximum number of candidate rows generated at once while enumerating a group."""
MAX_ROWS = 50_000_000
"""Default ``max_rows``: the most valid rows one group may materialise (each row takes one byte
per parameter of the group for domains of up to 256 values, plus 8 bytes for its lookup key:
about 0.5-1 GB at this limit for a group of 2-12 parameters)."""
LATE_WARN_CARTESIAN = 100_000
"""A dict-callable restriction over all parameters warns when their Cartesian product is at
least this large (it is evaluated there row by row in Python)."""
KERNEL_TUNER_BLOCK_SIZE_NAMES = ("block_size_x", "block_size_y", "block_size_z")
"""Kernel Tuner's default thread block size parameter names (used by ``max_threads``)."""
MATERIALISE_MAX = 1_000_000
"""``iter_random`` shuffles an index array up to this count, above it uses a Feistel network."""
_DP_MAX_VARS = 16
_PERM_MAX_VARS = 4
_SEL_EXHAUSTIVE = 4096
_SEL_SAMPLES = 2048
_SEL_CALLABLE_SAMPLES = 256
_SIZE_SAMPLES = 4096
_CACHE_VERSION = 1


# ----------------------------------------------------------------------------- helpers


def _numeric_array(values: tuple[Any, ...]) -> np.ndarray:
    """Domain values as int64, float64 or (otherwise) object array, for vectorised checks."""
    if all(isinstance(v, (int, np.integer)) for v in values):
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            pass
    elif all(isinstance(v, Real) for v in values):
        return np.array(values, dtype=np.float64)
    return _object_array(values)


def _object_array(values: Sequence[Any]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = list(values)
    return arr


def _index_dtype(size: int) -> type:
    if size <= 1 << 8:
        return np.uint8
    if size <= 1 << 16:
        return np.uint16
    return np.int32


def _fmt_domain(values: Sequence[Any], limit: int = 8) -> str:
    n = len(values)
    if n <= limit:
        return "[" + ", ".join(repr(v) for v in values) + "]"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        step = values[1] - values[0]
        if step != 0 and all(values[i + 1] - values[i] == step for i in range(n - 1)):
            stop = values[-1] + (1 if step > 0 else -1)
            args = f"{values[0]}, {stop}" + (f", {step}" if step != 1 else "")
            return f"range({args}) ({n} values)"
    head = ", ".join(repr(v) for v in values[:4])
    return f"[{head}, ..., {values[-1]!r}] ({n} values)"


def _plan_order(sizes: Sequence[int], masks: Sequence[int], sels: Sequence[float]) -> list[int]:
    """Variable order of a group minimising the estimated number of generated rows.

    Rows after binding a set S are estimated as prod(|D_v|, v in S) * prod(sel(r), r within S)
    (independence assumption); an order costs sum over steps of rows generated times
    (1 + restrictions checked).  Exhaustive up to 4 variables, exact dynamic programme over
    subsets up to 16, greedy above.  Ties keep declaration order.
    """
    n = len(sizes)
    if n == 1:
        return [0]
    logs = [math.log(s) for s in sizes]
    logsel = [math.log(s) for s in sels]
    if n <= _PERM_MAX_VARS:  # few variables: all orders, in plain Python
        best: tuple[float, tuple[int, ...]] | None = None
        for perm in itertools.permutations(range(n)):
            bound, rows, cost = 0, 1.0, 0.0
            for v in perm:
                new = bound | (1 << v)
                done = [i for i, m in enumerate(masks) if new & m == m and bound & m != m]
                cost += rows * sizes[v] * (1 + len(done))
                rows *= sizes[v] * math.prod(sels[i] for i in done)
                bound = new
            if best is None or cost < best[0] * (1 - 1e-9):
                best = (cost, perm)
        assert best is not None
        return list(best[1])
    if n > _DP_MAX_VARS:
        return _greedy_order(sizes, masks, logs, logsel)
    full = 1 << n
    sets = np.arange(full, dtype=np.int64)
    logsize = np.zeros(full)
    popcount = np.zeros(full, dtype=np.int64)
    for v in range(n):
        bit = (sets >> v) & 1
        logsize += bit * logs[v]
        popcount += bit
    ncomp = np.zeros(full)
    for m, ls in zip(masks, logsel, strict=True):
        inside = (sets & m) == m
        logsize += inside * ls
        ncomp += inside
    size = np.exp(logsize)
    best = np.full(full, np.inf)
    best[0] = 0.0
    choice = np.zeros(full, dtype=np.int64)
    for k in range(1, n + 1):
        idx = sets[popcount == k]
        bk = np.full(len(idx), np.inf)
        ck = np.zeros(len(idx), dtype=np.int64)
        for v in reversed(range(n)):
            bit = 1 << v
            has = (idx & bit) != 0
            sub = np.where(has, idx ^ bit, 0)
            cand = best[sub] + size[sub] * sizes[v] * (1.0 + ncomp[idx] - ncomp[sub])
            cand = np.where(has, cand, np.inf)
            better = cand < bk * (1 - 1e-9)
            bk = np.where(better, cand, bk)
            ck = np.where(better, v, ck)
        best[idx] = bk
        choice[idx] = ck
    order: list[int] = []
    s = full - 1
    while s:
        v = int(choice[s])
        order.append(v)
        s ^= 1 << v
    return order[::-1]


def _greedy_order(
    sizes: Sequence[int], masks: Sequence[int], logs: Sequence[float], logsel: Sequence[float]
) -> list[int]:
    bound, order, logrows = 0, [], 0.0
    todo = list(range(len(sizes)))
    while todo:
        best = None
        for v in todo:
            new = bound | (1 << v)
            done = [i for i, m in enumerate(masks) if new & m == m and bound & m != m]
            after = logrows + logs[v] + sum(logsel[i] for i in done)
            key = (logrows + logs[v] + math.log1p(len(done)), after)
            if best is None or key < best[0]:
                best = (key, v, after)
        assert best is not None
        _, v, logrows = best
        bound |= 1 << v
        order.append(v)
        todo.remove(v)
    return order


class _Feistel:
    """Seeded pseudo-random bijection on range(n): a balanced 6-round Feistel network on the
    smallest even number of bits covering n, restricted to range(n) by cycle walking."""

    def __init__(self, n: int, seed: int | None) -> None:
        bits = max(2, (n - 1).bit_length())
        bits += bits % 2
        self.n = n
        self.half = bits // 2
        self.mask = (1 << self.half) - 1
        self.nbytes = max(1, (self.half + 7) // 8)
        rnd = random.Random(seed)
        self.keys = [rnd.getrandbits(128).to_bytes(16, "little") for _ in range(6)]

    def _round(self, key: bytes, x: int) -> int:
        h = hashlib.blake2b(x.to_bytes(self.nbytes, "little"), key=key, digest_size=16)
        return int.from_bytes(h.digest(), "little") & self.mask

    def _permute(self, x: int) -> int:
        left, right = x >> self.half, x & self.mask
        for key in self.keys:
            left, right = right, left ^ self._round(key, right)
        return (left << self.half) | right

    def __call__(self, i: int) -> int:
        x = self._permute(i)
        while x >= self.n:
            x = self._permute(x)
        return x


# ----------------------------------------------------------------------------- the space


class SearchSpace:
    """Valid configurations of tuning parameters under restrictions.

    ``params`` maps each name to its domain (a sequence of distinct hashable values, normally
    ints/floats).  ``restrictions`` (None, one restriction or a sequence of them) are strings
    (Python expressions, see ``constraints.restrictions``), callables whose argument names
    are parameters, callables of one other argument that receive the configuration as a dict
    (Kernel Tuner's form), ``(callable, names)`` pairs or :class:`Restriction` objects.
    ``origins`` maps a restriction's position to its origin label (default ``"user"``).

    ``max_threads`` adds Kernel Tuner's implicit restriction: the product of the parameters
    named in ``block_size_names`` (default ``block_size_x/y/z``) that exist is at most
    ``max_threads``.  ``max_rows`` (default :data:`MAX_ROWS`, None for no limit) bounds the
    valid rows any one group may materialise: above it :class:`SpaceTooLargeError`.

    Configurations are dicts in ``params`` order; their index order (``space[i]``,
    iteration) is a mixed radix over :attr:`groups`, each group's rows in lexicographic
    order of domain positions along the group's variable order.
    """

    def __init__(
        self,
        params: Mapping[str, Sequence[Any]],
        restrictions: Restrictions = None,
        *,
        origins: Mapping[int, str] | None = None,
        chunk_rows: int = CHUNK_ROWS,
        max_threads: int | None = None,
        block_size_names: Sequence[str] = KERNEL_TUNER_BLOCK_SIZE_NAMES,
        max_rows: int | None = MAX_ROWS,
    ) -> None:
        self._setup(params, restrictions, origins, chunk_rows, max_threads, block_size_names)
        self._warn_late()
        limit = None if max_rows is None else max(1, operator.index(max_rows))
        estimates = [self._check_size(gi, limit) for gi in range(len(self._groups))]
        self._deaths: list[tuple[int, int] | None] = []
        tables = []
        for gi in range(len(self._groups)):
            try:
                table, death = self._enumerate(gi, limit, estimates[gi])
            except MemoryError:
                detail = (
                    f"ran out of memory while enumerating its valid rows "
                    f"(estimated: {estimates[gi]})"
                )
                raise SpaceTooLargeError(self._too_large(gi, detail, limit)) from None
            tables.append(table)
            self._deaths.append(death)
        self._finish(tables)

    # -- construction ----------------------------------------------------------------------
    def _setup(
        self,
        params: Mapping[str, Sequence[Any]],
        restrictions: Restrictions,
        origins: Mapping[int, str] | None,
        chunk_rows: int,
        max_threads: int | None = None,
        block_size_names: Sequence[str] = KERNEL_TUNER_BLOCK_SIZE_NAMES,
    ) -> None:
        if not isinstance(params, Mapping):
            raise TypeError("params must be a mapping from parameter name to domain")
        if restrictions is None:
            restrictions = []
        elif isinstance(restrictions, (str, Restriction)) or callable(restrictions):
            restrictions = [restrictions]  # Kernel Tuner accepts a single function
        self._chunk_rows = max(1, int(chunk_rows))
        self._names: list[str] = []
        self._domains: dict[str, tuple[Any, ...]] = {}
        self._pos: dict[str, dict[Any, int]] = {}
        self._num: dict[str, np.ndarray] = {}
        self._obj: dict[str, np.ndarray] = {}
        for name, dom in params.items():
            if not isinstance(name, str):
                raise SpaceError(f"parameter names must be strings, got {name!r}")
            if isinstance(dom, (str, bytes)) or not isinstance(dom, Iterable):
                raise SpaceError(f"domain of {name!r} must be a sequence of values, got {dom!r}")
            values = tuple(dom)
            if not values:
                raise EmptyParameterDomainError(
                    f"parameter {name!r} has an empty domain; give it at least one value"
                )
            pos: dict[Any, int] = {}
            for i, v in enumerate(values):
                try:
                    seen = pos.get(v)
                except TypeError:
                    raise SpaceError(f"domain of {name!r}: value {v!r} is not hashable") from None
                if seen is not None:
                    raise SpaceError(
                        f"domain of {name!r} lists {v!r} twice (positions {seen} and {i})"
                    )
                pos[v] = i
            self._names.append(name)
            self._domains[name] = values
            self._pos[name] = pos
            self._num[name] = _numeric_array(values)
            self._obj[name] = _object_array(values)
        self._decl = {n: i for i, n in enumerate(self._names)}

        restrictions = list(restrictions)
        origins = dict(origins or {})
        for k in origins:
            if not isinstance(k, int) or not 0 <= k < len(restrictions):
                raise SpaceError(
                    f"origins key {k!r} is not the position of a restriction "
                    f"(0..{len(restrictions) - 1})"
                )
        parsed: list[Restriction] = []
        for i, r in enumerate(restrictions):
            origin = origins.get(i, "user")
            parsed.append(self._coerce(r, origin, i in origins))
        if max_threads is not None:
            implicit = self._max_threads(max_threads, block_size_names)
            if implicit is not None:
                parsed.append(implicit)
        self._restrictions: tuple[Restriction, ...] = tuple(parsed)
        self._false_const: Restriction | None = None
        for r in parsed:
            if not r.params and not r.scalar():
                self._false_const = self._false_const or r

        # connected components of the dependency graph (see `graph`), by union-find
        root = list(range(len(self._names)))

        def find(i: int) -> int:
            while root[i] != i:
                root[i] = root[root[i]]
                i = root[i]
            return i

        for r in parsed:
            ids = [self._decl[p] for p in r.params]
            for i in ids[1:]:
                a, b = find(ids[0]), find(i)
                if a != b:
                    root[max(a, b)] = min(a, b)
        members: dict[int, list[str]] = {}
        for i, n in enumerate(self._names):
            members.setdefault(find(i), []).append(n)
        comps = list(members.values())  # each in declaration order, ordered by first member

        self._sel: dict[int, float] = {}
        self._groups: list[tuple[str, ...]] = []
        self._steps: list[list[list[int]]] = []  # group -> position -> restriction indices
        for comp in comps:
            local = {n: i for i, n in enumerate(comp)}
            rids = [i for i, r in enumerate(parsed) if r.params and r.params[0] in local]
            matters = len(comp) > 2 or len(rids) > 1  # else the order is by domain size
            for i in rids:
                self._sel[i] = self._selectivity(parsed[i]) if matters else 0.5
            masks = [sum(1 << local[p] for p in parsed[i].params) for i in rids]
            sizes = [len(self._domains[n]) for n in comp]
            perm = _plan_order(sizes, masks, [self._sel[i] for i in rids])
            names = tuple(comp[v] for v in perm)
            at = {n: j for j, n in enumerate(names)}
            steps: list[list[int]] = [[] for _ in names]
            for i in rids:
                steps[max(at[p] for p in parsed[i].params)].append(i)
            for s in steps:
                s.sort(key=lambda i: (self._sel[i], i))
            self._groups.append(names)
            self._steps.append(steps)

    def _max_threads(self, max_threads: int, names: Sequence[str]) -> Restriction | None:
        """Kernel Tuner's implicit restriction: the product of the block-size parameters
        present among ``names`` is at most ``max_threads`` (None if none is present)."""
        try:
            limit = operator.index(max_threads)
        except TypeError:
            raise SpaceError(f"max_threads must be an integer, got {max_threads!r}") from None
        if limit < 1:
            raise SpaceError(f"max_threads must be positive, got {limit}")
        names = [names] if isinstance(names, str) else list(names)
        present = [n for n in names if n in self._decl]
        if not present:
            return None
        origin = (
            f"max_threads: {'*'.join(present)} <= {limit} (Kernel Tuner's implicit restriction)"
        )
        return parse_restriction(f"{' * '.join(present)} <= {limit}", self._names, origin)

    def _warn_late(self) -> None:
        """Warn about dict-callables that depend on every parameter of a large space."""
        if len(self._names) < 2:
            return
        every = set(self._names)
        for r in self._restrictions:
            if not r.takes_dict or set(r.params) != every:
                continue
            cart = self.cartesian_size()
            if cart < LATE_WARN_CARTESIAN:
                continue
            why = (
                "it reads all of them"
                if r.keys_inferred
                else 'the keys it reads could not be found in its source (only p["name"] or '
                'p.get("name") with constant names can be)'
            )
            warnings.warn(
                f"restriction {r.source} [{r.origin}] takes the configuration as a dict and "
                f"{why}: it can only be checked once all {len(self._names)} parameters are "
                f"chosen, filtering their Cartesian product of {cart:,} configurations row by "
                f"row in Python. Prefer restriction strings "
                f"('block_size_x * block_size_y <= 1024') or callables with named arguments "
                f"(lambda block_size_x, block_size_y: ...), which depend only on the parameters "
                f"they name",
                LateRestrictionWarning,
                stacklevel=3,
            )

    def _coerce(self, r: RestrictionLike, origin: str, override: bool) -> Restriction:
        if isinstance(r, Restriction):
            unknown = [p for p in r.params if p not in self._decl]
            if unknown:
                raise UnknownNameError(
                    f"restriction {r.source!r} reads {unknown[0]!r}, which is not a parameter "
                    f"(parameters: {', '.join(self._names)})"
                )
            return r.with_origin(origin) if override else r
        if isinstance(r, str):
            return parse_restriction(r, self._names, origin)
        if isinstance(r, tuple) and len(r) == 2 and callable(r[0]):
            names = [r[1]] if isinstance(r[1], str) else list(r[1])
            return restriction_from_callable(r[0], names, self._names, origin)
        if callable(r):
            return restriction_from_callable(r, None, self._names, origin)
        raise TypeError(
            f"a restriction must be a string, a callable, (callable, names) or a Restriction; "
            f"got {r!r}"
        )

    def _selectivity(self, r: Restriction) -> float:
        """Fraction of the restriction's own Cartesian product it accepts (exact when small)."""
        sizes = [len(self._domains[p]) for p in r.params]
        total = math.prod(sizes)
        if total <= (_SEL_EXHAUSTIVE if r.vectorised else _SEL_CALLABLE_SAMPLES):
            idx = [a.ravel() for a in np.indices(sizes)]
        else:
            rng = np.random.default_rng(0)
            k = _SEL_SAMPLES if r.vectorised else _SEL_CALLABLE_SAMPLES
            idx = [rng.integers(0, s, k) for s in sizes]
        src = self._num if r.vectorised else self._obj
        mask = np.asarray(r.vector(*[src[p][i] for p, i in zip(r.params, idx, strict=True)]))
        n = len(idx[0])
        return max(float(np.count_nonzero(mask)) / n, 0.5 / n)

    def _check_size(self, gi: int, limit: int | None) -> str:
        """Estimate the valid rows of group ``gi`` before enumerating it; raise
        :class:`SpaceTooLargeError` when that is confidently above ``limit``.

        Only a group whose Cartesian size exceeds ``limit`` is examined: its restrictions are
        evaluated on ``_SIZE_SAMPLES`` seeded random points of its Cartesian product, and the
        group is refused when a 3-sigma lower bound of the passing fraction, times the
        Cartesian size, exceeds ``limit`` (with few passing points the estimate is left to the
        check made while enumerating).  Returns the estimate as text for error messages.
        """
        names = self._groups[gi]
        sizes = [len(self._domains[n]) for n in names]
        cart = math.prod(sizes)
        if limit is None or cart <= limit:
            return f"at most {cart:,} (its Cartesian size)"
        rids = sorted(
            (i for s in self._steps[gi] for i in s),
            key=lambda i: (not self._restrictions[i].vectorised, self._sel[i], i),
        )
        if not rids:  # a free parameter: every value is a row
            raise SpaceTooLargeError(self._too_large(gi, f"has {cart:,} valid rows", limit))
        rng = np.random.default_rng(0)
        n = _SIZE_SAMPLES
        idx = {p: rng.integers(0, size, n) for p, size in zip(names, sizes, strict=True)}
        alive = np.arange(n)
        for i in rids:
            r = self._restrictions[i]
            src = self._num if r.vectorised else self._obj
            mask = np.asarray(r.vector(*[src[p][idx[p][alive]] for p in r.params]), dtype=bool)
            alive = alive[np.broadcast_to(mask, alive.shape)]
            if not len(alive):
                break
        hits = len(alive)
        estimate = cart * hits / n
        text = (
            f"about {estimate:,.0f} ({hits:,} of {n:,} random points of its Cartesian product "
            f"of {cart:,} pass its restrictions)"
        )
        if (hits - 3 * math.sqrt(hits)) * cart / n > limit:
            detail = f"would hold {text.replace(' (', ' valid rows (', 1)}"
            raise SpaceTooLargeError(self._too_large(gi, detail, limit))
        return text

    def _too_large(self, gi: int, detail: str, limit: int | None) -> str:
        """Message of :class:`SpaceTooLargeError`: group ``gi`` ``detail``, then what to do."""
        names = self._groups[gi]
        rids = [i for s in self._steps[gi] for i in s]
        tied = "; ".join(repr(self._restrictions[i].source) for i in rids[:6])
        tied += "; ..." if len(rids) > 6 else ""
        bound = "no max_rows limit" if limit is None else f"max_rows={limit:,}"
        return (
            f"group ({', '.join(names)}) {detail}; a group's valid rows are materialised "
            f"({bound})"
            + (f"; restrictions tying the group together: {tied}" if tied else "")
            + ". Add restrictions that split the group (or drop ones that tie its parameters "
            "together), narrow the parameters' domains, or raise max_rows (None: no limit)."
        )

    def _enumerate(
        self, gi: int, limit: int | None = None, estimate: str = ""
    ) -> tuple[np.ndarray, tuple[int, int] | None]:
        """Valid rows of group ``gi`` (domain indices, columns in variable order); raises
        :class:`SpaceTooLargeError` as soon as more than ``limit`` rows are kept."""
        names = self._groups[gi]
        steps = [[self._restrictions[i] for i in s] for s in self._steps[gi]]
        k = len(names)
        sizes = [len(self._domains[n]) for n in names]
        dt = _index_dtype(max(sizes))
        if not any(steps):  # a free parameter: every value
            return np.arange(sizes[0], dtype=dt)[:, None], None
        numv = [self._num[n] for n in names]
        objv = [self._obj[n] for n in names]
        at = {n: j for j, n in enumerate(names)}
        budget = self._chunk_rows
        out: list[list[np.ndarray]] = []
        death: list[tuple[int, int]] = []
        kept = [0]

        def run(cols: list[np.ndarray], j: int) -> None:
            if j == k:
                out.append(cols)
                kept[0] += len(cols[0])
                if limit is not None and kept[0] > limit:
                    detail = (
                        f"has more than {limit:,} valid rows (enumeration stopped at "
                        f"{kept[0]:,}; estimated beforehand: {estimate})"
                    )
                    raise SpaceTooLargeError(self._too_large(gi, detail, limit))
                return
            d = sizes[j]
            m = len(cols[0]) if cols else 1
            if cols and m > 1 and m * d > budget:
                step = max(1, budget // d)
                for s in range(0, m, step):
                    run([c[s : s + step] for c in cols], j)
                return
            new = np.broadcast_to(np.arange(d, dtype=dt), (m, d)).reshape(-1)
            parent = np.repeat(np.arange(m), d) if cols else None
            cache: dict[tuple[str, bool], np.ndarray] = {}
            for ri, r in enumerate(steps[j]):
                args = []
                for p in r.params:
                    key = (p, r.vectorised)
                    a = cache.get(key)
                    if a is None:
                        q = at[p]
                        src = numv[q] if r.vectorised else objv[q]
                        a = src.take(new) if q == j else src.take(cols[q]).take(parent)
                        cache[key] = a
                    args.append(a)
                mask = np.asarray(r.vector(*args), dtype=bool)
                if mask.shape != new.shape:
                    mask = np.broadcast_to(mask, new.shape)
                if not mask.all():
                    keep = np.flatnonzero(mask)
                    if not len(keep):
                        death.append((j, ri))
                        return
                    new = new[keep]
                    if parent is not None:
                        parent = parent[keep]
                    cache = {kk: a[keep] for kk, a in cache.items()}
            run([c.take(parent) for c in cols] + [new] if cols else [new], j + 1)

        run([], 0)
        if not out:
            return np.empty((0, k), dtype=dt), max(death)
        return np.concatenate([np.stack(c, axis=1) for c in out]), None

    def _finish(self, tables: list[np.ndarray]) -> None:
        self._tables = tables
        self._sizes = [len(t) for t in tables]
        self._count = 0 if self._false_const is not None else math.prod(self._sizes)
        self._keys: dict[int, Any] = {}

    # -- structure -------------------------------------------------------------------------
    @property
    def params(self) -> dict[str, tuple[Any, ...]]:
        """Parameter domains, in declaration order."""
        return dict(self._domains)

    @property
    def groups(self) -> list[tuple[str, ...]]:
        """Independent parameter groups, each in its variable order."""
        return list(self._groups)

    @property
    def order(self) -> tuple[str, ...]:
        """All parameters in the order they are bound (group by group)."""
        return tuple(n for g in self._groups for n in g)

    @property
    def restrictions(self) -> tuple[Restriction, ...]:
        """The compiled restrictions, in the order given."""
        return self._restrictions

    @property
    def graph(self) -> nx.Graph:
        """Dependency graph: an edge between parameters sharing a restriction; its connected
        components are :attr:`groups`."""
        graph = nx.Graph()
        graph.add_nodes_from(self._names)
        for r in self._restrictions:
            graph.add_edges_from(itertools.combinations(r.params, 2))
        return graph

    @property
    def dag(self) -> nx.DiGraph:
        """Dependency edges oriented along :attr:`order` (which is a topological order)."""
        rank = {n: i for i, n in enumerate(self.order)}
        dag = nx.DiGraph()
        dag.add_nodes_from(self.order)
        dag.add_edges_from((a, b) if rank[a] < rank[b] else (b, a) for a, b in self.graph.edges)
        return dag

    def cartesian_size(self) -> int:
        """Size of the unrestricted Cartesian product."""
        return math.prod(len(d) for d in self._domains.values())

    def group_sizes(self) -> list[int]:
        """Number of valid rows of each group (the mixed-radix digits' bases)."""
        return list(self._sizes)

    # -- counting, indexing ----------------------------------------------------------------
    def count(self) -> int:
        """Exact number of valid configurations (a Python int, may exceed 2**63)."""
        return self._count

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __repr__(self) -> str:
        return (
            f"SearchSpace({len(self._names)} parameters, {len(self._restrictions)} restrictions, "
            f"{self._count} configurations)"
        )

    def _empty(self) -> EmptySpaceError:
        return EmptySpaceError(self.explain_empty())

    def _row_values(self, g: int, row: int) -> list[tuple[str, Any]]:
        names = self._groups[g]
        idx = self._tables[g][row].tolist()
        return [(n, self._domains[n][i]) for n, i in zip(names, idx, strict=True)]

    def _config_of_digits(self, digits: Sequence[int]) -> dict[str, Any]:
        vals: dict[str, Any] = {}
        for g, d in enumerate(digits):
            vals.update(self._row_values(g, d))
        return {n: vals[n] for n in self._names}

    def _digits(self, i: int) -> list[int]:
        out = []
        for n in reversed(self._sizes):
            i, d = divmod(i, n)
            out.append(d)
        return out[::-1]

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = operator.index(i)
        if self._count == 0:
            raise self._empty()
        j = i + self._count if i < 0 else i
        if not 0 <= j < self._count:
            raise IndexError(f"index {i} out of range for a space of {self._count} configurations")
        return self._config_of_digits(self._digits(j))

    def _configs_of_indices(self, idx: np.ndarray) -> list[dict[str, Any]]:
        """Vectorised index -> configuration (requires count < 2**63)."""
        rem = np.asarray(idx, dtype=np.int64)
        cols: dict[str, list[Any]] = {}
        for g in reversed(range(len(self._groups))):
            n = self._sizes[g]
            rem, d = np.divmod(rem, n)
            rows = self._tables[g][d]
            for j, name in enumerate(self._groups[g]):
                cols[name] = self._obj[name][rows[:, j]].tolist()
        if not self._names:
            return [{} for _ in range(len(idx))]
        names = self._names
        rows = zip(*(cols[n] for n in names), strict=True)
        return [dict(zip(names, vals, strict=True)) for vals in rows]

    def _group_key(self, g: int) -> Any:
        """Sorted int64 keys of group g's rows (mixed radix of positions), or a dict."""
        if g not in self._keys:
            sizes = [len(self._domains[n]) for n in self._groups[g]]
            table = self._tables[g]
            if math.prod(sizes) < 1 << 62:
                w = [math.prod(sizes[j + 1 :]) for j in range(len(sizes))]
                self._keys[g] = table.astype(np.int64) @ np.array(w, dtype=np.int64)
            else:
                self._keys[g] = {tuple(r): i for i, r in enumerate(table.tolist())}
        return self._keys[g]

    def _locate(self, config: Mapping[str, Any], explain: bool) -> int | None:
        """Index of ``config``; None (or an error when ``explain``) if it is not valid."""
        extra = [k for k in config if k not in self._decl]
        if extra:
            if not explain:
                return None
            close = difflib.get_close_matches(str(extra[0]), self._names, n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
            raise UnknownNameError(f"configuration names {extra[0]!r}, not a parameter{hint}")
        missing = [n for n in self._names if n not in config]
        if missing:
            if not explain:
                return None
            raise SpaceError(f"configuration lacks parameter(s) {', '.join(missing)}")
        pos: dict[str, int] = {}
        for n in self._names:
            try:
                p = self._pos[n].get(config[n])
            except TypeError:
                p = None
            if p is None:
                if not explain:
                    return None
                raise SpaceError(
                    f"{n}={config[n]!r} is not in its domain {_fmt_domain(self._domains[n])}"
                )
            pos[n] = p
        digits = []
        for g, names in enumerate(self._groups):
            sizes = [len(self._domains[n]) for n in names]
            keys = self._group_key(g)
            if isinstance(keys, dict):
                d = keys.get(tuple(pos[n] for n in names))
            else:
                key = 0
                for n, s in zip(names, sizes, strict=True):
                    key = key * s + pos[n]
                d = int(np.searchsorted(keys, key))
                d = d if d < len(keys) and keys[d] == key else None
            if d is None:
                if not explain:
                    return None
                raise SpaceError(self._violations(config))
            digits.append(d)
        if self._false_const is not None:
            if not explain:
                return None
            raise self._empty()
        i = 0
        for d, n in zip(digits, self._sizes, strict=True):
            i = i * n + d
        return i

    def _violations(self, config: Mapping[str, Any]) -> str:
        bad = [r for r in self._restrictions if r.params and not r(dict(config))]
        listed = "; ".join(f"{r.source!r} [{r.origin}]" for r in bad)
        return f"configuration {dict(config)} violates {listed}"

    def __contains__(self, config: object) -> bool:
        if not isinstance(config, Mapping):
            return False
        return self._locate(config, explain=False) is not None

    def index_of(self, config: Mapping[str, Any]) -> int:
        """Index of a valid configuration (inverse of ``space[i]``).

        Raises :class:`UnknownNameError` for a name that is not a parameter and
        :class:`SpaceError` naming the violated restrictions for an invalid configuration.
        """
        i = self._locate(config, explain=True)
        assert i is not None
        return i

    # -- iteration, sampling ---------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, Any]]:
        """All valid configurations in index order, lazily."""
        if self._count == 0:
            return
        cache: list[tuple[int, list[tuple[str, Any]]]] = [(-1, [])] * len(self._groups)
        names = self._names
        for digits in itertools.product(*(range(n) for n in self._sizes)):
            vals: dict[str, Any] = {}
            for g, d in enumerate(digits):
                if cache[g][0] != d:
                    cache[g] = (d, self._row_values(g, d))
                vals.update(cache[g][1])
            yield {n: vals[n] for n in names}

    def to_dicts(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The first ``limit`` (default all) configurations in index order."""
        n = self._count if limit is None else max(0, min(int(limit), self._count))
        if n == 0:
            return []
        if self._count < 1 << 63:
            return self._configs_of_indices(np.arange(n, dtype=np.int64))
        return list(itertools.islice(iter(self), n))

    def _indices(self, k: int, seed: int | None, replace: bool) -> Sequence[int] | np.ndarray:
        if self._count < 1 << 63:
            rng = np.random.default_rng(seed)
            if replace:
                return rng.integers(0, self._count, size=k, dtype=np.int64)
            return rng.choice(self._count, size=k, replace=False)
        rnd = random.Random(seed)
        if replace:
            return [rnd.randrange(self._count) for _ in range(k)]
        # count >= 2**63 >> k: distinct uniform draws by rejection (random.sample needs len())
        chosen: dict[int, None] = {}
        while len(chosen) < k:
            chosen.setdefault(rnd.randrange(self._count))
        return list(chosen)

    def sample(
        self, k: int, seed: int | None = None, replace: bool = False
    ) -> list[dict[str, Any]]:
        """``k`` configurations drawn uniformly over the valid ones (distinct unless
        ``replace``): a uniform index, decoded by mixed radix, picks each group's row uniformly
        and independently."""
        k = operator.index(k)
        if k < 0:
            raise ValueError(f"sample size must be >= 0, got {k}")
        if self._count == 0:
            raise self._empty()
        if not replace and k > self._count:
            raise SpaceError(
                f"cannot draw {k} distinct configurations from a space of {self._count}; "
                f"pass replace=True"
            )
        idx = self._indices(k, seed, replace)
        if isinstance(idx, np.ndarray):
            return self._configs_of_indices(idx)
        return [self[i] for i in idx]

    def iter_random(
        self, seed: int | None = None, *, method: str = "auto"
    ) -> Iterator[dict[str, Any]]:
        """Every valid configuration exactly once, in a random order fixed by ``seed``.

        ``method="permutation"`` shuffles ``range(count)`` (default up to
        ``MATERIALISE_MAX``); ``"feistel"`` walks a seeded Feistel bijection on
        ``range(count)`` lazily, without materialising anything.
        """
        if method not in ("auto", "permutation", "feistel"):
            raise ValueError(f"method must be 'auto', 'permutation' or 'feistel', got {method!r}")
        if self._count == 0:
            raise self._empty()
        if method == "permutation" or (method == "auto" and self._count <= MATERIALISE_MAX):
            return self._iter_permutation(seed)
        return self._iter_feistel(seed)

    def _iter_permutation(self, seed: int | None) -> Iterator[dict[str, Any]]:
        perm = np.random.default_rng(seed).permutation(self._count)
        for s in range(0, len(perm), 4096):
            yield from self._configs_of_indices(perm[s : s + 4096])

    def _iter_feistel(self, seed: int | None) -> Iterator[dict[str, Any]]:
        perm = _Feistel(self._count, seed)
        for i in range(self._count):
            yield self[perm(i)]

    # -- emptiness -------------------------------------------------------------------------
    def explain_empty(self) -> str:
        """Why the space is empty (the restriction after which a group lost its last row), or
        a sentence saying it is not empty."""
        if self._count:
            return f"the space is not empty: {self._count} valid configurations"
        if self._false_const is not None:
            r = self._false_const
            return f"the space is empty: restriction {r.source!r} [{r.origin}] is always false"
        for g, names in enumerate(self._groups):
            if self._sizes[g]:
                continue
            death = self._deaths[g] if g < len(self._deaths) else None
            if death is None:
                return f"the space is empty: group ({', '.join(names)}) has no valid row"
            j, ri = death
            rid = self._steps[g][j][ri]
            r = self._restrictions[rid]
            before = [self._restrictions[i] for s in self._steps[g][: j + 1] for i in s]
            before = before[: before.index(r)]
            doms = "; ".join(f"{n} in {_fmt_domain(self._domains[n])}" for n in names[: j + 1])
            prior = ", ".join(repr(b.source) for b in before) if before else "none"
            return (
                f"the space is empty: no assignment of ({', '.join(names[: j + 1])}) "
                f"satisfies restriction {r.source!r} [{r.origin}] "
                f"(restrictions applied before it: {prior}; domains: {doms})"
            )
        return "the space is empty"

    def require_nonempty(self) -> SearchSpace:
        """Return ``self``; raise :class:`EmptySpaceError` with the explanation if empty."""
        if self._count == 0:
            raise self._empty()
        return self

    # -- reporting -------------------------------------------------------------------------
    def _by_origin(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, r in enumerate(self._restrictions):
            out.setdefault(r.origin, []).append(i)
        return out

    def describe(self) -> str:
        """Multi-line summary: domains, restrictions by origin, dependency order, count."""
        w = max((len(n) for n in self._names), default=0)
        lines = [
            f"SearchSpace: {self._count:,} valid configurations of {self.cartesian_size():,} "
            f"(Cartesian product); {len(self._names)} parameters in {len(self._groups)} "
            f"independent groups",
            "parameters:",
        ]
        lines += [f"  {n:<{w}}  {_fmt_domain(self._domains[n])}" for n in self._names]
        lines.append("restrictions (by origin):")
        for origin, ids in self._by_origin().items():
            lines.append(f"  {origin}:")
            lines += [f"    [{i}] {self._restrictions[i].source}" for i in ids]
        if not self._restrictions:
            lines.append("  (none)")
        lines.append(
            "dependency order (each restriction is checked where its last parameter is bound):"
        )
        for g, names in enumerate(self._groups):
            cart = math.prod(len(self._domains[n]) for n in names)
            checks = "; ".join(
                f"{n}: " + ", ".join(f"[{i}]" for i in self._steps[g][j])
                for j, n in enumerate(names)
                if self._steps[g][j]
            )
            lines.append(
                f"  group {g}: {' -> '.join(names)}  ({self._sizes[g]:,} of {cart:,} rows)"
                + (f"  checks {checks}" if checks else "")
            )
        factors = " x ".join(f"{s:,}" for s in self._sizes) or "1"
        lines.append(f"count: {factors} = {self._count:,}")
        if self._count == 0:
            lines.append(self.explain_empty())
        return "\n".join(lines)

    def rich_table(self) -> Any:
        """A ``rich.table.Table``: one row per parameter in dependency order (group, domain,
        restrictions checked there); restrictions by origin and the exact count in the caption."""
        from rich.table import Table

        table = Table(
            title=f"Search space: {self._count:,} valid of {self.cartesian_size():,}",
            caption="\n".join(
                f"{origin}: " + "; ".join(f"[{i}] {self._restrictions[i].source}" for i in ids)
                for origin, ids in self._by_origin().items()
            )
            + f"\ncount = {' x '.join(f'{s:,}' for s in self._sizes) or '1'} = {self._count:,}",
        )
        for col in ("group", "#", "parameter", "domain", "checks here"):
            table.add_column(col)
        k = 0
        for g, names in enumerate(self._groups):
            for j, n in enumerate(names):
                checks = ", ".join(
                    f"[{i}] {self._restrictions[i].source}" for i in self._steps[g][j]
                )
                table.add_row(
                    f"{g} ({self._sizes[g]:,} rows)" if j == 0 else "",
                    str(k),
                    n,
                    _fmt_domain(self._domains[n]),
                    checks,
                    end_section=j == len(names) - 1,
                )
                k += 1
        return table

    # -- cache -----------------------------------------------------------------------------
    def cache_key(self) -> str:
        """Hash of the parameters (names, values) and restrictions (sources, origins).

        Callables are identified by their qualified name, bytecode and constants only:
        captured variables are not hashed."""
        h = hashlib.sha256()
        doc = {
            "v": _CACHE_VERSION,
            "params": [
                [n, [f"{type(v).__name__}:{v!r}" for v in self._domains[n]]] for n in self._names
            ],
            "restrictions": [
                [r.source, list(r.params), r.origin, _fingerprint(r)] for r in self._restrictions
            ],
        }
        h.update(json.dumps(doc, sort_keys=True).encode())
        return h.hexdigest()

    def save(self, path: str | Path) -> None:
        """Write the group tables to ``path`` (``.npz``), keyed by :meth:`cache_key`."""
        arrays = {f"table_{g}": t for g, t in enumerate(self._tables)}
        meta = {
            "key": self.cache_key(),
            "groups": [list(g) for g in self._groups],
            "deaths": [list(d) if d else None for d in self._deaths],
        }
        with open(path, "wb") as f:
            np.savez(f, meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load(
        cls,
        path: str | Path,
        params: Mapping[str, Sequence[Any]],
        restrictions: Restrictions = None,
        *,
        origins: Mapping[int, str] | None = None,
        max_threads: int | None = None,
        block_size_names: Sequence[str] = KERNEL_TUNER_BLOCK_SIZE_NAMES,
    ) -> SearchSpace:
        """Rebuild a space from :meth:`save` output without enumerating; raises
        :class:`SpaceError` if the file belongs to other parameters or restrictions."""
        space = cls.__new__(cls)
        space._setup(params, restrictions, origins, CHUNK_ROWS, max_threads, block_size_names)
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta["key"] != space.cache_key() or meta["groups"] != [
                list(g) for g in space._groups
            ]:
                raise SpaceError(f"cache {path} was built for another space (stale key)")
            tables = [data[f"table_{g}"] for g in range(len(space._groups))]
        space._deaths = [tuple(d) if d else None for d in meta["deaths"]]
        space._finish(tables)
        return space

    @classmethod
    def cached(
        cls,
        path: str | Path,
        params: Mapping[str, Sequence[Any]],
        restrictions: Restrictions = None,
        *,
        origins: Mapping[int, str] | None = None,
        max_threads: int | None = None,
        block_size_names: Sequence[str] = KERNEL_TUNER_BLOCK_SIZE_NAMES,
        max_rows: int | None = MAX_ROWS,
    ) -> SearchSpace:
        """Load from ``path`` when it matches, else build and save there."""
        try:
            return cls.load(
                path,
                params,
                restrictions,
                origins=origins,
                max_threads=max_threads,
                block_size_names=block_size_names,
            )
        except (OSError, KeyError, ValueError):  # missing, unreadable or stale: rebuild
            pass
        space = cls(
            params,
            restrictions,
            origins=origins,
            max_threads=max_threads,
            block_size_names=block_size_names,
            max_rows=max_rows,
        )
        space.save(path)
        return space


def _fingerprint(r: Restriction) -> str:
    if r.vectorised:
        return ""
    fn = getattr(r.scalar, "__wrapped_fn__", None)
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    return hashlib.sha256(code.co_code + repr(code.co_consts).encode()).hexdigest()
