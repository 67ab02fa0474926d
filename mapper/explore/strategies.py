"""Search strategies: plug-ins over the joint mapping x tuning space.

A strategy is a class registered by name with ``@register``. It is built with the task's
``JointSpace``, a seed and its options, and yields ``Candidate`` objects from
``candidates()``; the explorer calls ``observe`` with each candidate's stored row (new or
found in the store) before asking for the next one, so adaptive strategies can learn.
The same seed gives the same sequence, which is what makes a rerun resume a run.

* ``manual``: one fixed mapping (``mapping=``), its tuning space in a seeded random order
  (every configuration once).
* ``solver`` (CC'22): a uniformly random valid mapping from the solver, then a uniformly
  random tuning configuration of it.
* ``random`` (CC'22's naive baseline): uniformly random code assignments until one
  satisfies the mapping constraints (``draws`` counts them), then a random configuration.
  It stops at the run's deadline and after ``max_draws`` fruitless draws in a row.
* ``model`` (``mapper/explore/model.py``, needs scikit-learn): a learned cost model and a
  feasibility classifier choose batches from a pool of valid samples.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from constraints.scalar import compile_predicate
from ir.errors import LiftmapError
from mapper.encoding import MapCodes
from mapper.tuning import JointSpace

if TYPE_CHECKING:
    from mapper.api import MappingProblem
    from mapper.explore.record import Record

STRATEGIES: dict[str, type[Strategy]] = {}


class StrategySpace(Protocol):
    """What a strategy reads of its space: a ``JointSpace``, or the stored candidates of a
    replay (``mapper.explore.replay.ReplaySpace``)."""

    @property
    def problem(self) -> MappingProblem: ...

    @property
    def mappings(self) -> Sequence[MapCodes]: ...

    def tuning(self, mapping: Any) -> Any:
        """The tuning space of ``mapping`` (``params``, ``space``, ``features``...)."""
        ...


@dataclass
class Candidate:
    """A mapping and its tuning values, with how it was found: seconds spent finding the
    mapping, choosing the tuning values, and on the strategy's other work (the ``model``
    strategy's fitting and ranking)."""

    mapping: MapCodes
    tuning: dict[str, int]
    mapping_s: float = 0.0
    tuning_s: float = 0.0
    other_s: float = 0.0
    draws: int | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def search_s(self) -> float:
        """The whole time the strategy took to propose this candidate."""
        return self.mapping_s + self.tuning_s + self.other_s


class StrategyError(LiftmapError, ValueError):
    """A strategy cannot be built (unknown name, bad option): a user error."""


_S = TypeVar("_S", bound="type[Strategy]")


def register(cls: _S) -> _S:
    """Class decorator: makes a strategy available by its ``name``."""
    STRATEGIES[cls.name] = cls
    return cls


def get_strategy(name: str) -> type[Strategy]:
    """The strategy class called ``name``; ``StrategyError`` lists the known ones."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise StrategyError(f"unknown strategy {name!r}; strategies: "
                            f"{', '.join(sorted(STRATEGIES))}") from None


def make_strategy(name: str, joint: JointSpace, seed: int = 0, **options: Any) -> Strategy:
    """Builds the strategy ``name`` over ``joint``."""
    return get_strategy(name)(joint, seed=seed, **options)


class Strategy:
    """Base class. Subclasses set ``name`` and implement ``candidates``.

    ``deadline`` (a ``time.perf_counter()`` value, set by the explorer for a time budget):
    a strategy whose search for one candidate can be long stops searching past it. A
    strategy that ends for a reason of its own sets ``stopped_by`` before returning
    (``"time"``, ``"exhausted: ..."``). ``uses_mappings``: the strategy draws from the
    joint space's enumerated valid mappings, so their enumeration is part of its search.
    ``summary``: what it does in one line (``mapper explore --help`` lists it).
    """

    name = "base"
    summary = ""
    uses_mappings = True

    def __init__(self, joint: StrategySpace, *, seed: int = 0, **options: Any):
        if options:
            raise StrategyError(f"strategy {self.name!r} takes no option(s) "
                                f"{', '.join(sorted(options))}")
        self.joint = joint
        self.seed = seed
        self.rng = random.Random(seed)
        self.draws_total = 0  # code assignments drawn (random strategy)
        self.deadline: float | None = None
        self.stopped_by: str | None = None

    def candidates(self) -> Iterator[Candidate]:
        raise NotImplementedError

    def observe(self, candidate: Candidate, record: Record) -> None:
        """Called with the record of each candidate, evaluated or found in the store
        (default: nothing learned)."""

    # helpers ---------------------------------------------------------------

    def _tuning_sample(self, mapping) -> dict[str, int] | None:
        """A uniform configuration of ``mapping``'s tuning space ({} when it has no
        parameter, None when it is empty or cannot be built)."""
        try:
            tp = self.joint.tuning(mapping)
        except LiftmapError:  # a mapping the lowering cannot apply: no tuning space
            return None
        if not tp.params:
            return {}
        if tp.count() == 0:
            return None
        cfg = tp.space.sample(1, seed=self.rng.randrange(2**31))[0]
        return {k: int(v) for k, v in cfg.items()}


@register
class Manual(Strategy):
    """A fixed mapping (``mapping="A=W0 B=L0 ..."``), every tuning configuration once in a
    seeded random order."""

    name = "manual"
    summary = "one fixed --mapping, every tuning configuration once (seeded order)"
    uses_mappings = False

    def __init__(self, joint: StrategySpace, *, seed: int = 0, mapping=None, **options: Any):
        super().__init__(joint, seed=seed, **options)
        if mapping is None:
            raise StrategyError("strategy 'manual' needs a mapping, e.g. --mapping "
                                "'A=W0 B=L0 C=L0 D=S'")
        from mapper.api import check_mapping

        p = joint.problem
        self.mapping = p.mapping(mapping)
        bad = check_mapping(p, self.mapping, fusion=p.fusion)
        if bad:
            names = sorted({c.rule for c in bad})
            hint = ""
            if all("fusion" in r for r in names) and p.fusion != "free":
                hint = (f" (under fusion {p.fusion!r} a sequential map that can be fused must "
                        "be: write it F, or explore with --fusion free)")
            raise StrategyError(f"mapping {self.mapping} is not valid (violates "
                                f"{', '.join(names)}){hint}; `mapper check` says why")

    def candidates(self) -> Iterator[Candidate]:
        t0 = time.perf_counter()
        tp = self.joint.tuning(self.mapping)
        if not tp.params:
            yield Candidate(self.mapping, {}, tuning_s=time.perf_counter() - t0)
            return
        for cfg in tp.space.iter_random(seed=self.seed):
            yield Candidate(self.mapping, {k: int(v) for k, v in cfg.items()},
                            tuning_s=time.perf_counter() - t0)
            t0 = time.perf_counter()


@register
class Solver(Strategy):
    """CC'22: a uniformly random valid mapping (the solver's enumeration), then a uniformly
    random configuration of its tuning space."""

    name = "solver"
    summary = "CC'22: a uniformly random valid mapping, then uniformly random tuning"

    def candidates(self) -> Iterator[Candidate]:
        pool = list(self.joint.mappings)
        map_s = tun_s = 0.0  # carried over mappings without a tuning configuration
        while pool:
            t0 = time.perf_counter()
            m = self.rng.choice(pool)
            t1 = time.perf_counter()
            cfg = self._tuning_sample(m)
            map_s += t1 - t0
            tun_s += time.perf_counter() - t1
            if cfg is None:  # an empty tuning space: this mapping has no candidate
                pool.remove(m)
                continue
            yield Candidate(m, cfg, map_s, tun_s)
            map_s = tun_s = 0.0


@register
class RandomAssignment(Strategy):
    """CC'22's naive baseline: uniformly random codes for every map until an assignment
    satisfies the constraints; ``draws`` is how many were drawn for this candidate.

    The search stops at ``deadline`` (``stopped_by = "time"``) and after ``max_draws``
    draws without a valid assignment with a tuning configuration (``stopped_by =
    "exhausted: no valid candidate in N draws"``); ``draws_total`` counts every draw."""

    name = "random"
    summary = "CC'22's baseline: uniformly random codes until valid, then random tuning"
    uses_mappings = False
    max_draws = 10_000_000
    memo_size = 1_000_000
    check_every = 4096  # draws between two looks at the clock

    def candidates(self) -> Iterator[Candidate]:
        p = self.joint.problem
        doms = [(m, p.model.param(m).domain) for m in p.labels]
        checks = [(compile_predicate(c.predicate, tuple(sorted(c.params))), tuple(sorted(c.params)))
                  for c in p.constraints]
        labels = [m for m, _ in doms]
        memo: dict[tuple, bool] = {}  # validity of assignments drawn before (bounded)
        valid = set(self.joint.mappings)
        empty: set = set()
        draws = 0  # since the last candidate, mappings without a configuration included
        map_s = tun_s = 0.0
        while not valid <= empty:
            t0 = time.perf_counter()
            while True:
                draws += 1
                self.draws_total += 1
                codes = tuple(self.rng.choice(d) for _, d in doms)
                ok = memo.get(codes)
                if ok is None:
                    a = dict(zip(labels, codes))
                    ok = all(fn(*(a[x] for x in names)) for fn, names in checks)
                    if len(memo) < self.memo_size:
                        memo[codes] = ok
                if ok:
                    a = dict(zip(labels, codes))
                    break
                if draws >= self.max_draws:
                    self.stopped_by = f"exhausted: no valid candidate in {draws:,} draws"
                    return
                if draws % self.check_every == 0 and self.deadline is not None \
                        and time.perf_counter() >= self.deadline:
                    self.stopped_by = "time"
                    return
            t1 = time.perf_counter()
            map_s += t1 - t0
            m = MapCodes(a)
            cfg = None if m in empty else self._tuning_sample(m)
            tun_s += time.perf_counter() - t1
            if cfg is None:
                empty.add(m)
                continue
            yield Candidate(m, cfg, map_s, tun_s, draws=draws)
            draws, map_s, tun_s = 0, 0.0, 0.0
        self.stopped_by = "exhausted: no valid mapping has a tuning configuration"
