"""The ``model`` strategy: a learned cost model over mapping + tuning features.

Needs scikit-learn (``pip install liftmap[model]``). Random forests are used for both
models: they handle the discrete, mixed-scale features of a mapping and its tuning values
without scaling or tuning, and the spread of their trees' predictions is a cheap
uncertainty for the acquisition rule.

1. A pool of ``pool_size`` valid candidates is drawn like ``solver`` does (known
   constraints are satisfied by construction).
2. The first ``n_init`` proposals are a space-filling (maximin) design over the pool: the
   first is a random member, each next one the member farthest from every candidate
   proposed so far, in the features scaled to the pool's range (so the first
   observations cover different mappings, tilings and vector widths, where uniform
   draws often repeat one kind).
3. Then, every ``batch`` proposals, a regressor is fitted on log(GFLOP/s) (or -log(time)
   without a FLOP count) of the ``ok`` candidates, the ones stopped for time counting as
   slower than the slowest ``ok`` one (they were cut because they are slow), and a
   classifier on runs / does not run (the hidden constraints: the lowering's and the
   device's refusals, failures); the next batch
   is the pool's top ``batch`` by ``P(ok) * (mean + beta * std)`` (upper confidence bound
   on the standardised prediction, over the regressor's ``trees`` trees). Each split of
   the regressor's trees considers a random third of the features (``max_features``,
   Breiman's default for regression forests): the trees disagree more where the data do
   not decide, which is what the ``std`` of the acquisition measures. The pool is
   refilled as it is used.

Features: per map its level (seq/fused 0, lcl 1, wrg 2, glb 3), dimension and whether it
is fused; per tuning parameter log2(1 + value) (0 when the mapping does not have it); and
of the lowered kernel, as the lowering computes them symbolically for the mapping
(``mapper.tuning.TuningProblem.features``, no lowering per candidate): log2(1 + x) of the
work-items launched, the work-group size, work-groups per compute unit of the device,
private bytes per work-item, local bytes per work-group, global bytes and the number of
kernels.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from typing import Any

from mapper.explore.strategies import Candidate, Strategy, StrategyError, register
from mapper.tuning import JointSpace

SLOW = "slow"  # the target of a candidate stopped for time


@register
class ModelStrategy(Strategy):
    """Random-forest cost model + feasibility classifier, UCB acquisition over a pool of
    valid samples (see the module docstring)."""

    name = "model"

    def __init__(self, joint: JointSpace, *, seed: int = 0, pool_size: int = 2000,
                 n_init: int = 10, batch: int = 5, beta: float = 0.5, trees: int = 100,
                 max_features: float = 1 / 3, **options: Any):
        super().__init__(joint, seed=seed, **options)
        try:
            import sklearn  # noqa: F401
        except ImportError:
            raise StrategyError("strategy 'model' needs scikit-learn: "
                                "pip install 'liftmap[model]'") from None
        self.pool_size, self.n_init, self.batch, self.beta = pool_size, n_init, batch, beta
        self.trees, self.max_features = trees, max_features
        self.labels = list(joint.problem.labels)
        self.params: list[str] = []
        self.X: list[list[float]] = []
        self.y: list[float | str | None] = []  # None: failed; SLOW: stopped for time
        self._feats: dict[Any, list[float]] = {}  # pool member -> features
        self._map_s = self._tun_s = 0.0  # drawing the pool's samples since the last batch
        self.regressor: Any = None  # the last fitted cost model (for inspection)

    # features -------------------------------------------------------------

    def _cached(self, m: Any, cfg: Mapping[str, int]) -> list[float]:
        key = (m, tuple(sorted(cfg.items())))
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
        f += [math.log2(1 + tuning[p]) if p in tuning else 0.0 for p in self.params]
        return f

    KERNEL_FEATURES = ("work_items", "group_size", "groups_per_cu", "private_bytes",
                       "local_bytes", "global_bytes", "kernels")

    def kernel_features(self, mapping: Mapping[str, int], tuning: Mapping[str, int]
                        ) -> list[float]:
        """log2(1 + x) of the lowered kernel's features at ``tuning`` (0 where unknown)."""
        exprs = self.joint.tuning(mapping).features
        vals: dict[str, float] = {}
        for k, e in exprs.items():
            try:
                vals[k] = float(e.evaluate(tuning))
            except Exception:  # a feature the lowering could not express for this mapping
                vals[k] = 0.0
        if vals.get("group_size"):
            device = getattr(self.joint, "device", None)  # a replay space has none
            cus = max(1, device.max_compute_units if device is not None else 1)
            vals["groups_per_cu"] = vals.get("work_items", 0.0) / vals["group_size"] / cus
        return [math.log2(1 + max(0.0, vals.get(k, 0.0))) for k in self.KERNEL_FEATURES]

    def _matrix(self, rows: list[list[float]]) -> list[list[float]]:
        n = 3 * len(self.labels) + len(self.KERNEL_FEATURES) + len(self.params)
        return [r + [0.0] * (n - len(r)) for r in rows]

    # pool -------------------------------------------------------------------

    def _sample(self) -> tuple[Any, dict[str, int]] | None:
        """A valid mapping and a configuration of it; the time of each part is added to
        ``_map_s`` and ``_tun_s``."""
        maps = list(self.joint.mappings)
        for _ in range(100):
            t0 = time.perf_counter()
            m = self.rng.choice(maps)
            t1 = time.perf_counter()
            cfg = self._tuning_sample(m)
            self._map_s += t1 - t0
            self._tun_s += time.perf_counter() - t1
            if cfg is not None:
                return m, cfg
        return None

    def _fill(self, pool: list, seen: set) -> None:
        misses = 0  # consecutive samples drawn before: a small space is used up
        while len(pool) < self.pool_size and misses < 200:
            s = self._sample()
            if s is None:
                return
            key = (s[0], tuple(sorted(s[1].items())))
            if key in seen:
                misses += 1
                continue
            misses = 0
            seen.add(key)
            pool.append(s)

    def _score(self, pool: list) -> list[float]:
        import numpy as np
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

        perf = [y for y in self.y if isinstance(y, float)]
        slow = min(perf) - 1.0 if perf else 0.0  # a cut candidate: slower than any ok one
        ok = [(x, y if isinstance(y, float) else slow)
              for x, y in zip(self.X, self.y) if y is not None]
        feats = [self._cached(m, c) for m, c in pool]  # may add parameters: first
        Xp = np.array(self._matrix(feats))
        X = np.array(self._matrix(self.X))
        p_ok = np.ones(len(pool))
        feas = np.array([y is not None for y in self.y])
        if 0 < feas.sum() < len(feas):
            clf = RandomForestClassifier(n_estimators=50, random_state=self.seed)
            clf.fit(X, feas)
            p_ok = clf.predict_proba(Xp)[:, list(clf.classes_).index(True)]
        if len(perf) < 2:
            return list(p_ok + self.rng.random() * 1e-6)
        Xo = np.array(self._matrix([x for x, _ in ok]))
        yo = np.array([y for _, y in ok])
        mu, sd = yo.mean(), yo.std() or 1.0
        reg = RandomForestRegressor(n_estimators=self.trees, max_features=self.max_features,
                                    random_state=self.seed)
        reg.fit(Xo, (yo - mu) / sd)
        self.regressor = reg
        per_tree = np.stack([t.predict(Xp) for t in reg.estimators_])
        ucb = per_tree.mean(0) + self.beta * per_tree.std(0)
        # shift to positive so that multiplying by P(ok) ranks sensibly
        return list(p_ok * (ucb - ucb.min() + 1e-3))

    def _farthest(self, pool: list, chosen: list[list[float]]) -> int:
        """The index of the pool member farthest from its nearest ``chosen`` features
        (Euclidean, each feature scaled to the pool's range): one step of a maximin
        space-filling design."""
        import numpy as np

        P = np.array(self._matrix([self._cached(m, c) for m, c in pool]))
        C = np.array(self._matrix(chosen))
        lo, span = P.min(0), np.ptp(P, 0)
        span[span == 0] = 1.0
        P, C = (P - lo) / span, (C - lo) / span
        d = ((P[:, None, :] - C[None, :, :]) ** 2).sum(-1).min(1)
        return int(d.argmax())

    # the strategy -----------------------------------------------------------

    def candidates(self) -> Iterator[Candidate]:
        pool: list = []
        seen: set = set()
        proposed = 0
        design: list[list[float]] = []  # the features of the initial design's proposals
        while True:
            t0 = time.perf_counter()
            self._map_s = self._tun_s = 0.0
            self._fill(pool, seen)
            if not pool:
                return
            if proposed < self.n_init or not self.X:
                i = self._farthest(pool, design) if design else self.rng.randrange(len(pool))
                picks = [pool.pop(i)]
                design.append(self._cached(*picks[0]))
            else:
                scores = self._score(pool)
                order = sorted(range(len(pool)), key=lambda i: -scores[i])[:self.batch]
                picks = [pool[i] for i in order]
                for i in sorted(order, reverse=True):
                    pool.pop(i)
            n = len(picks)
            other = max(0.0, time.perf_counter() - t0 - self._map_s - self._tun_s)
            for m, cfg in picks:
                proposed += 1
                yield Candidate(m, cfg, self._map_s / n, self._tun_s / n, other / n)

    def observe(self, candidate: Candidate, row: Mapping[str, Any]) -> None:
        self.X.append(self._cached(candidate.mapping, candidate.tuning))
        if row["status"] == "timeout":
            self.y.append(SLOW)
        elif row["status"] != "ok":
            self.y.append(None)
        elif row.get("gflops"):
            self.y.append(math.log(row["gflops"]))
        elif row.get("time_s"):
            self.y.append(-math.log(row["time_s"]))
        else:
            self.y.append(None)
