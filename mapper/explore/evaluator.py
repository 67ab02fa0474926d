"""The evaluator: one candidate -> one ``Record``, through ``codegen.worker.WorkerPool``.

Lowering, building and running happen in a worker process with a time limit (a crash or
a hang costs a worker, not the explorer); the pool has one worker, so candidates are timed
one at a time on the device. A candidate whose key is already in the store is not
evaluated again: its stored record is returned (resume). Every outcome, failures included,
becomes a record (typed: ``status`` + ``check`` + ``reason``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from codegen.errors import Check
from codegen.program import Outcome
from mapper.explore.record import Record
from mapper.explore.store import (  # noqa: F401  (device_description: its importers)
    DEVICE_KEYS,
    Context,
    ResultStore,
    candidate_key,
    device_description,
    key_version,
)
from mapper.explore.strategies import Candidate
from mapper.explore.task import Task

REASON_CHARS = 4000


class Evaluator:
    """Evaluates candidates of ``task`` on one device and records them in ``store``.

    ``pool`` is a ``WorkerPool`` to use (else one of ``workers`` processes is started on
    ``device`` and closed by ``close``; with ``ray``, a ``RayPool`` on the Ray cluster at
    that address, ``True`` or ``"local"`` for a local one, with ``workers`` > 1 worker
    processes per device, else each node's CPUs). ``timeout_s`` limits lowering + build +
    runs of one candidate; ``run_budget_s`` bounds the time of its timed repeats (see
    ``codegen.runner.Runner.evaluate``).

    **Early cut** (``cut``, on by default): once a candidate ran ``ok``, the kernels of
    the next ones' first execution may run on the device for ``cut`` times the best
    candidate's kernel time, at least ``cut_min_s``: like with like (the upload, PoCL's
    compilation at a kernel's first launch and the comparison are not counted; they stay
    under ``timeout_s``). A kernel several times slower than the best is stopped inside
    its first execution, and stored as ``timeout`` with check ``early-cut``; one faster
    than the best is never stopped (its first execution is within the limit). The timed repeats
    are bounded by ``cut`` x ``repeats`` times the best candidate's kernel time too (within
    ``run_budget_s``): a candidate whose first execution is ``cut`` x ``repeats`` times
    slower than the best is timed once, one ``cut`` times slower gets fewer repeats.
    """

    def __init__(self, task: Task, store: ResultStore, *, run_id: str, strategy: str,
                 seed: int, device: str | None = None, pool=None, timeout_s: float = 60.0,
                 repeats: int = 3, cut: float | None = 3.0, cut_min_s: float = 2.0,
                 workers: int = 1, run_budget_s: float | None = None,
                 ray: str | bool | None = None):
        from codegen.worker import WorkerPool

        self.task, self.store = task, store
        self.run_id, self.strategy, self.seed = run_id, strategy, seed
        self.timeout_s, self.repeats = timeout_s, repeats
        self.cut, self.cut_min_s, self.run_budget_s = cut, cut_min_s, run_budget_s
        self._own_pool = pool is None
        if pool is None and ray is not None and ray is not False:
            from mapper.explore.ray_pool import RayPool

            pool = RayPool(device, address=None if ray is True else str(ray),
                           workers_per_device=workers if workers > 1 else None,
                           timeout_s=timeout_s)
        self.pool = pool if pool is not None else WorkerPool(device, workers=workers)
        info = self.pool.device_info()
        self.limits: dict[str, Any] = dict(info.get("limits", {}))
        self.device = device_description(self.limits)
        self.version = key_version()
        self.context = Context(task.name, task.program_hash, dict(task.sizes), self.device)

    def key(self, cand: Candidate) -> str:
        return candidate_key(self.task.text, self.task.sizes, cand.mapping, cand.tuning,
                             self.device, self.version)

    def lookup(self, cand: Candidate) -> Record | None:
        """The stored record of ``cand``, if it was evaluated before."""
        return self.store.record(self.key(cand))

    def run_limit(self, best_time_s: float | None) -> float | None:
        """The early cut's limit on the kernel time of the next candidate's first
        execution: ``cut`` times the best candidate's kernel time (at least ``cut_min_s``),
        or None (no early cut: ``timeout_s`` only)."""
        if not self.cut or not best_time_s:
            return None
        return min(self.timeout_s, max(self.cut_min_s, self.cut * best_time_s))

    def run_budget(self, best_time_s: float | None) -> float | None:
        """The budget of the next candidate's timed repeats: ``run_budget_s``, lowered to
        ``cut`` x ``repeats`` times the best kernel time once there is one (the repeats of a
        candidate that cannot win are not worth their time)."""
        if self.run_budget_s is None or not self.cut or not best_time_s:
            return self.run_budget_s
        return min(self.run_budget_s, self.cut * self.repeats * best_time_s)

    def run(self, cand: Candidate, idx: int, best_cut_s: float | None = None,
            left_s: float | None = None, cap_s: float | None = None,
            best_time_s: float | None = None) -> Record | None:
        """Evaluates ``cand`` in a worker; returns its record (not yet stored).
        ``best_cut_s``: the kernel time the early cut measures against (the best
        candidate's, or a known one's). ``left_s``: the
        seconds left in the run's time budget; both limits end there, and a candidate
        stopped by the end of the budget gives ``None`` (its outcome is unknown: it is not
        recorded, and a later run evaluates it). ``cap_s`` lowers ``timeout_s`` for this
        candidate (a time budget's share: a candidate that exceeds it is a ``timeout``).
        ``best_time_s``: the best kernel time so far, for the repeats' budget."""
        t = self.task
        run_limit = self.run_limit(best_cut_s)
        timeout = self.timeout_s if cap_s is None else min(self.timeout_s, cap_s)
        clipped = False  # a limit was shortened to end with the budget
        if left_s is not None:
            left_s = max(0.05, left_s)
            clipped = left_s < timeout or (run_limit is not None and left_s < run_limit)
            timeout = min(timeout, left_s)
            run_limit = None if run_limit is None else min(run_limit, left_s)
        t0 = time.perf_counter()
        kw: dict[str, Any] = {"run_limit_s": run_limit} if run_limit is not None else {}
        o: Outcome = self.pool.evaluate_candidate(
            t.lower_fn(cand.mapping, cand.tuning), t.inputs, t.reference,
            timeout_s=timeout, repeats=self.repeats, flops=t.flops,
            run_budget_s=self.run_budget(best_time_s), **kw, **t.tolerance)
        wall = time.perf_counter() - t0
        if o.status == "timeout":
            if clipped:
                return None  # stopped by the end of the budget, not by its own slowness
            if run_limit is not None and (o.reason or "").startswith("runs stopped"):
                o = replace(o, check=Check.EARLY_CUT,
                            reason=f"cut after {run_limit:.3g} s of kernel time in its first "
                                   f"execution: over {self.cut:g}x the best candidate's "
                                   f"kernel time {best_cut_s:.3g} s ({o.reason})")
        return self.record(cand, idx, o, wall)

    def retime(self, cand: Candidate, repeats: int) -> Outcome:
        """One re-timing round of ``cand``: lowered, run ``repeats`` times after a warm-up
        and checked again, in a worker (no run budget, no early cut)."""
        t = self.task
        # a pool of several devices (Ray) re-times every winner on one of them
        evaluate = getattr(self.pool, "evaluate_pinned", self.pool.evaluate_candidate)
        return evaluate(
            t.lower_fn(cand.mapping, cand.tuning), t.inputs, t.reference,
            timeout_s=self.timeout_s, repeats=repeats, flops=t.flops, **t.tolerance)

    def record(self, cand: Candidate, idx: int, o: Outcome, wall_s: float) -> Record:
        """The record of an outcome."""
        lower, build = o.lower_s or 0.0, o.build_s or 0.0
        return Record(
            key=self.key(cand), run_id=self.run_id, strategy=self.strategy, seed=self.seed,
            idx=idx, mapping=cand.mapping, tuning=cand.tuning, status=o.status,
            check=o.check, reason=(o.reason or "")[:REASON_CHARS],
            search_s=cand.search_s, mapping_s=cand.mapping_s, tuning_s=cand.tuning_s,
            lower_s=o.lower_s, build_s=o.build_s, run_s=max(0.0, wall_s - lower - build),
            wall_s=wall_s, gflops=o.gflops, time_s=o.time_s,
            memory_bytes=(o.memory or {}).get("global_total"),
            max_abs_error=o.max_abs_error, source_hash=o.source_hash, draws=cand.draws,
            created=time.time())

    def close(self) -> None:
        if self._own_pool:
            self.pool.close()
