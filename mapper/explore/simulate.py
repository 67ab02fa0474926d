"""A simulated device: a results store's outcomes and times, replayed in place of lowering,
building and running (replay-timed exploration).

What it is for: measuring the explorer itself (the driver, the pool, the Ray cluster) on a
machine with fewer cores than the simulated cluster has devices
(``experiments/bench_ray_scaling.py``). Nothing is lowered or run, so the CPUs stay free
for the driver, and each candidate takes the time it took when it was measured.

* ``ReplayTask``: the ``Task`` of a store. Its joint space is the stored candidates (the
  replay's ``ReplaySpace``: any strategy proposes only those), and the lowering function
  of a candidate is a ``StoredCandidate``, which names the candidate and lowers nothing.
* ``SimulatedDevice``: the evaluator's pool interface (``size``, ``device_info``,
  ``evaluate_candidate``, ``close``, as ``codegen.worker.WorkerPool``). A candidate gets its
  stored outcome after sleeping its stored times: lowering and build off the device
  (``workers`` candidates side by side), then the run part on the device, one candidate
  at a time (as the worker pool's gate does). ``timeout_s`` and ``run_limit_s`` bound the
  sleeps as they bound a real evaluation (a candidate over them is a ``timeout``).
  ``time_scale`` multiplies every sleep.

Either is used as it is (``explore(ReplayTask.from_store(p), pool=SimulatedDevice...)``)
or on a Ray cluster: ``RayPool(specs, backend=SimulatedDevice.backend(store))`` builds one
simulated device on every device actor.
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from codegen.program import Outcome, Status
from ir.errors import LiftmapError
from mapper.explore.record import Record
from mapper.explore.replay import ReplaySpace
from mapper.explore.store import ResultStore, StoreError
from mapper.explore.task import Task

CandidateKey = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]


class SimulationError(LiftmapError, ValueError):
    """A simulated device was asked for a candidate its store does not hold, or given
    something that does not name a stored candidate."""


def _key(mapping: Mapping[str, int], tuning: Mapping[str, int]) -> CandidateKey:
    return (tuple(sorted((str(k), int(v)) for k, v in mapping.items())),
            tuple(sorted((str(k), int(v)) for k, v in tuning.items())))


@dataclass(frozen=True)
class StoredCandidate:
    """The lowering function of a ``ReplayTask``'s candidate: it names the candidate (the
    simulated device looks its outcome up) and cannot lower it."""

    mapping: tuple[tuple[str, int], ...]
    tuning: tuple[tuple[str, int], ...]

    @property
    def key(self) -> CandidateKey:
        return (self.mapping, self.tuning)

    def __call__(self) -> NoReturn:
        raise SimulationError("a stored candidate of a replay cannot be lowered: evaluate "
                              "it on a SimulatedDevice")


@dataclass(frozen=True)
class StoredOutcome:
    """What a simulated device replays of one stored candidate: its outcome and the seconds
    of its parts (lowering + build off the device, the rest of its evaluation on it)."""

    outcome: Outcome
    offdevice_s: float
    device_s: float

    @property
    def total_s(self) -> float:
        return self.offdevice_s + self.device_s

    @classmethod
    def of(cls, r: Record) -> StoredOutcome:
        """From a stored record: its outcome, its ``lower_s + build_s`` and its ``run_s``
        (its evaluation's wall time minus both)."""
        lower, build = float(r.lower_s or 0.0), float(r.build_s or 0.0)
        run = float(r.run_s if r.run_s is not None else max(0.0, (r.wall_s or 0.0)
                                                             - lower - build))
        out = Outcome(r.status, r.reason or "", r.check, time_s=r.time_s,
                      times_s=(r.time_s,) if r.time_s is not None else (), gflops=r.gflops,
                      memory={"global_total": int(r.memory_bytes)}
                      if r.memory_bytes is not None else {},
                      max_abs_error=r.max_abs_error, build_s=r.build_s, lower_s=r.lower_s,
                      source_hash=r.source_hash)
        return cls(out, lower + build, run)


class StoredOutcomes(dict[CandidateKey, StoredOutcome]):
    """A store's candidates -> ``StoredOutcome``, with the store's device description
    (``device``) and path."""

    device: dict[str, Any]
    path: str

    @classmethod
    def load(cls, store: str | ResultStore) -> StoredOutcomes:
        """Every candidate of ``store`` (a path, opened read-only, or a ``ResultStore``)."""
        st = store if isinstance(store, ResultStore) else ResultStore(store, readonly=True)
        try:
            ctx = st.context()
            if ctx is None:
                raise StoreError(f"{st.path} holds no results: nothing to simulate")
            out = cls((_key(r.mapping, r.tuning), StoredOutcome.of(r)) for r in st.records())
            out.device, out.path = dict(ctx.device), str(st.path)
            return out
        finally:
            if st is not store:
                st.close()

    def __reduce__(self) -> tuple[Any, ...]:  # the attributes travel with the items
        return (_rebuild, (dict(self), self.device, self.path))


def _rebuild(items: dict[CandidateKey, StoredOutcome], device: dict[str, Any],
             path: str) -> StoredOutcomes:
    out = StoredOutcomes(items)
    out.device, out.path = device, path
    return out


class SimulatedDevice:
    """A pool whose device replays ``outcomes`` (see the module docstring). ``spec`` names
    it (``device_info``); ``workers``: candidates lowered and built side by side;
    ``timeout_s``: the default limit of one candidate; ``time_scale``: every sleep is the
    stored time times this."""

    def __init__(self, outcomes: StoredOutcomes, *, spec: str | None = None,
                 workers: int = 1, timeout_s: float = 60.0, time_scale: float = 1.0):
        if workers < 1:
            raise SimulationError(f"a simulated device needs at least one worker, not "
                                  f"{workers}")
        if not time_scale > 0:
            raise SimulationError(f"time_scale must be positive, not {time_scale}")
        self.outcomes, self.spec, self.workers = outcomes, spec, workers
        self.default_timeout_s, self.time_scale = timeout_s, time_scale
        self._slots = threading.BoundedSemaphore(workers)
        self._gate = threading.Lock()  # one candidate's run part on the device at a time
        self._lock = threading.Lock()
        self.evaluated = 0
        self.busy_s = 0.0  # seconds the device was running a candidate (scaled)

    @classmethod
    def backend(cls, store: str | ResultStore | StoredOutcomes, *,
                time_scale: float = 1.0) -> Callable[..., SimulatedDevice]:
        """A picklable ``(spec=, workers=, timeout_s=) -> SimulatedDevice`` over ``store``:
        what ``RayPool(backend=...)`` builds on each device actor."""
        outs = store if isinstance(store, StoredOutcomes) else StoredOutcomes.load(store)
        return functools.partial(cls, outs, time_scale=time_scale)

    @property
    def size(self) -> int:
        """How many candidates it evaluates side by side."""
        return self.workers

    def device_info(self) -> dict[str, Any]:
        """The spec and the stored device's description as its limits."""
        return {"spec": self.spec or "simulated", "limits": dict(self.outcomes.device),
                "simulated": self.outcomes.path}

    def stored(self, lower_fn: Callable[..., Any]) -> StoredOutcome:
        """The stored outcome of the candidate ``lower_fn`` names (a ``StoredCandidate``)."""
        if not isinstance(lower_fn, StoredCandidate):
            raise SimulationError(f"a simulated device evaluates the candidates of a "
                                  f"ReplayTask, not {type(lower_fn).__name__}")
        try:
            return self.outcomes[lower_fn.key]
        except KeyError:
            raise SimulationError(f"{self.outcomes.path} holds no candidate "
                                  f"{dict(lower_fn.mapping)} {dict(lower_fn.tuning)}"
                                  ) from None

    def evaluate_candidate(self, lower_fn: Callable[..., Any], inputs: Mapping[str, Any],
                           reference: Any = None, *, timeout_s: float | None = None,
                           run_limit_s: float | None = None, **kw: Any) -> Outcome:
        """The stored outcome of ``lower_fn``'s candidate, after its stored times; past
        ``timeout_s`` (lowering, build and runs) or ``run_limit_s`` (the early cut: the runs,
        once built, the stored device time standing for the kernels') it
        is a ``timeout`` (``run_limit_s``'s reason starts "runs stopped", as the runner's
        does). ``kw`` (repeats, tolerances...) is what a real device takes; the stored
        outcome already answers it."""
        so = self.stored(lower_fn)
        limit = self.default_timeout_s if timeout_s is None else timeout_s
        k = self.time_scale
        with self._slots:
            if so.offdevice_s > limit:
                time.sleep(limit * k)
                return Outcome(Status.TIMEOUT, f"lowering and build over {limit:.3g} s "
                               "(simulated)", lower_s=so.outcome.lower_s)
            time.sleep(so.offdevice_s * k)
            run_limit = limit - so.offdevice_s
            if run_limit_s is not None:
                run_limit = min(run_limit, run_limit_s)
            with self._gate:
                t0 = time.time()
                time.sleep(min(so.device_s, run_limit) * k)
                window = (t0, time.time())
                with self._lock:
                    self.evaluated += 1
                    self.busy_s += window[1] - window[0]
        if so.device_s > run_limit:
            return Outcome(Status.TIMEOUT, f"runs stopped after {run_limit:.3g} s (simulated)",
                           build_s=so.outcome.build_s, lower_s=so.outcome.lower_s,
                           run_window=window)
        return replace(so.outcome, run_window=window)

    def close(self) -> None:
        """Nothing to stop (no process, no device)."""


class _StoredSpace(ReplaySpace):
    """A store's candidates as the joint space of an exploration (listed, not
    enumerated: no mapping search)."""

    enumerate_s = 0.0


class ReplayTask(Task):
    """The task of a store's candidates (see the module docstring): its joint space is
    what the store holds, its candidates' lowering functions are ``StoredCandidate``s.
    Build it with ``from_store``."""

    _space: _StoredSpace

    @classmethod
    def from_store(cls, store: str | ResultStore) -> ReplayTask:
        """The task of ``store``'s program, fixed sizes and candidates (the store must
        hold the explored program's text: every store written since replay exists)."""
        from ir.syntax import parse
        from mapper.api import problem

        st = store if isinstance(store, ResultStore) else ResultStore(store, readonly=True)
        try:
            meta, ctx, records = st.meta(), st.context(), st.records()
        finally:
            if st is not store:
                st.close()
        if ctx is None or not records:
            raise StoreError(f"{st.path} holds no results: nothing to replay")
        if "explored_program" not in meta:
            raise StoreError(f"{st.path} does not hold the explored program's text (written "
                             "by an older version): it cannot be replayed")
        text = meta["explored_program"]
        fusion = meta.get("fusion") or "always"
        heuristics = meta.get("heuristics", "on") != "off"
        prob = problem(parse(text), fusion=fusion, heuristics=heuristics)
        task = cls(name=f"replay of {ctx.program}", text=text, program=prob.program,
                   sizes=dict(ctx.sizes), inputs={}, reference=None,
                   flops=_flops(records), tolerance={}, fusion=fusion,
                   heuristics=heuristics)
        task._space = _StoredSpace(prob, records, ctx.sizes)
        return task

    def joint(self, device: Any = None) -> Any:
        """The stored candidates (``device`` is the store's: nothing to rebuild)."""
        return self._space

    def lower_fn(self, mapping: Mapping[str, int], tuning: Mapping[str, int]
                 ) -> StoredCandidate:
        """A ``StoredCandidate`` naming the candidate."""
        m, t = _key(mapping, tuning)
        return StoredCandidate(m, t)


def _flops(records: Iterable[Record]) -> int | None:
    """The program's FLOP count as its ``ok`` records imply it (GFLOP/s x time)."""
    got = [r.gflops * 1e9 * r.time_s for r in records if r.ok and r.gflops and r.time_s]
    return int(round(statistics.median(got))) if got else None
