"""Tuning search space: parameters with finite domains, restrictions, exact counting and
uniform sampling without materialising the Cartesian product.

How the space is built (see ``docs/tuning-space.md``; the steps live in
``constraints.enumeration``, ``constraints.ordering``, ``constraints.restrictions``):

1. Every restriction (string, predicate, callable or :class:`Restriction`) is compiled twice,
   scalar and numpy-vectorised (``constraints.restrictions``, ``constraints.vectorise``).
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
callable taking the configuration as a dict (``lambda p: p["block_size_x"] > 1``), strings
with ``in``/``not in`` literal lists, string-valued parameters and boolean flags as truth
values, python-constraint objects (``MaxProdConstraint(256)``) and, with ``max_threads=``,
its implicit limit on the product of the block sizes; they count as Kernel Tuner 1.5 counts
them (``tests/test_space_kernel_tuner.py``).  A group whose valid
rows would exceed ``max_rows`` (estimated before enumerating it, checked while enumerating)
raises :class:`SpaceTooLargeError` instead of running out of memory.

An empty space is not an error at construction: ``count() == 0``, :meth:`explain_empty`
names the restriction after which a group became empty, and indexing, sampling or
:meth:`require_nonempty` raise :class:`EmptySpaceError` with that text.  Iterating an empty
space yields nothing.

Random orders are in ``constraints.permutation``, the saved tables in
``constraints.persistence``; tables for the terminal (``rich``) in ``mapper.space_view``.
"""

from __future__ import annotations

import difflib
import itertools
import math
import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from constraints.enumeration import (
    CHUNK_ROWS,
    KERNEL_TUNER_BLOCK_SIZE_NAMES,
    MAX_ROWS,
    RestrictionLike,
    Restrictions,
)
from constraints.errors import EmptySpaceError, SpaceError, SpaceTooLargeError, UnknownNameError
from constraints.permutation import MATERIALISE_MAX, Feistel, random_indices
from constraints.persistence import Persistent
from constraints.restrictions import (  # with the restrictions' errors, re-exported here
    EmptyParameterDomainError,
    LateRestrictionWarning,
    NotAPredicateError,
    Restriction,
    RestrictionEvaluationError,
    RestrictionSyntaxError,
)

__all__ = [
    "SearchSpace",
    "format_domain",
    "Restriction",
    "RestrictionLike",
    "Restrictions",
    "CHUNK_ROWS",
    "MAX_ROWS",
    "MATERIALISE_MAX",
    "KERNEL_TUNER_BLOCK_SIZE_NAMES",
    # the space's errors, then the restrictions'
    "SpaceError",
    "EmptySpaceError",
    "SpaceTooLargeError",
    "UnknownNameError",
    "EmptyParameterDomainError",
    "NotAPredicateError",
    "RestrictionSyntaxError",
    "RestrictionEvaluationError",
    "LateRestrictionWarning",
]


def format_domain(values: Sequence[Any], limit: int = 8) -> str:
    """A domain in a line: the values, or a ``range(...)`` or an elided list when long."""
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


class SearchSpace(Persistent):
    """Valid configurations of tuning parameters under restrictions.

    ``params`` maps each name to its domain (a sequence of distinct hashable values, normally
    ints/floats).  ``restrictions`` (None, one restriction or a sequence of them) are strings
    (Python expressions, see ``constraints.restrictions``), callables whose argument names
    are parameters, callables of one other argument that receive the configuration as a dict
    (Kernel Tuner's form), ``(callable, names)`` pairs, python-constraint constraint objects
    (bare: on all parameters; or ``(constraint, names)``) or :class:`Restriction` objects.
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
    def checks(self) -> list[list[tuple[int, ...]]]:
        """For each group, for each position of its variable order, the indices (into
        :attr:`restrictions`) of the restrictions checked when that parameter is bound."""
        return [[tuple(s) for s in steps] for steps in self._steps]

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
            raise IndexError(  # builtin: __getitem__'s out-of-range signal (sequence protocol)
                f"index {i} out of range for a space of {self._count} configurations")
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
        records = zip(*(cols[n] for n in names), strict=True)
        return [dict(zip(names, vals, strict=True)) for vals in records]

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
                    f"{n}={config[n]!r} is not in its domain {format_domain(self._domains[n])}"
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
        for d, size in zip(digits, self._sizes, strict=True):
            i = i * size + d
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

    def sample(
        self, k: int, seed: int | None = None, replace: bool = False
    ) -> list[dict[str, Any]]:
        """``k`` configurations drawn uniformly over the valid ones (distinct unless
        ``replace``): a uniform index, decoded by mixed radix, picks each group's row uniformly
        and independently."""
        k = operator.index(k)
        if k < 0:
            raise SpaceError(f"sample size must be >= 0, got {k}")
        if self._count == 0:
            raise self._empty()
        if not replace and k > self._count:
            raise SpaceError(
                f"cannot draw {k} distinct configurations from a space of {self._count}; "
                f"pass replace=True"
            )
        idx = random_indices(self._count, k, seed, replace)
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
            raise SpaceError(f"method must be 'auto', 'permutation' or 'feistel', got {method!r}")
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
        perm = Feistel(self._count, seed)
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
            doms = "; ".join(f"{n} in {format_domain(self._domains[n])}" for n in names[: j + 1])
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
    def by_origin(self) -> dict[str, list[int]]:
        """Indices of the restrictions by origin, origins in order of first appearance."""
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
        lines += [f"  {n:<{w}}  {format_domain(self._domains[n])}" for n in self._names]
        lines.append("restrictions (by origin):")
        for origin, ids in self.by_origin().items():
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
