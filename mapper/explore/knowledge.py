"""Transfer: what explorations of the same program at other sizes say about a candidate
before it is measured.

A knowledge file (``*.jsonl`` in ``mapper/explore/knowledge/``, shipped with the library and
rebuilt from results stores by ``experiments/build_knowledge.py``; the directories in
``LIFTMAP_KNOWLEDGE``, separated by ``:``, are read too) holds one JSON object per stored
``ok`` or cut candidate::

    {"program": "<sha256 of the explored program's text>", "sizes": {...},
     "mapping": {"T": 0, ...}, "tuning": {"v": 16, ...}, "score": -0.41,
     "device": "pthread-skylake-avx512-AMD EPYC"}

``score`` is log(GFLOP/s / the best GFLOP/s of its store); a candidate stopped by the early
cut counts as the store's slowest ``ok`` one minus 1 (as the ``model`` strategy takes it).
Failures are left out: whether a candidate runs at all is the live classifier's business.

``Knowledge.for_space(joint)`` fits a random forest on the rows of the same program (same
text: the same maps and tuning parameters) at *other* sizes (a store of these sizes is the
user's own data, found by resuming it, not transferred) over the features every size
shares: each map's level, dimension and fused flag, and log2(1 + value) of each tuning
parameter. Its prediction ranks the first proposals of the ``model`` strategy, which had
only the analytic prior to go on otherwise. None when there is nothing to transfer.

What is fast depends on the device (the best kernels of a layer on an AVX2 CPU use 8-wide
vectors, on an AVX-512 one 16-wide): ``device`` is the OpenCL name of the device the row
was measured on. Where the explored device has at least ``MIN_ROWS`` rows of the program at
other sizes, only those are transferred; otherwise those of devices compiled for the same
instruction set (PoCL's LLVM CPU in the name, ``skylake-avx512``: a new AVX-512 CPU learns
from other AVX-512 ones, not from AVX2 ones) where there are as many; otherwise every
device's rows are (a row without ``device`` counts for no device in particular).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ir.errors import LiftmapError

if TYPE_CHECKING:
    from mapper.explore.record import Record

HERE = Path(__file__).with_name("knowledge")
MIN_ROWS = 20  # fewer rows than this transfer nothing


def program_key(text: str) -> str:
    """The key of an explored program in knowledge files: SHA-256 of its text."""
    return hashlib.sha256(text.encode()).hexdigest()


def knowledge_dirs() -> list[Path]:
    """The shipped directory, then those of ``LIFTMAP_KNOWLEDGE``."""
    extra = [Path(p) for p in os.environ.get("LIFTMAP_KNOWLEDGE", "").split(":") if p]
    return [HERE, *extra]


def read_rows(dirs: Iterable[Path] | None = None) -> list[dict[str, Any]]:
    """Every row of every ``*.jsonl`` file in ``dirs`` (unreadable lines are skipped)."""
    rows: list[dict[str, Any]] = []
    for d in dirs if dirs is not None else knowledge_dirs():
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.jsonl")):
            try:
                lines = f.read_text().splitlines()
            except OSError:
                continue
            for line in lines:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if isinstance(r, dict) and {"program", "sizes", "mapping", "tuning",
                                            "score"} <= r.keys():
                    rows.append(r)
    return rows


def store_rows(records: Sequence[Record], program: str, sizes: Mapping[str, int],
               device: str | None = None) -> list[dict[str, Any]]:
    """Knowledge rows of one store's records (its ``ok`` and early-cut ones);
    ``program`` is the store's explored program text, ``sizes`` its fixed sizes,
    ``device`` the name of the device it was measured on (None: not recorded)."""
    ok = [r.gflops for r in records if r.ok and r.gflops]
    if not ok:
        return []
    best = max(ok)
    slow = math.log(min(ok) / best) - 1.0
    key = program_key(program)
    out = []
    for r in records:
        if r.ok and r.gflops:
            score = math.log(r.gflops / best)
        elif r.status == "timeout" and r.check == "early-cut":
            score = slow
        else:
            continue
        row = {"program": key, "sizes": {k: int(v) for k, v in sizes.items()},
               "mapping": dict(r.mapping), "tuning": dict(r.tuning),
               "score": round(score, 4)}
        if device:
            row["device"] = device
        out.append(row)
    return out


def from_store(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Knowledge rows of the results store at ``path`` (read-only)."""
    from mapper.explore.store import ResultStore

    with ResultStore(path, readonly=True) as st:
        meta = st.meta()
        program = meta.get("explored_program")
        if not program:
            return []
        try:
            device = json.loads(meta.get("device") or "{}").get("name")
        except (ValueError, AttributeError):
            device = None
        return store_rows(st.records(), program, json.loads(meta["sizes"]),
                          device=str(device) if device else None)


def mapping_features(labels: Sequence[str], codes: Mapping[str, int]) -> list[float]:
    """Per map: level (0 seq/fused, 1 lcl, 2 wrg, 3 glb), dimension, fused."""
    f: list[float] = []
    for lab in labels:
        c = int(codes[lab])
        f += [float(c // 10), float(c % 10 if c >= 10 else 0), float(c == 1)]
    return f


def size_distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    """How far two size assignments are apart: the sum over their names of
    ``|log2(1 + a) - log2(1 + b)|`` (a name only one has counts as 0 in the other)."""
    return sum(abs(math.log2(1 + max(0, int(a.get(k, 0))))
                   - math.log2(1 + max(0, int(b.get(k, 0))))) for k in set(a) | set(b))


def best_rows(rows: Sequence[Mapping[str, Any]], per_size: int = 4,
              near: Mapping[str, int] | None = None) -> list[Mapping[str, Any]]:
    """The ``per_size`` best distinct candidates of each size the rows come from, taking
    one from each size in turn (every source's best first, then every second best, ...);
    within a turn the sizes nearest ``near`` (:func:`size_distance`) first, without
    ``near`` the best scores first."""
    by_size: dict[str, list[Mapping[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: -float(r["score"])):
        group = by_size.setdefault(json.dumps(r["sizes"], sort_keys=True), [])
        key = (sorted(r["mapping"].items()), sorted(r["tuning"].items()))
        if len(group) < per_size and all(
                (sorted(g["mapping"].items()), sorted(g["tuning"].items())) != key
                for g in group):
            group.append(r)

    def order(r: Mapping[str, Any]) -> tuple[float, float]:
        dist = size_distance(r["sizes"], near) if near is not None else 0.0
        return dist, -float(r["score"])

    out: list[Mapping[str, Any]] = []
    for i in range(per_size):
        out += sorted((g[i] for g in by_size.values() if len(g) > i), key=order)
    return out


@functools.lru_cache(maxsize=256)
def _log_domain(dom: tuple) -> tuple[list[int], list[float]]:
    """A domain's values ascending, with log2(1 + value) of each."""
    vals = sorted({int(v) for v in dom})
    return vals, [math.log2(1 + max(0, v)) for v in vals]


def _nearest(dom: tuple, want: float, limit: int) -> list[tuple[float, int]]:
    """The ``limit`` values of ``dom`` nearest ``want`` on the log scale, as sorted
    ``(distance, value)`` pairs (ties: the smaller value first): a walk outwards from
    ``want``'s place, the log being monotonic."""
    vals, logs = _log_domain(dom)
    hi = bisect.bisect_left(logs, want)
    lo = hi - 1
    out: list[tuple[float, int]] = []
    while len(out) < limit and (lo >= 0 or hi < len(vals)):
        dl = abs(logs[lo] - want) if lo >= 0 else math.inf
        dh = abs(logs[hi] - want) if hi < len(vals) else math.inf
        if dl <= dh:
            out.append((dl, vals[lo]))
            lo -= 1
        else:
            out.append((dh, vals[hi]))
            hi += 1
    return out


def project(tuning: Mapping[str, int], space: Any, max_checks: int = 4000,
            fixed: frozenset[str] = frozenset()) -> dict[str, int] | None:
    """The valid configuration of ``space`` (a ``constraints.space.SearchSpace``) closest
    to ``tuning`` (from another size): best-first over the parameters' domains ranked by
    distance to the given values on a log scale, the sum of the distances the order, at
    most ``max_checks`` configurations tried; the parameters in ``fixed`` keep their
    values. None when ``tuning`` lacks a parameter of the space or nothing near is
    valid."""
    import heapq

    params = dict(getattr(space, "params", None) or {})
    if not params or not set(params) <= set(tuning):
        return None
    names = sorted(params)
    ranked = []  # per parameter: (distance, value), nearest first
    for p in names:
        want = math.log2(1 + max(0, int(tuning[p])))
        if p in fixed:
            dist = [(0.0, int(v)) for v in params[p] if int(v) == int(tuning[p])]
        else:  # a search of max_checks steps never goes further down a ranking
            dist = _nearest(tuple(params[p]), want, max_checks + 2)
        if not dist:
            return None
        ranked.append(dist)
    start = (0,) * len(names)
    heap = [(sum(r[0][0] for r in ranked), start)]
    queued = {start}
    for _ in range(max_checks):
        if not heap:
            break
        cost, idx = heapq.heappop(heap)
        cfg = {p: ranked[k][i][1] for k, (p, i) in enumerate(zip(names, idx))}
        if cfg in space:
            return cfg
        for k in range(len(names)):
            if idx[k] + 1 < len(ranked[k]):
                nxt = idx[:k] + (idx[k] + 1,) + idx[k + 1:]
                if nxt not in queued:
                    queued.add(nxt)
                    step = ranked[k][idx[k] + 1][0] - ranked[k][idx[k]][0]
                    heapq.heappush(heap, (cost + step, nxt))
    return None


# PoCL names a CPU device ``pthread-<LLVM CPU>-<model name>`` (PoCL 4 and newer:
# ``cpu-<LLVM CPU>-<model name>``): the LLVM CPU is lower-case, the model name starts with
# its vendor's capital or a digit ("AMD EPYC", "Intel(R) Xeon(R)", "13th Gen Intel(R)")
_POCL_CPU = re.compile(r"^(?:pthread|cpu)-([a-z0-9_.]+(?:-[a-z0-9_.]+)*)-(?=[A-Z0-9])")


def code_target(device: str | None) -> str | None:
    """The instruction set a device's kernels are compiled for, where its name says it
    (PoCL's CPU devices: ``pthread-skylake-avx512-Intel(R) Xeon(R) Processor`` ->
    ``skylake-avx512``); None otherwise."""
    m = _POCL_CPU.match(device or "")
    return m.group(1) if m else None


def same_device(rows: Sequence[Mapping[str, Any]], device: str | None
                ) -> list[Mapping[str, Any]]:
    """The rows measured on ``device`` where there are at least ``MIN_ROWS`` of them;
    else those of devices whose kernels are compiled for the same instruction set
    (:func:`code_target`: another CPU with the same vector registers) where there are as
    many; else every row (another device's measurements are better than none)."""
    mine = [r for r in rows if device and r.get("device") == device]
    if len(mine) >= MIN_ROWS:
        return mine
    target = code_target(device)
    kin = [r for r in rows if target and code_target(r.get("device")) == target]
    return kin if len(kin) >= MIN_ROWS else list(rows)


class Knowledge:
    """A random forest fitted on transferred rows; ``predict`` scores candidates."""

    def __init__(self, labels: Sequence[str], params: Sequence[str],
                 rows: Sequence[Mapping[str, Any]], seed: int = 0,
                 sizes: Mapping[str, int] | None = None):
        import numpy as np
        from sklearn.ensemble import RandomForestRegressor

        self.labels, self.params = list(labels), list(params)
        self.rows = len(rows)
        self.best = best_rows(rows, near=sizes)  # the sources nearest ``sizes`` first
        self.sizes = sorted({json.dumps(r["sizes"], sort_keys=True) for r in rows})
        X = np.array([self._features(r["mapping"], r["tuning"]) for r in rows])
        y = np.array([float(r["score"]) for r in rows])
        self.forest = RandomForestRegressor(n_estimators=100, min_samples_leaf=2,
                                            random_state=seed).fit(X, y)

    def _features(self, codes: Mapping[str, int], tuning: Mapping[str, int]) -> list[float]:
        return mapping_features(self.labels, codes) + \
            [math.log2(1 + int(tuning[p])) if p in tuning else 0.0 for p in self.params]

    def predict(self, cands: Sequence[tuple[Mapping[str, int], Mapping[str, int]]]
                ) -> list[float]:
        """The transferred score (log of the fraction of the best) of each candidate."""
        import numpy as np

        if not cands:
            return []
        X = np.array([self._features(m, t) for m, t in cands])
        return [float(v) for v in self.forest.predict(X)]

    @classmethod
    def for_space(cls, joint: Any, seed: int = 0,
                  dirs: Iterable[Path] | None = None) -> Knowledge | None:
        """The knowledge of ``joint``'s program at other sizes than ``joint.sizes`` (None:
        no rows, or a space without a program and sizes, e.g. a replay's)."""
        program = getattr(getattr(joint, "problem", None), "program", None)
        sizes = getattr(joint, "sizes", None)
        if program is None or sizes is None or not joint.mappings:
            return None
        from ir.syntax import print_program

        try:
            key = program_key(print_program(program))
        except LiftmapError:  # a program the printer cannot print: nothing to match
            return None
        mine = json.dumps({k: int(v) for k, v in sizes.items()}, sort_keys=True)
        labels = list(joint.problem.labels)
        rows = same_device(
            [r for r in read_rows(dirs) if r["program"] == key
             and json.dumps(r["sizes"], sort_keys=True) != mine
             and set(r["mapping"]) == set(labels)],
            getattr(getattr(joint, "device", None), "name", None))
        if len(rows) < MIN_ROWS:
            return None
        params = sorted({p for r in rows for p in r["tuning"]})
        return cls(labels, params, rows, seed=seed, sizes=sizes)
