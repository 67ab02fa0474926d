"""The options the benchmark scripts share, range-checked: a refused value is one usage
line and exit status 2, not a traceback half-way through a timed run. (experiments/ does
not import the command line, whose ``mapper.cli.options`` checks the commands' own.)"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

MAX_ROUNDS = 10**4  # interleaved rounds of one benchmark
MAX_REPEATS = 10**6  # timed runs of one contender per round
MAX_SEED = 2**32 - 1  # numpy's legacy seeding takes 0..2^32-1


def ranged(kind: Callable[[str], float], lo: float, hi: float,
           what: str) -> Callable[[str], float]:
    """argparse type: ``kind(text)`` (``int`` or ``float``) within ``lo``..``hi``, else
    one line naming ``what`` the option takes."""
    def parse(text: str) -> float:
        try:
            x = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:24]!r} is not {what}") from None
        if not (lo <= x <= hi and math.isfinite(x)):
            raise argparse.ArgumentTypeError(f"{text[:24]} is out of range: give {what} in "
                                             f"{lo:g}..{hi:g}")
        return x

    return parse


def add_rounds(p: argparse.ArgumentParser, default: int) -> None:
    """``--rounds N``: interleaved rounds, 1 or more."""
    p.add_argument("--rounds", type=ranged(int, 1, MAX_ROUNDS, "a number of rounds"),
                   default=default, help=f"interleaved rounds (default {default})")


def add_interleaving(p: argparse.ArgumentParser, *, rounds: int, repeats: int,
                     settle: float | None = None, settle_help: str = "") -> None:
    """``--rounds`` (:func:`add_rounds`), ``--repeats`` (timed runs of each contender per
    round) and, given a default, ``--settle`` (idle seconds before each)."""
    add_rounds(p, rounds)
    p.add_argument("--repeats", type=ranged(int, 1, MAX_REPEATS, "a number of runs"),
                   default=repeats, help=f"timed runs of each contender per round (default "
                   f"{repeats})")
    if settle is not None:
        p.add_argument("--settle", type=ranged(float, 0.0, 3600.0, "seconds"),
                       default=settle, help=settle_help or f"idle seconds before each "
                       f"contender's round (default {settle})")


def add_json(p: argparse.ArgumentParser, what: str = "every figure") -> None:
    """``--json PATH``: where the script writes ``what``."""
    p.add_argument("--json", help=f"write {what} here")


def add_bench_seed(p: argparse.ArgumentParser, default: int = 0) -> None:
    """``--seed N`` of a benchmark's exploration or sampling."""
    p.add_argument("--seed", type=ranged(int, 0, MAX_SEED, "a seed"), default=default,
                   help=f"seed of the exploration or sampling (default {default})")


def add_samples(p: argparse.ArgumentParser, default: int, what: str = "samples") -> None:
    """``--samples N``, 1 or more."""
    p.add_argument("--samples", type=ranged(int, 1, 10**9, "a number of samples"),
                   default=default, help=f"{what} (default {default})")
