"""Exploration: strategies over the joint mapping x tuning space, an evaluator on the
device and a resumable SQLite results store (see ``docs/exploration.md``).

    from mapper.explore import explore
    res = explore("examples/cc22_listing3.lift", {"N": 4096}, strategy="solver",
                  budget=50, store="results/listing3.sqlite")
    print(res.summary())
    print(res.final.short_mapping, dict(res.final.tuning))  # a Record: A=W0 B=L0 ...
"""

from mapper.explore import model as _model  # noqa: F401  (registers the "model" strategy)
from mapper.explore.options import (
    Devices,
    Evaluation,
    ExploreOptions,
    Retiming,
    SpaceOptions,
    option_names,
)
from mapper.explore.record import Record, Retimed, Tuning
from mapper.explore.replay import Comparison, compare, replay
from mapper.explore.run import Budget, BudgetError, Results, explore, parse_budget
from mapper.explore.store import (
    Context,
    ResultStore,
    StoreError,
    StoreMismatchError,
    candidate_key,
)
from mapper.explore.strategies import (
    STRATEGIES,
    Candidate,
    Strategy,
    StrategyError,
    get_strategy,
    make_strategy,
    register,
)
from mapper.explore.task import Task, conv_reference, layout_variants, program_variants

__all__ = [
    "Budget", "BudgetError", "Results", "explore", "parse_budget", "Context", "ResultStore",
    "StoreError", "StoreMismatchError", "candidate_key", "STRATEGIES", "Candidate",
    "Strategy", "StrategyError", "get_strategy", "make_strategy", "register", "Task",
    "conv_reference", "Comparison", "compare", "replay", "Record", "Retimed",
    "Tuning", "ExploreOptions", "Evaluation", "Retiming", "SpaceOptions", "Devices",
    "option_names", "layout_variants", "program_variants",
]
