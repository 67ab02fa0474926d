"""What the commands share: the consoles, JSON output, progress bars, loading a program
(its source map kept for located errors), ``--domain`` and ``--device`` parsing."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console

from mapper.encoding import MapCodes
from mapper.errors import UsageError
from mapper.space_report import MAX_RANGE  # noqa: F401  (its importers: args, build)

console = Console(highlight=False)


err_console = Console(stderr=True, highlight=False)




JSON_SCHEMA_VERSION = 1


class CliError(UsageError):
    """An argument given on the command line is wrong; the message says what to do."""


def store_path(text: str | None) -> str | None:
    """``--store``'s value (None when not given); ``CliError`` for an empty one."""
    if text is not None and not text.strip():
        raise CliError("--store needs a file name (such as results/run.sqlite); got an "
                       "empty one: leave --store out for the default")
    return text


def mapping_json(m) -> dict[str, str]:
    """A mapping as ``{"A": "W0", "B": "L0"}`` (short codes, accepted by ``--mapping``)."""
    return MapCodes(m).to_json()


def instance_json(c, mapping=None, domains=None) -> dict:
    """A constraint instance as JSON: rule, kind, maps, description, the predicate over
    the code numbers (``predicate``) and simplified with code names (``predicate_named``,
    abridged past ``mapper.text.SHOW_LIMIT`` characters); given the ``mapping`` that
    violates it, ``why``: what that mapping does that the rule forbids."""
    from mapper.rules import rule_kind
    from mapper.text import show_predicate_short
    from mapper.violations import why_violated

    doc = {"rule": c.rule, "kind": rule_kind(c.rule), "maps": list(c.subjects),
           "description": c.description, "predicate": str(c.predicate),
           "predicate_named": show_predicate_short(c.predicate, domains=domains)}
    if mapping is not None:
        doc["why"] = why_violated(c, mapping, domains)
    return doc


def _json_default(x):
    if hasattr(x, "item"):  # numpy scalars
        return x.item()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    return str(x)


_collected: list[list[dict]] = []  # the open collect_json blocks, innermost last


def emit_json(command: str, doc: dict) -> None:
    """Print one JSON object for ``command`` on one line of stdout (``command`` and
    ``schema`` first), or hand it to the innermost ``collect_json`` block."""
    out = {"command": command, "schema": JSON_SCHEMA_VERSION, **doc}
    if _collected:
        _collected[-1].append(out)
        return
    sys.stdout.write(json.dumps(out, default=_json_default) + "\n")


@contextmanager
def collect_json() -> Iterator[list[dict]]:
    """The documents ``emit_json`` is given inside the block, collected instead of printed
    (a command run for each variant of a program, its documents nested in one)."""
    docs: list[dict] = []
    _collected.append(docs)
    try:
        yield docs
    finally:
        _collected.pop()


@contextmanager
def progress(label: str, total: int | None = None) -> Iterator[Callable[..., None]]:
    """A progress display on stderr while the block runs (only when stderr is a terminal);
    yields ``update(done, info="")``."""
    if not err_console.is_terminal:
        yield lambda done, info="": None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    cols = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        cols += [BarColumn(), MofNCompleteColumn()]
    cols += [TextColumn("{task.fields[info]}"), TimeElapsedColumn()]
    with Progress(*cols, console=err_console, transient=True) as bar:
        task = bar.add_task(label, total=total, info="")

        def update(done: int, info: str = "") -> None:
            bar.update(task, completed=done, info=info)

        yield update


def load(args: argparse.Namespace, path: str | None = None):
    """The program in ``path`` (default ``args.file``); its source map is kept in
    ``args.sources`` so that an error about one of its nodes names file, line and column
    (``main`` attaches it)."""
    from ir.source_map import parse_mapped

    program, source = parse_mapped(path if path is not None else args.file)
    if not hasattr(args, "sources"):
        args.sources = []
    args.sources.append(source)
    if getattr(args, "tiling", None) not in (None, "none"):
        from ir.tiling import fuse_through_tiling

        program = fuse_through_tiling(program, memory=args.tiling,
                                      unfused=unfused_stages(args))
    elif getattr(args, "unfused", None):
        raise CliError("--unfused names stages a tiling leaves unfused: give it with "
                       "--tiling local, private or global")
    return program


def unfused_stages(args: argparse.Namespace) -> tuple[str, ...]:
    """The stage labels of ``--unfused A,C`` (none without it)."""
    text = getattr(args, "unfused", None) or ""
    labels = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in labels if not re.fullmatch(r"[A-Za-z_]\w{0,63}", x)]
    if bad:
        raise CliError(f"--unfused {text!r}: give map labels separated by commas, e.g. A,C")
    return labels


def located(e: BaseException, sources: Sequence = ()) -> str:
    """The error's text; a type error about a node of a program loaded from ``sources``
    (``ir.source_map.SourceMap``) names its file, line and column."""
    for source in sources:
        if source.attach(e):
            break
    return str(e)


def _int(text: str, what: str) -> int:
    t = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,12}", t):
        raise CliError(f"{what}: {t!r} is not an integer (at most 12 digits)")
    return int(t)


def parse_domains(items) -> dict[str, tuple[int, ...] | range]:
    """``["theta=3..20", "v=1,2,4"]`` -> domains; each name once, values 0 or more, a
    range of at most ``MAX_RANGE`` values."""
    out: dict[str, tuple[int, ...] | range] = {}
    form = "write NAME=LO..HI (e.g. s0=1..64) or NAME=a,b,c (e.g. v=1,2,4)"
    for item in items or ():
        if "=" not in item:
            raise CliError(f"--domain {item!r}: {form}")
        k, v = (x.strip() for x in item.split("=", 1))
        what = f"--domain {item!r}"
        if not k.isidentifier() or not k.isascii():
            raise CliError(f"{what}: {k!r} is not a parameter name; {form}")
        if k in out:
            raise CliError(f"{what}: the domain of {k} is given twice; give it once")
        if ".." in v:
            lo_t, hi_t = v.split("..", 1)
            lo, hi = _int(lo_t, what), _int(hi_t, what)
            if lo > hi:
                raise CliError(f"{what}: the range is empty ({lo} > {hi}); {form}")
            if hi - lo + 1 > MAX_RANGE:
                raise CliError(f"{what}: {hi - lo + 1:,} values is too many (at most "
                               f"{MAX_RANGE:,}); narrow the range")
            dom: tuple[int, ...] | range = range(lo, hi + 1)
        else:
            parts = [x for x in v.split(",") if x.strip()]
            if not parts:
                raise CliError(f"{what}: no value given; {form}")
            dom = tuple(_int(x, what) for x in parts)
        if min(dom) < 0:
            raise CliError(f"{what}: tuning values are 0 or more, got {min(dom)}")
        out[k] = dom
    return out


def target(spec: str | None):
    """The ``codegen.target.Device`` named by ``--device`` (a preset, a JSON description or
    a live OpenCL device); without one, the device ``LIFTMAP_DEVICE`` names (refused when
    it names none) or the default preset."""
    from codegen.device import ENV_VAR
    from codegen.target import DEFAULT_DEVICE, resolve

    if spec is None and os.environ.get(ENV_VAR):
        return resolve(None)
    return DEFAULT_DEVICE if spec is None else resolve(spec)
