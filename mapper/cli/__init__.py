"""The ``mapper`` command line: show, constraints, enumerate, check, explain, space, device,
run, repl, explore, results, plot, tune, demo (``python -m mapper.cli`` runs it too).

The package only parses and prints over the library: ``args`` (the parser), ``common``
(consoles, JSON, progress, loading), ``mapping``, ``build``, ``explore``, ``tune`` and
``demo`` (the commands). It imports nothing of ``experiments/`` (a test forbids it): the
main job runs from a checkout, ``python -m experiments.demo``; ``mapper demo`` is its
installed part, a program written plainly and what the search makes of it.

Every command takes a program file in the text syntax (see ``ir/syntax.py``). User
mistakes (bad files, bad arguments, bad mappings, contradictory constraints) print one
clear error and exit with status 2; nothing prints a traceback for them. Commands that
print results take ``--json`` (one JSON document on stdout; schema in docs/cli-json.md).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Sequence

from rich.markup import escape

from mapper.cli.args import build_parser, negative_values_joined
from mapper.cli.build import cmd_device, cmd_repl, cmd_run, cmd_space
from mapper.cli.common import (
    JSON_SCHEMA_VERSION,
    CliError,
    console,
    err_console,
    located,
    parse_domains,
)
from mapper.cli.demo import cmd_demo
from mapper.cli.explore import cmd_explore, cmd_plot, cmd_results
from mapper.cli.mapping import cmd_check, cmd_constraints, cmd_enumerate, cmd_explain, cmd_show
from mapper.cli.tune import cmd_tune
from mapper.errors import library_errors
from mapper.sizes import parse_sizes

__all__ = ["main", "build_parser", "COMMANDS", "CliError", "JSON_SCHEMA_VERSION", "console",
           "err_console", "located", "parse_domains", "parse_sizes", "library_errors"]

COMMANDS = {
    "show": cmd_show,
    "constraints": cmd_constraints,
    "enumerate": cmd_enumerate,
    "check": cmd_check,
    "explain": cmd_explain,
    "space": cmd_space,
    "device": cmd_device,
    "repl": cmd_repl,
    "run": cmd_run,
    "explore": cmd_explore,
    "results": cmd_results,
    "plot": cmd_plot,
    "tune": cmd_tune,
    "demo": cmd_demo,
}
TILING_AUTO = ("show", "constraints", "enumerate", "space")  # --tiling auto: every variant


def _each_tiling(args: argparse.Namespace) -> int:
    """``--tiling auto`` on a program command: the command once per variant of the program
    (unfused, then its local and private tilings where it tiles), each under a heading;
    with ``--json`` one document whose ``variants`` hold each variant's document. A variant
    the command refuses (``space`` of a program with nothing to tune) says why in its
    place (``{"error": ...}``); the status is 2 only when every variant was refused."""
    from ir.tiling import tiling_variants
    from mapper.cli.common import collect_json, emit_json, load

    if getattr(args, "mapping", None):
        raise CliError("--mapping names the maps of one variant: give --tiling none, local "
                       "or private with it, not auto")
    names = list(tiling_variants(load(argparse.Namespace(**{**vars(args), "tiling": "none"}))))
    as_json = getattr(args, "json", False)
    docs: dict[str, object] = {}
    refused = 0
    for name in names:
        tiling = "none" if name == "unfused" else name.removeprefix("tiled-")
        one = argparse.Namespace(**{**vars(args), "tiling": tiling})
        if not as_json:
            console.rule(f"{name} (--tiling {tiling})")
        try:
            with collect_json() if as_json else contextlib.nullcontext() as got, \
                    contextlib.redirect_stdout(io.StringIO()) if as_json \
                    else contextlib.nullcontext():  # only the collected document counts
                rc = COMMANDS[args.command](one)
        except library_errors() as e:
            refused += 1
            why = located(e, getattr(one, "sources", ()))
            if as_json:
                docs[name] = {"error": why}
            else:
                console.print(f"refused for this variant: {escape(why)}", soft_wrap=True)
            continue
        if rc != 0:
            return rc
        if as_json:
            if got is None or len(got) != 1:
                raise CliError(f"{args.command} gave {len(got or [])} JSON documents for "
                               f"the variant {name}, not one (a bug: please report it)")
            docs[name] = got[0]
    if refused == len(names):
        raise CliError(f"every variant was refused ({', '.join(names)}): see above"
                       if not as_json else
                       "; ".join(f"{k}: {v['error']}" for k, v in docs.items()
                                 if isinstance(v, dict)))
    if as_json:
        emit_json(args.command, {"tiling": "auto", "variants": docs})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the library's errors print one line on stderr and give status 2."""
    ap = build_parser()
    args = ap.parse_args(negative_values_joined(ap, sys.argv[1:] if argv is None else argv))
    try:
        if getattr(args, "tiling", None) == "auto" and args.command in TILING_AUTO:
            return _each_tiling(args)
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    except BrokenPipeError:  # stdout closed early (| head): stop quietly, as cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush goes nowhere
        return 141
    except Exception as e:
        if not isinstance(e, library_errors()):
            raise  # a bug: the traceback is the report
        err_console.print(f"[red]error:[/red] {escape(located(e, getattr(args, 'sources', ())))}",
                          soft_wrap=True)
        return 2
