"""The ``model`` strategy (the default): an analytic prior, a learned cost model and a
local search over the joint mapping x tuning space.

Needs scikit-learn (a dependency of liftmap). Random forests are used for both models:
they handle the discrete, mixed-scale features of a mapping and its tuning values without
scaling or tuning, and the spread of their trees' predictions is a cheap uncertainty for
the acquisition rule.

1. A pool of valid candidates is drawn like ``solver`` does (known constraints are
   satisfied by construction): 128 before the first proposal, 128 more before each batch,
   up to ``pool_size``. A sample of a mapping whose tuning space is not built yet costs
   building it (the lowering, type check and resource probes: about 50 ms on a
   convolution; uniform draws over a convolution's 1,381 mappings took 40% of a 5-minute
   run's budget): at most :data:`NEW_FIRST` mappings new to the pool before the first
   proposal and :data:`NEW_PER_BATCH` before each later one, the other samples drawn from
   the mappings the pool has already drawn. A replayed space (every tuning space known)
   is not limited.
2. With transferred knowledge (``mapper.explore.knowledge``: stored results of the same
   program at other sizes), half the first ``n_init`` proposals are the best candidates
   found at those sizes (the best of each size first), projected onto this space: the
   same mapping, the nearest valid tuning values (``knowledge.project``), each then moved
   uphill by the greedy ascent (below) of the prior plus the transferred score (values
   near by number are not near by effect: the padding that fits another size's tiles
   made a 5x5 layer's projected best compute 23% more than it needs).
   The other first proposals are the pool's best by the analytic prior
   (``mapper.explore.prior``: parallel balance over the compute units, SIMD width, the
   innermost reduction's operations per load and register block, redundant work), one
   per mapping, each then moved uphill by a greedy ascent of the prior over its
   neighbours (below), so the first measurements are plausible kernels of different
   mappings instead of uniform draws (which, on a convolution, are nearly all slow).
3. Then, every ``batch`` proposals, a regressor is fitted on log(GFLOP/s) (or -log(time)
   without a FLOP count) of the ``ok`` candidates, the ones stopped for time counting as
   slower than the slowest ``ok`` one (they were cut because they are slow), and a
   classifier on runs / does not run (the hidden constraints: the lowering's and the
   device's refusals, failures). Each split of the regressor's trees considers a random
   third of the features (``max_features``, Breiman's default for regression forests): the
   trees disagree more where the data do not decide, which is what the spread of the
   acquisition measures. A batch is
   * ``batch - local`` members of the pool, the top by ``P(ok) * (mean + beta * std)``
     (upper confidence bound on the standardised prediction), and
   * the prior's greedy ascent from the fastest candidate so far (the highest point of
     its path not proposed yet), and
   * ``local`` neighbours (less the ascent's point) of the best candidates so far (a
     local search, as Kernel Tuner's greedy ILS and Helion's final polish do): one
     tuning parameter moved to an
     adjacent value of its domain (the others repaired to the nearest values valid with
     it where the move alone is not: tile sizes constrain each other), or one map given
     another code, or two maps' codes exchanged (a parallel level moved from one map to
     another), with the same tuning; ranked by the same acquisition, unseen ones only.
   The pool is refilled as it is used.

Features: per map its level (seq/fused 0, lcl 1, wrg 2, glb 3), dimension and whether it
is fused; per tuning parameter log2(1 + value) (0 when the mapping does not have it); of
the lowered kernel, as the lowering computes them symbolically for the mapping
(``mapper.tuning.TuningProblem.features``, no lowering per candidate): log2(1 + x) of the
work-items launched, the work-group size, work-groups per compute unit of the device,
private bytes per work-item, local bytes per work-group, global bytes, the number of
kernels and, of the innermost reduction, operations, loads and registers per iteration
(``codegen.intensity``); and the analytic prior's score.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterator, Mapping
from typing import Any

from ir.errors import LiftmapError
from mapper.explore.record import Record
from mapper.explore.strategies import Candidate, Strategy, StrategyError, register
from mapper.tuning import JointSpace

SLOW = "slow"  # the target of a candidate stopped for time


def _key(mapping, tuning: Mapping[str, int]) -> tuple:
    """A candidate's identity: its mapping and its tuning in name order."""
    return (mapping, tuple(sorted(tuning.items())))


def _steps(dom: tuple, i: int) -> list[int]:
    """Indices of the values one move from ``dom[i]`` in a sorted domain: one or two
    places either way, and the values nearest half and twice it (a long domain, as a
    padding of 0-200, is crossed in a few moves)."""
    out = [j for j in (i - 2, i - 1, i + 1, i + 2) if 0 <= j < len(dom)]
    v = int(dom[i])
    if v > 0:
        for want in (v / 2, v * 2):
            j = min(range(len(dom)), key=lambda k: abs(int(dom[k]) - want))
            if j != i and j not in out:
                out.append(j)
    return out


def _space_of(problem: Any) -> Any:
    """The tuning space of a mapping's tuning problem, or None where it has no parameter
    (every size given: the only configuration is the empty one)."""
    if not getattr(problem, "params", None):
        return None
    return getattr(problem, "space", None)


@register
class ModelStrategy(Strategy):
    """Analytic prior, random-forest cost model + feasibility classifier, UCB acquisition
    over a pool of valid samples and the neighbours of the best (see the module
    docstring)."""

    name = "model"
    summary = "analytic prior, learned cost model, local search near the best"
    FIRST_POOL = 128  # samples drawn before the first proposal
    GROW = 128  # samples added before each later batch, up to pool_size
    NEW_FIRST = 64  # mappings with no tuning space yet drawn before the first proposal
    NEW_PER_BATCH = 16  # ... and before each later batch

    def __init__(self, joint: JointSpace, *, seed: int = 0, pool_size: int = 2000,
                 n_init: int = 8, batch: int = 5, local: int = 3, beta: float = 0.5,
                 trees: int = 100, max_features: float = 1 / 3, transfer: bool = True,
                 **options: Any):
        super().__init__(joint, seed=seed, **options)
        try:
            import sklearn  # noqa: F401
        except ImportError:
            raise StrategyError("strategy 'model' needs scikit-learn: "
                                "pip install scikit-learn") from None
        if not 0 <= local <= batch:
            raise StrategyError(f"strategy 'model': local must be between 0 and batch "
                                f"({batch}), got {local}")
        self.pool_size, self.n_init, self.batch, self.beta = pool_size, n_init, batch, beta
        self.local = local
        self.trees, self.max_features = trees, max_features
        self.labels = list(joint.problem.labels)
        self.params: list[str] = []
        self.X: list[list[float]] = []
        self.y: list[float | str | None] = []  # None: failed; SLOW: stopped for time
        self.seen_cands: list[tuple[Any, dict[str, int]]] = []  # observed, in order
        self._feats: dict[Any, list[float]] = {}  # candidate -> features
        self._map_s = self._tun_s = 0.0  # drawing the pool's samples since the last batch
        self.regressor: Any = None  # the last fitted cost model (for inspection)
        self._clf: Any = None
        self._init_maps: set = set()
        self._tr: dict[Any, float] = {}  # candidate -> transferred score
        self.knowledge: Any = None  # mapper.explore.knowledge.Knowledge, if any applies
        if transfer:
            from mapper.explore.knowledge import Knowledge

            self.knowledge = Knowledge.for_space(joint, seed=seed)
        self._by_rest: dict[tuple[int, tuple[int, ...]], list[Any]] | None = None
        self._by_codes: dict[tuple[int, ...], Any] = {}  # every mapping by its codes
        # (space, configuration, moved parameters) -> the valid or repaired configuration
        self._repaired: dict[tuple, tuple[Any, dict[str, int] | None]] = {}
        self._drawn_maps: list[Any] = []  # mappings the pool has drawn, in order
        self._drawn_set: set = set()
        self._new_left = 0  # mappings with no tuning space yet the current fill may draw
        self._start_list: list | None = None  # the knowledge's best, projected here
        self._norm: tuple[float, float] = (0.0, 1.0)
        flops = getattr(joint, "flops", None)  # an FMA is two FLOPs: the least work
        self._least_work: float | None = flops / 2 if flops else None

    # features -------------------------------------------------------------

    def _cached(self, m: Any, cfg: Mapping[str, int]) -> list[float]:
        key = _key(m, cfg)
        f = self._feats.get(key)
        if f is None:
            f = self._feats[key] = self.features(m, cfg)
        return f

    def features(self, mapping: Mapping[str, int], tuning: Mapping[str, int]) -> list[float]:
        for k in tuning:
            if k not in self.params:
                self.params.append(k)
        f: list[float] = []
        for lab in self.labels:
            c = mapping[lab]
            f += [float(c // 10), float(c % 10 if c >= 10 else 0), float(c == 1)]
        f += self.kernel_features(mapping, tuning)
        f.append(self._transfer(mapping, tuning))
        f += [math.log2(1 + tuning[p]) if p in tuning else 0.0 for p in self.params]
        return f

    def _transfer(self, mapping: Any, tuning: Mapping[str, int]) -> float:
        """The knowledge's score of a candidate (0 without knowledge)."""
        if self.knowledge is None:
            return 0.0
        key = _key(mapping, tuning)
        if key not in self._tr:
            self._transfer_batch([(mapping, tuning)])
        return self._tr[key]

    def _transfer_batch(self, cands: list) -> None:
        """Scores the candidates the knowledge has not scored yet, in one call."""
        if self.knowledge is None:
            return
        todo = [(m, c) for m, c in cands if _key(m, c) not in self._tr]
        for (m, c), v in zip(todo, self.knowledge.predict(todo)):
            self._tr[_key(m, c)] = v

    KERNEL_FEATURES = ("work_items", "group_size", "groups_per_cu", "private_bytes",
                       "local_bytes", "global_bytes", "kernels", "loop_ops", "loop_loads",
                       "loop_registers", "loop_trips", "cache_bytes")

    def kernel_features(self, mapping: Mapping[str, int], tuning: Mapping[str, int]
                        ) -> list[float]:
        """log2(1 + x) of the lowered kernel's features at ``tuning`` (0 where unknown),
        then the analytic prior's score."""
        from mapper.explore.prior import feature_values, prior_score, simd_width, vector_width

        tp = self.joint.tuning(mapping)
        vals = feature_values(tp, tuning)
        device = getattr(self.joint, "device", None)  # a replay space has none
        if vals.get("group_size"):
            cus = max(1, device.max_compute_units if device is not None else 1)
            vals["groups_per_cu"] = vals.get("work_items", 0.0) / vals["group_size"] / cus
        prior = prior_score(vals, vector_width(tp, tuning), device, self._least_work,
                            simd_width(tp, tuning))
        return [math.log2(1 + max(0.0, vals.get(k, 0.0))) for k in self.KERNEL_FEATURES] \
            + [prior]

    PRIOR = len(KERNEL_FEATURES)  # the prior's index among the kernel features

    def analytic(self, mapping: Any, tuning: Mapping[str, int]) -> float:
        """The analytic prior's score alone (``mapper.explore.prior``)."""
        return self._cached(mapping, tuning)[3 * len(self.labels) + self.PRIOR]

    def prior(self, mapping: Any, tuning: Mapping[str, int]) -> float:
        """A candidate's score before any measurement: the analytic prior
        (``mapper.explore.prior``) plus the score transferred from other sizes
        (``mapper.explore.knowledge``), both logarithms of a speed."""
        f = self._cached(mapping, tuning)
        i = 3 * len(self.labels) + self.PRIOR
        return f[i] + f[i + 1]

    def _matrix(self, rows: list[list[float]]) -> list[list[float]]:
        n = 3 * len(self.labels) + len(self.KERNEL_FEATURES) + 2 + len(self.params)
        return [r + [0.0] * (n - len(r)) for r in rows]

    # pool -------------------------------------------------------------------

    def _sample(self) -> tuple[Any, dict[str, int]] | None:
        """A valid mapping and a configuration of it; the time of each part is added to
        ``_map_s`` and ``_tun_s``."""
        maps = list(self.joint.mappings)
        # a space that builds a mapping's tuning space on first use (a live one; a replay
        # knows them all): the fill's quota of mappings new to this pool. New to the pool,
        # not to the space: what another strategy on the same space built does not change
        # this one's sequence (a probe's candidates are the explored run's first ones)
        limited = getattr(self.joint, "builds_tuning_spaces", False)
        for _ in range(100):
            t0 = time.perf_counter()
            m = self.rng.choice(maps)
            if limited and m not in self._drawn_set:
                if self._new_left <= 0 and self._drawn_maps:  # its space would cost: an old one
                    m = self._drawn_maps[self.rng.randrange(len(self._drawn_maps))]
                else:
                    self._new_left -= 1
            if m not in self._drawn_set:
                self._drawn_set.add(m)
                self._drawn_maps.append(m)
            t1 = time.perf_counter()
            cfg = self._tuning_sample(m)
            self._map_s += t1 - t0
            self._tun_s += time.perf_counter() - t1
            if cfg is not None:
                return m, cfg
        return None

    def _fill(self, pool: list, seen: set, grow: int | None = None) -> None:
        """Draws valid samples into ``pool`` up to ``pool_size``, at most ``grow`` of them
        (the pool grows batch by batch, so the first proposal does not wait for it)."""
        self._new_left = self.NEW_FIRST if not pool else self.NEW_PER_BATCH
        misses = 0  # consecutive samples drawn before: a small space is used up
        target = self.pool_size if grow is None else min(self.pool_size, len(pool) + grow)
        while len(pool) < target and misses < 200:
            s = self._sample()
            if s is None:
                return
            key = _key(s[0], s[1])
            if key in seen:
                misses += 1
                continue
            misses = 0
            seen.add(key)
            pool.append(s)

    # local search -------------------------------------------------------------

    REPAIR_CHECKS = 64  # configurations tried to repair a move (``knowledge.project``)

    def neighbours(self, mapping: Any, tuning: Mapping[str, int], swaps: bool = True
                   ) -> list[tuple[Any, dict[str, int]]]:
        """The valid candidates one step from ``(mapping, tuning)``: one tuning parameter
        moved in its domain (one or two places either way, or to about half or twice its
        value), the others kept or, where that is invalid (a tile size that no longer
        divides), moved to the nearest values that are valid with it
        (``knowledge.project``); or one map given another code, or two maps' codes
        exchanged (``swaps``), while the tuning stays (where that is valid)."""
        space, steps = self._step_values(mapping, tuning)
        out: list[tuple[Any, dict[str, int]]] = []
        for p, values in steps.items():
            for v in values:
                cfg = self._valid_or_repaired(space, dict(tuning, **{p: v}), (p,))
                if cfg is not None:
                    out.append((mapping, cfg))
        for m in self._mapping_neighbours(mapping, swaps):
            try:
                other = self.joint.tuning(m)
            except LiftmapError:  # a mapping the lowering cannot apply
                continue
            sp = _space_of(other)
            if sp is None:  # every size given: nothing to tune in either mapping
                if not tuning and not getattr(other, "params", None):
                    out.append((m, {}))
            elif set(getattr(sp, "params", {}) or {}) == set(tuning) and dict(tuning) in sp:
                out.append((m, dict(tuning)))
        return out

    def pair_moves(self, mapping: Any, tuning: Mapping[str, int]
                   ) -> list[tuple[Any, dict[str, int]]]:
        """The valid configurations of ``mapping`` with two tuning parameters moved at once
        as :meth:`neighbours` moves one (the others repaired as in
        :meth:`neighbours`): the steps a product of two parameters (a register block of
        rows x columns) needs where one moved alone only gets worse."""
        space, steps = self._step_values(mapping, tuning)
        out: list[tuple[Any, dict[str, int]]] = []
        names = sorted(steps)
        for a, p in enumerate(names):
            for q in names[a + 1:]:
                for vp in steps[p]:
                    for vq in steps[q]:
                        cfg = self._valid_or_repaired(space, dict(tuning, **{p: vp, q: vq}),
                                                      (p, q))
                        if cfg is not None:
                            out.append((mapping, cfg))
        return out

    def _step_values(self, mapping: Any, tuning: Mapping[str, int]
                     ) -> tuple[Any, dict[str, list[int]]]:
        """The tuning space of ``mapping`` and, per parameter of ``tuning`` found in its
        domain, the values one step away (``_steps``)."""
        space = _space_of(self.joint.tuning(mapping))
        params = getattr(space, "params", None) or {}
        steps: dict[str, list[int]] = {}
        for p, dom in params.items():
            dom = tuple(dom)
            if p in tuning and int(tuning[p]) in dom:
                steps[p] = [int(dom[j]) for j in _steps(dom, dom.index(int(tuning[p])))]
        return space, steps

    def _valid_or_repaired(self, space: Any, cfg: dict[str, int], moved: tuple[str, ...]
                           ) -> dict[str, int] | None:
        """``cfg`` where valid, else the nearest valid configuration that keeps the moved
        parameters (``knowledge.project``), else None."""
        from mapper.explore.knowledge import project

        key = (id(space), tuple(sorted(cfg.items())), moved)
        if key not in self._repaired:  # climbs and local picks ask the same ones again
            # the space is kept with the answer: its id names no other space meanwhile
            self._repaired[key] = (space, cfg if cfg in space else
                                   project(cfg, space, self.REPAIR_CHECKS, frozenset(moved)))
        got = self._repaired[key][1]
        return None if got is None else dict(got)

    def _mapping_neighbours(self, mapping: Any, swaps: bool = True) -> list[Any]:
        """The valid mappings that differ from ``mapping`` in one map's code, then (with
        ``swaps``) those that exchange two maps' codes. The parallelism hierarchy gives
        each level to one map at most, so moving a level from one map to another changes
        two codes: one code alone changed would either leave the level unused (one
        work-item per group: a poor kernel in between) or give it twice (invalid)."""
        idx = self._by_rest
        if idx is None:  # mappings keyed by all codes but one, per label; and by all codes
            idx = self._by_rest = {}
            self._by_codes = {}
            for m in self.joint.mappings:
                codes = tuple(m[lab] for lab in self.labels)
                self._by_codes[codes] = m
                for i in range(len(codes)):
                    idx.setdefault((i, codes[:i] + codes[i + 1:]), []).append(m)
        codes = tuple(mapping[lab] for lab in self.labels)
        out = []
        for i in range(len(codes)):
            out += [m for m in idx.get((i, codes[:i] + codes[i + 1:]), ()) if m != mapping]
        for i in range(len(codes) if swaps else 0):
            for j in range(i + 1, len(codes)):
                if codes[i] != codes[j]:
                    swapped = list(codes)
                    swapped[i], swapped[j] = codes[j], codes[i]
                    other = self._by_codes.get(tuple(swapped))
                    if other is not None:
                        out.append(other)
        return out

    LOCAL_FROM = 20  # ranks of measured candidates whose neighbours the local search takes

    def _local_picks(self, k: int, done: set) -> list[tuple[Any, dict[str, int]]]:
        """Up to ``k`` neighbours of the best candidates so far not proposed yet (``done``),
        best-scored first (the neighbours of the best, then of the next best while fewer
        than ``k``, down to the :data:`LOCAL_FROM`-th: once the best few's neighbourhoods
        are measured, and a noisy measurement can keep a lucky one on top, the search goes
        on around the next ones instead of falling back on the pool)."""
        if k <= 0:
            return []
        ranked = sorted((i for i, y in enumerate(self.y) if isinstance(y, float)),
                        key=lambda i: -float(self.y[i]))  # type: ignore[arg-type]
        picks: list[tuple[Any, dict[str, int]]] = []
        for i in ranked[:self.LOCAL_FROM]:
            m, cfg = self.seen_cands[i]
            cands = [(nm, nc) for nm, nc in self.neighbours(m, cfg)
                     if _key(nm, nc) not in done]
            uniq = list({_key(nm, nc): (nm, nc)
                         for nm, nc in cands}.values())
            if not uniq:
                continue
            scores = self._score(uniq)
            order = sorted(range(len(uniq)), key=lambda j: -scores[j])
            for j in order[:k - len(picks)]:
                picks.append(uniq[j])
                done.add(_key(uniq[j][0], uniq[j][1]))
            if len(picks) >= k:
                break
        return picks

    def _uphill(self, done: set) -> list[tuple[Any, dict[str, int]]]:
        """The prior's ascent (:meth:`_climb`) in the mapping of the fastest candidate
        measured so far, from the best by the prior of that candidate and
        :data:`UPHILL_SAMPLES` configurations of its tuning space: the highest point of
        its path not proposed yet (added to ``done``); [] when every point was. One-step
        neighbours ranked by a model fitted on a few hundred points stay near what was
        measured; the prior knows where a better register block or less redundant work
        lies, several parameters away (sigma and kappa together, say)."""
        ok = [i for i, y in enumerate(self.y) if isinstance(y, float)]
        if not ok:
            return []
        m, cfg = self.seen_cands[max(ok, key=lambda i: float(self.y[i]))]  # type: ignore[arg-type]
        space = _space_of(self.joint.tuning(m))
        starts = [cfg]
        n = space.count() if space is not None else 0
        if n:
            starts += [dict(c) for c in space.sample(min(n, self.UPHILL_SAMPLES),
                                                      seed=self.seed + len(self.y))]
        self._transfer_batch([(m, c) for c in starts])  # one forest call, not one each
        start = max(starts, key=lambda c: self.analytic(m, c))
        got = self._climb(m, start, done)
        return [] if got is None else [got]

    UPHILL_SAMPLES = 256  # configurations of the best's mapping the ascent may start from

    # the models ---------------------------------------------------------------

    def _fit(self) -> None:
        """Fits the classifier (ok / not ok) and the regressor (log performance) on the
        observations so far."""
        import numpy as np
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

        self._clf = self.regressor = None
        feas = np.array([y is not None for y in self.y])
        X = np.array(self._matrix(self.X))
        if 0 < feas.sum() < len(feas):
            self._clf = RandomForestClassifier(n_estimators=50, random_state=self.seed)
            self._clf.fit(X, feas)
        perf = [y for y in self.y if isinstance(y, float)]
        if len(perf) < 2:
            return
        slow = min(perf) - 1.0  # a cut candidate: slower than any ok one
        ok = [(x, y if isinstance(y, float) else slow)
              for x, y in zip(self.X, self.y) if y is not None]
        Xo = np.array(self._matrix([x for x, _ in ok]))
        yo = np.array([y for _, y in ok])
        mu, sd = float(yo.mean()), float(yo.std()) or 1.0
        reg = RandomForestRegressor(n_estimators=self.trees, max_features=self.max_features,
                                    random_state=self.seed)
        reg.fit(Xo, (yo - mu) / sd)
        self.regressor, self._norm = reg, (mu, sd)

    @staticmethod
    def _fitted(model: Any, X: Any) -> Any:
        """``X``'s columns the fitted ``model`` knows: a tuning parameter first met after
        the fit (a mapping's own, a row block's ``uA``) is a column appended at the end,
        which the next fit learns; until then the model predicts without it."""
        n = getattr(model, "n_features_in_", X.shape[1])
        return X[:, :n]

    def _score(self, cands: list) -> list[float]:
        """``P(ok) * UCB`` of each candidate under the last fit (the prior before one)."""
        import numpy as np

        self._transfer_batch(cands)
        feats = [self._cached(m, c) for m, c in cands]  # may add parameters: first
        Xp = np.array(self._matrix(feats))
        p_ok = np.ones(len(cands))
        if self._clf is not None:
            p_ok = self._clf.predict_proba(self._fitted(self._clf, Xp))[
                :, list(self._clf.classes_).index(True)]
        if self.regressor is None:
            i = 3 * len(self.labels) + self.PRIOR
            prior = np.array([f[i] + f[i + 1] for f in feats])
            return list(p_ok * np.exp(prior))
        Xr = self._fitted(self.regressor, Xp)
        per_tree = np.stack([t.predict(Xr) for t in self.regressor.estimators_])
        ucb = per_tree.mean(0) + self.beta * per_tree.std(0)
        # shift to positive so that multiplying by P(ok) ranks sensibly
        return list(p_ok * (ucb - ucb.min() + 1e-3))

    # the strategy -----------------------------------------------------------

    def _starts(self, seen: set) -> list:
        """The best candidates of the transferred knowledge (the best few of every other
        size) projected onto this space: the same mapping where it is valid here, the
        nearest valid tuning (``knowledge.project``); computed once, in order."""
        if self._start_list is not None:
            return self._start_list
        self._start_list = []
        if self.knowledge is None:
            return self._start_list
        from mapper.explore.knowledge import project

        by_codes = {tuple(m[lab] for lab in self.labels): m for m in self.joint.mappings}
        for row in self.knowledge.best:
            m = by_codes.get(tuple(row["mapping"].get(lab) for lab in self.labels))
            if m is None:
                continue
            try:
                space = self.joint.tuning(m).space
            except LiftmapError:  # a mapping the lowering cannot apply at these sizes
                continue
            cfg = project(row["tuning"], space)
            if cfg is None:
                continue
            key = _key(m, cfg)
            if key not in seen:
                seen.add(key)
                self._start_list.append((m, cfg))
        return self._start_list

    CLIMB_FROM = 4  # pool members climbed per initial pick

    def _initial(self, pool: list, k: int, taken: set) -> list:
        """``k`` initial proposals: the ``CLIMB_FROM * k`` members of the pool with the
        best prior (ties broken by the seeded order of the pool), each moved uphill by
        :meth:`_climb`, then the best of those by the prior, one per mapping while there
        are mappings left (``taken``: the keys proposed so far). A pick leaves the pool
        (the members climbed from stay in it)."""
        self._transfer_batch(pool)
        order = sorted(range(len(pool)), key=lambda i: -self.prior(*pool[i]))
        starts = order[:self.CLIMB_FROM * k]
        climbed = [self._climb(pool[i][0], pool[i][1], taken) or pool[i] for i in starts]
        ranked = sorted(range(len(climbed)), key=lambda j: -self.prior(*climbed[j]))
        picks: list[int] = []
        maps = self._init_maps  # mappings of the initial design so far (earlier batches)
        for j in ranked:
            if climbed[j][0] not in maps:
                picks.append(j)
                maps.add(climbed[j][0])
            if len(picks) == k:
                break
        for j in ranked:  # fewer mappings than k: the next best configurations
            if len(picks) == k:
                break
            if j not in picks:
                picks.append(j)
        out = [climbed[j] for j in picks]
        keys = {_key(m, c) for m, c in out}  # proposed: out of the pool
        pool[:] = [(m, c) for m, c in pool if _key(m, c) not in keys]
        return out

    CLIMB_STEPS = 20  # greedy steps of the prior's ascent from an initial pick

    def _climb(self, mapping: Any, tuning: dict[str, int], taken: set,
               score: Any = None) -> tuple[Any, dict[str, int]] | None:
        """The greedy ascent of the analytic prior (or of ``score(mapping, tuning)``)
        from ``(mapping, tuning)`` over its
        :meth:`neighbours`, or its :meth:`pair_moves` where no neighbour is higher (the
        best while it scores higher, at most :data:`CLIMB_STEPS` steps): the last point
        of the path not in ``taken`` (keys of candidates proposed or picked), which it
        joins; None when every point is in it. Uniform samples of a large space are nearly
        all far from a good kernel; the analytic prior knows the way uphill (the
        transferred score, fitted on other sizes, is flat or wrong between its rows)."""
        score = self.analytic if score is None else score
        path = [(mapping, tuning)]
        val = score(mapping, tuning)
        for _ in range(self.CLIMB_STEPS):
            best, bv = None, val
            # pairs where single steps end; no exchanges of codes: each new mapping is
            # lowered once to be scored (a third of a small layer's first batch), and the
            # prior judges a mapping by its balance and spills alone
            for moves in (functools.partial(self.neighbours, swaps=False), self.pair_moves):
                nbs = moves(*path[-1])
                self._transfer_batch(nbs)  # the features hold it: one forest call for all
                for c in nbs:
                    v = score(*c)
                    if v > bv + 1e-9:
                        best, bv = c, v
                if best is not None:
                    break
            if best is None:
                break
            path.append(best)
            val = bv
        for m, cfg in reversed(path):
            key = _key(m, cfg)
            if key not in taken:
                taken.add(key)
                return m, cfg
        return None

    def candidates(self) -> Iterator[Candidate]:
        pool: list = []
        seen: set = set()  # every candidate drawn into the pool or proposed
        done: set = set()  # every candidate proposed
        proposed = 0
        while True:
            t0 = time.perf_counter()
            self._map_s = self._tun_s = 0.0
            self._fill(pool, seen, self.FIRST_POOL if not proposed else self.GROW)
            if proposed < self.n_init:
                k = min(self.batch, self.n_init - proposed)
                starts = self._starts(seen)
                # half the initial design from the knowledge's best, the rest by the prior
                n_start = min(len(starts), k, max(0, self.n_init // 2 - proposed))
                taken = set(done)
                picks: list[tuple[Any, dict[str, int]]] = []
                while starts and len(picks) < n_start:
                    # projected by value; moved uphill by the prior and the transferred
                    # score together (a padding fitted to another size's tiles is near by
                    # value, not by the work it saves)
                    sm, sc = starts.pop(0)
                    got = self._climb(sm, sc, taken, score=self.prior)
                    if got is not None:
                        picks.append(got)
                picks += self._initial(pool, k - len(picks), taken)
            else:
                self._fit()
                picks = self._uphill(done)
                picks += self._local_picks((self.local if pool else self.batch) - len(picks),
                                           done)
                if picks and pool:  # a neighbour drawn into the pool leaves it
                    keys = {_key(m, c) for m, c in picks}
                    pool[:] = [(m, c) for m, c in pool
                               if _key(m, c) not in keys]
                seen.update(_key(m, c) for m, c in picks)
                if pool:
                    scores = self._score(pool)
                    order = sorted(range(len(pool)), key=lambda i: -scores[i])
                    order = order[:self.batch - len(picks)]
                    picks += [pool[i] for i in order]
                    for i in sorted(order, reverse=True):
                        pool.pop(i)
            if not picks:
                return
            n = len(picks)
            other = max(0.0, time.perf_counter() - t0 - self._map_s - self._tun_s)
            for m, cfg in picks:
                proposed += 1
                done.add(_key(m, cfg))
                yield Candidate(m, cfg, self._map_s / n, self._tun_s / n, other / n)

    def observe(self, candidate: Candidate, record: Record) -> None:
        self.X.append(self._cached(candidate.mapping, candidate.tuning))
        self.seen_cands.append((candidate.mapping, dict(candidate.tuning)))
        if record.status == "timeout":
            self.y.append(SLOW)
        elif record.status != "ok":
            self.y.append(None)
        elif record.gflops:
            self.y.append(math.log(record.gflops))
        elif record.time_s:
            self.y.append(-math.log(record.time_s))
        else:
            self.y.append(None)
