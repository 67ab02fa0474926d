"""Replay: run a strategy against a stored data set, without a device.

The strategy sees a joint space restricted to the candidates the store holds (the same
mappings, each with the tuning configurations stored for it), and "evaluating" a candidate
returns its stored record. A run therefore costs no device time, which makes comparing
strategies over many seeds cheap (Kernel Tuner's cache-file replay). A time budget is
simulated: each candidate costs its stored ``search_s + wall_s``.

``compare`` runs several strategies over several seeds and reports, per strategy, how many
evaluations it needed to reach a fraction (default 90%) of the data set's best throughput.
"""

from __future__ import annotations

import functools
import random
import statistics
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ir.errors import LiftmapError
from mapper.encoding import MapCodes
from mapper.explore.record import Record
from mapper.explore.run import MAX_REPEATS, Budget, Results, parse_budget
from mapper.explore.store import ResultStore, StoreError
from mapper.explore.strategies import get_strategy


def _cfg_key(cfg: Mapping[str, int]) -> tuple:
    return tuple(sorted((k, int(v)) for k, v in cfg.items()))


class NotInStoreError(LiftmapError, KeyError):
    """A replayed strategy asked for a mapping the store holds no candidate of (a strategy
    drawing mappings skips it, as it skips one the lowering cannot apply)."""


class _StoredConfigs:
    """A tuning space made of stored configurations (the ``SearchSpace`` calls strategies
    use: ``count``, ``sample``, ``iter_random``, ``in``)."""

    def __init__(self, configs: list[dict[str, int]], features_fn=None):
        self.configs = sorted(configs, key=_cfg_key)
        self._keys = {_cfg_key(c) for c in configs}
        # each parameter's domain: the values stored for it (a strategy's neighbourhoods)
        self.params = {k: tuple(sorted({int(c[k]) for c in configs if k in c}))
                       for c in configs for k in c}
        self.space = self
        self._features_fn = features_fn
        self._features: dict | None = None

    @property
    def features(self) -> dict:
        """The lowered kernel's symbolic features (``TuningProblem.features``) of the
        mapping, computed once when a strategy asks (empty when they cannot be)."""
        if self._features is None:
            self._features = self._features_fn() if self._features_fn else {}
        return self._features

    def count(self) -> int:
        return len(self.configs)

    def sample(self, k: int, seed: int | None = None) -> list[dict[str, int]]:
        rng = random.Random(seed)
        return [dict(rng.choice(self.configs)) for _ in range(k)]

    def iter_random(self, seed: int | None = None) -> Iterator[dict[str, int]]:
        order = list(self.configs)
        random.Random(seed).shuffle(order)
        return iter(dict(c) for c in order)

    def __contains__(self, cfg) -> bool:
        return _cfg_key(cfg) in self._keys


class ReplaySpace:
    """A ``JointSpace`` look-alike over the candidates of a store. With ``transfer`` (and
    the store's ``sizes``) it exposes ``sizes`` as a live space does, so the ``model``
    strategy transfers knowledge of the same program at *other* sizes
    (``Knowledge.for_space``: rows of these sizes are never used); without, it has none."""

    def __init__(self, problem, records: Iterable[Record],
                 sizes: Mapping[str, int] | None = None, *, transfer: bool = False):
        self.problem = problem
        self.sizes: dict[str, int] | None = dict(sizes) if transfer and sizes else None
        by_map: dict[MapCodes, list[dict[str, int]]] = {}
        self.records: dict[tuple, Record] = {}
        for r in records:
            m = problem.mapping(r.mapping)
            cfg = dict(r.tuning)
            key = (m, _cfg_key(cfg))
            if key not in self.records:
                self.records[key] = r
                by_map.setdefault(m, []).append(cfg)
        self.mappings = list(by_map)
        self._tuning = {m: _StoredConfigs(c, functools.partial(_features, problem, m, sizes))
                        for m, c in by_map.items()}

    def tuning(self, mapping) -> _StoredConfigs:
        try:
            return self._tuning[MapCodes(dict(mapping))]
        except KeyError:
            raise NotInStoreError(f"the store holds no candidate with mapping {mapping}") \
                from None

    def count(self) -> int:
        return len(self.records)

    def record(self, mapping, tuning) -> Record:
        """The stored record of one candidate."""
        return self.records[(MapCodes(dict(mapping)), _cfg_key(tuning))]


def load_space(store: str | ResultStore, *, transfer: bool = False
               ) -> tuple[ReplaySpace, ResultStore]:
    """The replay space of a store (opened read-only when given a path; a Kernel Tuner
    cache or T4 file is read by ``mapper.explore.interop``). A store of a kernel without
    liftmap maps (``mapper.explore.tune``, a cache made by Kernel Tuner) replays its stored
    configurations alone. ``transfer``: the ``model`` strategy may use the shipped
    knowledge of the program at other sizes than the store's (leave-one-out when the
    knowledge was built from stores of distinct sizes); by default replay transfers
    nothing."""
    from ir.syntax import parse
    from mapper.api import problem
    from mapper.explore.interop import TUNE_PARAMS_META, KernelOnly, open_results

    st = store if isinstance(store, ResultStore) else open_results(store)
    meta = st.meta()
    if "explored_program" not in meta and (TUNE_PARAMS_META in meta
                                           or not any(len(r.mapping) for r in st.records())):
        return ReplaySpace(KernelOnly(), st.records()), st
    if "explored_program" not in meta:
        raise StoreError(f"{st.path} does not hold the explored program's text (written by an "
                         "older version): it cannot be replayed")
    prob = problem(parse(meta["explored_program"]), fusion=meta.get("fusion") or "always",
                   heuristics=meta.get("heuristics", "on") != "off")
    ctx = st.context()
    return ReplaySpace(prob, st.records(), ctx.sizes if ctx is not None else None,
                       transfer=transfer), st


def _features(problem, mapping, sizes: Mapping[str, int] | None) -> dict:
    """The kernel features of ``mapping`` for the stored fixed sizes (for the model)."""
    from codegen.errors import LoweringError
    from ir.errors import IRError
    from mapper.api import lower_mapping
    from mapper.errors import MapperError
    from mapper.tuning import infer_tuning

    if sizes is None:
        return {}
    try:
        low = lower_mapping(problem, mapping, fusion=problem.fusion)
        return infer_tuning(low, sizes).features
    except (LoweringError, IRError, MapperError, ValueError):
        return {}


def replay(store: str | ResultStore | ReplaySpace, strategy: str = "solver", *,
           budget: int | str | Budget | None = None, seed: int = 0,
           stop_at: float | None = None, **options: Any) -> Results:
    """Runs ``strategy`` on the stored candidates (no device). ``budget`` defaults to the
    number of stored candidates; a time budget is simulated from the stored times.
    ``stop_at``: stop once a candidate reaches this GFLOP/s (or 1/time)."""
    space = store if isinstance(store, ReplaySpace) else load_space(store)[0]
    bud = parse_budget(budget if budget is not None else max(1, space.count()))
    strat = get_strategy(strategy)(space, seed=seed, **options)
    res = Results(f"replay-{strategy}-{seed}", strategy, seed, "", None, bud)
    res.total_candidates = space.count()
    seen: set = set()
    repeats, spent = 0, 0.0
    it = strat.candidates()
    res.stopped_by = "exhausted"
    for cand in it:
        key = (cand.mapping, _cfg_key(cand.tuning))
        if key in seen:
            repeats += 1
            if repeats >= MAX_REPEATS:
                break
            continue
        repeats = 0
        seen.add(key)
        rec = replace(space.record(cand.mapping, cand.tuning), cached=True)
        res.records.append(rec)
        res.cached += 1
        spent += (rec.search_s or 0.0) + (rec.wall_s or 0.0)
        res.elapsed_s = spent
        strat.observe(cand, rec)
        if stop_at is not None and _perf(rec) >= stop_at:
            res.stopped_by = "target"
            break
        if bud.candidates is not None and res.considered >= bud.candidates:
            res.stopped_by = "budget"
            break
        if bud.seconds is not None and spent >= bud.seconds:
            res.stopped_by = "time"
            break
        if len(seen) >= space.count():
            break
    else:
        res.stopped_by = strat.stopped_by or "exhausted"
    res.draws = strat.draws_total
    return res


def _perf(rec: Record) -> float:
    if not rec.ok:
        return 0.0
    if rec.gflops:
        return float(rec.gflops)
    return 1.0 / rec.time_s if rec.time_s else 0.0


def evaluations_to_reach(res: Results, target: float) -> int | None:
    """How many candidates ``res`` took until one reached ``target`` (GFLOP/s, or 1/time)."""
    for i, r in enumerate(res.records, 1):
        if _perf(r) >= target:
            return i
    return None


@dataclass
class Comparison:
    """Per strategy, the evaluations each seed needed to reach ``fraction`` of the best."""

    best: float
    fraction: float
    evaluations: dict[str, list[int | None]]
    candidates: int

    def median(self, strategy: str) -> float | None:
        """Median over seeds (a seed that never reached the target counts as infinite)."""
        vals = [v if v is not None else float("inf") for v in self.evaluations[strategy]]
        m = statistics.median(vals)
        return None if m == float("inf") else m


def compare(store: str | ResultStore, strategies: Iterable[str], *, seeds: int = 10,
            fraction: float = 0.9, budget: int | None = None, first_seed: int = 0
            ) -> Comparison:
    """Replays each strategy with seeds ``first_seed`` .. ``first_seed + seeds - 1`` on the
    store's candidates."""
    space, _ = load_space(store)
    best = max((_perf(r) for r in space.records.values()), default=0.0)
    if best <= 0:
        raise StoreError("the store has no ok candidate: nothing to reach")
    out: dict[str, list[int | None]] = {}
    for name in strategies:
        get_strategy(name)
        out[name] = [evaluations_to_reach(replay(space, name, budget=budget, seed=s,
                                                 stop_at=fraction * best), fraction * best)
                     for s in range(first_seed, first_seed + seeds)]
    return Comparison(best, fraction, out, space.count())
