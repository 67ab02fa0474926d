"""The command line's argument types (range-checked: argparse turns a refusal into one
usage line and exit status 2) and the options several commands share."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _non_negative(text: str) -> int:
    """argparse type: an integer >= 0 (argparse turns the error into one usage line)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} is negative; give 0 or more")
    return n


def _float_seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None


def _seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0."""
    x = _float_seconds(text)
    if not x >= 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 or more seconds (0: no limit)")
    return x


MAX_SEED = 2**32 - 1  # numpy's legacy seeding takes 0..2^32-1
MAX_REPEATS = 10**6  # timed executions of one kernel
MAX_WORKERS = 256  # worker processes of mapper explore
MAX_REPLAY_SEEDS = 10**4  # mapper results --compare
MAX_TOP = 2**31 - 1  # rows mapper results shows


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    """argparse type: an integer in ``lo``..``hi``."""
    def parse(text: str) -> int:
        shown = text if len(text) <= 24 else f"{text[:12]}...({len(text)} characters)"
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown!r} is not an integer") from None
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{shown} is out of range: give an integer in "
                                             f"{lo}..{hi}")
        return n

    return parse


def _positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    x = _float_seconds(text)
    if not 0 < x < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds more than 0")
    return x


DEVICE_HELP = "OpenCL device spec (default: LIFTMAP_DEVICE or the first that builds)"


def add_device(p: argparse.ArgumentParser, help: str = DEVICE_HELP) -> None:
    """``--device SPEC``."""
    p.add_argument("--device", help=help)


def add_seed(p: argparse.ArgumentParser, help: str, default: int | None = 0) -> None:
    """``--seed N``, an integer numpy can seed with."""
    p.add_argument("--seed", type=_int_in(0, MAX_SEED), default=default, help=help)


def add_timeout(p: argparse.ArgumentParser, default: float, help: str, *,
                zero_off: bool = False) -> None:
    """``--timeout SECONDS``: more than 0, or (``zero_off``) 0 for no limit."""
    p.add_argument("--timeout", type=_seconds if zero_off else _positive_seconds,
                   default=default, help=help)


def add_repeats(p: argparse.ArgumentParser, default: int, help: str) -> None:
    """``--repeats N``: timed executions, 1 or more."""
    p.add_argument("--repeats", type=_int_in(1, MAX_REPEATS), default=default, help=help)


def add_search(p: argparse.ArgumentParser, *, strategy: str, budget: str,
               budget_default: str | None, store: str, seed: str, device: str = DEVICE_HELP,
               timeout: tuple[float, str]) -> None:
    """What a searching command takes: ``--strategy`` (default model), ``--budget``,
    ``--store``, ``--seed``, ``--device`` and ``--timeout`` (per candidate: default, help)."""
    p.add_argument("--strategy", default="model", help=strategy)
    p.add_argument("--budget", default=budget_default, help=budget)
    p.add_argument("--store", help=store)
    add_seed(p, seed)
    add_device(p, device)
    add_timeout(p, *timeout)
