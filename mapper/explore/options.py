"""The options of an exploration, grouped in typed values (``explore(..., options=...)``).

``explore`` takes its components (the task, a strategy, a budget, a store, a pool) as
arguments and everything else as one :class:`ExploreOptions`, whose parts say what they
are about: how each candidate is judged (:class:`Evaluation`), the re-timing of the best
at the end (:class:`Retiming`), how a program becomes its space (:class:`SpaceOptions`; a
``Task`` has its own) and where candidates run (:class:`Devices`).

    from mapper.explore import ExploreOptions, explore
    explore(task, budget="5m", options=ExploreOptions.of(repeats=5, timeout_s=10))

:meth:`ExploreOptions.of` takes the flat names (``repeats``, ``workers``, ``fusion``...)
and puts each in its group; :meth:`ExploreOptions.but` changes some of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from mapper.errors import ConfigurationError


@dataclass(frozen=True)
class Evaluation:
    """How each candidate is judged. ``timeout_s`` limits one candidate's lowering, build
    and runs. ``repeats``: timed executions. ``cut``: the early cut (``None`` or 0: off):
    once a candidate ran ok, the next ones' first execution may run ``cut`` times the best
    kernel time (at least ``cut_min_s``, at most ``timeout_s``). ``run_budget_s``: a
    candidate's timed repeats stop after about this long. ``known_best_s``: a kernel time
    known to be reachable (another variant's best), which the early cut measures against
    until the run has a faster candidate."""

    timeout_s: float = 30.0
    repeats: int = 3
    cut: float | None = 3.0
    cut_min_s: float = 2.0
    run_budget_s: float | None = 1.0
    known_best_s: float | None = None


@dataclass(frozen=True)
class Retiming:
    """At the end, the ``best`` best ``ok`` candidates are timed again in ``rounds``
    interleaved rounds (``best=0``: no re-timing); during the run, a candidate whose
    stored time beats the answer's is timed again beside it in ``challenge`` interleaved
    rounds before it becomes the answer (``mapper.explore.incumbent``; 0: never)."""

    best: int = 8
    rounds: int = 3
    challenge: int = 2


@dataclass(frozen=True)
class SpaceOptions:
    """How a program (not a ``Task``: it has its own) becomes the space explored: the
    mapping rules (``fusion``, ``heuristics``), the largest value of a tuning range
    (``max_value``), its FLOP count, and for a ``Pipeline`` its ``inputs``/``reference``."""

    fusion: str = "always"
    heuristics: bool = True
    max_value: int | None = None
    flops: int | None = None
    inputs: Any = None
    reference: Any = None


@dataclass(frozen=True)
class Devices:
    """Where candidates run when no pool is given: the ``device`` spec, ``workers``
    processes lowering and building in parallel, or a Ray cluster (``ray``: its address,
    or ``True``/``"local"``)."""

    device: str | None = None
    workers: int = 1
    ray: str | bool | None = None


@dataclass(frozen=True)
class ExploreOptions:
    """Every option of an exploration. ``seed``: the strategy's. ``count``: count the
    joint space first (information only: it builds every mapping's tuning space)."""

    evaluation: Evaluation = field(default_factory=Evaluation)
    retiming: Retiming = field(default_factory=Retiming)
    space: SpaceOptions = field(default_factory=SpaceOptions)
    devices: Devices = field(default_factory=Devices)
    seed: int = 0
    count: bool = False

    @classmethod
    def of(cls, **flat: Any) -> ExploreOptions:
        """The options with the given ones changed, by their flat names (``repeats=5``,
        ``workers=2``, ``retime=0``...: see :func:`option_names`)."""
        return cls().but(**flat)

    def but(self, **flat: Any) -> ExploreOptions:
        """These options with some changed, by their flat names."""
        groups: dict[str, dict[str, Any]] = {}
        top: dict[str, Any] = {}
        for name, value in flat.items():
            where = _WHERE.get(name)
            if where is None:
                raise ConfigurationError(
                    f"{name!r} is not an option of an exploration; the options are "
                    f"{', '.join(sorted(_WHERE))}")
            group, attr = where
            if group is None:
                top[attr] = value
            else:
                groups.setdefault(group, {})[attr] = value
        out = replace(self, **top)
        for group, changes in groups.items():
            out = replace(out, **{group: replace(getattr(out, group), **changes)})
        return out


# flat name -> (its group, its name there); the re-timing's are retime and retime_rounds,
# as the command line says them
_WHERE: dict[str, tuple[str | None, str]] = {
    **{f.name: ("evaluation", f.name) for f in fields(Evaluation)},
    **{f.name: ("space", f.name) for f in fields(SpaceOptions)},
    **{f.name: ("devices", f.name) for f in fields(Devices)},
    "retime": ("retiming", "best"),
    "retime_rounds": ("retiming", "rounds"),
    "retime_challenge": ("retiming", "challenge"),
    "seed": (None, "seed"),
    "count": (None, "count"),
}


def option_names() -> tuple[str, ...]:
    """The flat names :meth:`ExploreOptions.of` takes."""
    return tuple(sorted(_WHERE))
