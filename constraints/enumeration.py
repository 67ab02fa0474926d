"""Building a search space: parameters and restrictions in, each group's valid rows out.

The steps 1-4 of ``constraints.space`` (see ``docs/tuning-space.md``): restrictions are
compiled (strings and predicates vectorised, callables row by row), the parameters that share
a restriction form independent groups, each group gets a variable order
(``constraints.ordering``) and its valid rows are enumerated column by column, filtered by
the restrictions that just became fully bound, in chunks of at most ``chunk_rows`` rows.
A group whose valid rows would exceed ``max_rows`` raises :class:`SpaceTooLargeError`.

:class:`GroupBuilder` holds these steps as methods of ``SearchSpace`` (its base class).
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from numbers import Real
from typing import TYPE_CHECKING, Any

import numpy as np

from constraints.errors import (
    ConstraintTypeError,
    EmptyParameterDomainError,
    LateRestrictionWarning,
    SpaceError,
    SpaceTooLargeError,
    UnknownNameError,
)
from constraints.expr import Node
from constraints.ordering import plan_order
from constraints.predicates import value_kinds
from constraints.restrictions import (
    Restriction,
    is_python_constraint,
    parse_restriction,
    restriction_from_callable,
    restriction_from_constraint,
    restriction_from_predicate,
)

__all__ = [
    "GroupBuilder",
    "RestrictionLike",
    "Restrictions",
    "CHUNK_ROWS",
    "MAX_ROWS",
    "LATE_WARN_CARTESIAN",
    "KERNEL_TUNER_BLOCK_SIZE_NAMES",
]

RestrictionLike = (
    str | Node | Callable[..., Any] | tuple[Callable[..., Any], Sequence[str]] | Restriction
)
# one restriction or a sequence of them; the (callable, names) form only inside a sequence
# (a bare tuple is taken for a sequence)
Restrictions = (
    Sequence[RestrictionLike] | str | Node | Callable[..., Any] | Restriction | None
)

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
_SEL_EXHAUSTIVE = 4096
_SEL_SAMPLES = 2048
_SEL_CALLABLE_SAMPLES = 256
_SIZE_SAMPLES = 4096


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


class GroupBuilder:
    """The construction of ``SearchSpace``: domains, compiled restrictions, groups, their
    variable orders and valid rows (see the module's docstring)."""

    if TYPE_CHECKING:  # provided by SearchSpace
        def cartesian_size(self) -> int: ...

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
            raise ConstraintTypeError("params must be a mapping from parameter name to domain")
        if restrictions is None:
            restrictions = []
        elif isinstance(restrictions, (str, Restriction, Node)) or callable(restrictions):
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
        self._kinds = value_kinds(self._domains)

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
            perm = plan_order(sizes, masks, [self._sel[i] for i in rids])
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
            return parse_restriction(r, self._names, origin, self._kinds)
        if isinstance(r, Node):
            return restriction_from_predicate(r, self._names, origin)
        if is_python_constraint(r):  # bare, as Kernel Tuner passes it: on all parameters
            return restriction_from_constraint(r, None, self._names, origin, self._kinds)
        if isinstance(r, tuple) and len(r) == 2 and is_python_constraint(r[0]):
            names = [r[1]] if isinstance(r[1], str) else list(r[1])
            return restriction_from_constraint(r[0], names, self._names, origin, self._kinds)
        if isinstance(r, tuple) and len(r) == 2 and callable(r[0]):
            names = [r[1]] if isinstance(r[1], str) else list(r[1])
            return restriction_from_callable(r[0], names, self._names, origin)
        if callable(r):
            return restriction_from_callable(r, None, self._names, origin)
        raise ConstraintTypeError(
            f"a restriction must be a string, a predicate, a callable, (callable, names), a "
            f"python-constraint constraint object or a Restriction; got {r!r}"
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
            new: np.ndarray = np.broadcast_to(np.arange(d, dtype=dt), (m, d)).reshape(-1)
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
                        if q == j:
                            a = src.take(new)
                        else:
                            assert parent is not None  # q < j: cols holds earlier positions
                            a = src.take(cols[q]).take(parent)
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
            if parent is None:  # the first position (no cols)
                run([new], j + 1)
            else:
                run([c.take(parent) for c in cols] + [new], j + 1)

        run([], 0)
        if not out:
            return np.empty((0, k), dtype=dt), max(death)
        return np.concatenate([np.stack(c, axis=1) for c in out]), None

    def _finish(self, tables: list[np.ndarray]) -> None:
        self._tables = tables
        self._sizes = [len(t) for t in tables]
        self._count = 0 if self._false_const is not None else math.prod(self._sizes)
        self._keys: dict[int, Any] = {}
