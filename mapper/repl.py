"""``mapper repl``: an interactive shell for debugging a program's mapping constraints.

Load a program, look at its map-nesting tree and rule instances, pin some maps to codes
and ask what remains possible and why not::

    mapper> load examples/cc22_listing3.lift
    mapper> pin A=W0
    mapper> count
    mapper> why C=G0

Predicates are shown simplified, with code names (``A != mapWrg(0)``, ``level(B) < mapLcl``,
``mapper.text``); ``codes`` lists the codes.
"""

from __future__ import annotations

import cmd
import shlex
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from mapper.errors import UsageError as CliError
from mapper.errors import library_errors
from mapper.predicate_print import show_predicate
from mapper.text import show_constraint, show_predicate_short
from mapper.violations import why_violated

if TYPE_CHECKING:
    from mapper.api import MappingProblem

__all__ = ["CODES_HELP", "MapperShell", "run_repl", "show_predicate"]

CODES_HELP = """\
Map codes (CC'22 Table 2); any form is accepted where a code is asked for:
  short  code   name       what the map becomes
  S      0      mapSeq     a sequential loop in one thread
  F      1      fused      fused with the map around it (perfectly nested)
  V      2      mapVec     the vector lanes of one thread, w iterations at a time
  L0-L2  10-12  mapLcl(d)  work-items of a work-group, dimension d
  W0-W2  20-22  mapWrg(d)  work-groups, dimension d
  G0-G2  30-32  mapGlb(d)  global work-items, dimension d
In predicates level(A) is code/10: seq (mapSeq, fused or mapVec) < mapLcl < mapWrg
< mapGlb; dim(A) is code%10; A < mapWrg(0) compares the codes themselves;
"none of A, B is mapWrg(0)": A != mapWrg(0) and B != mapWrg(0); "any of A, B in
{mapLcl(0), mapGlb(0)}": A or B (or both) is one of them."""


class MapperShell(cmd.Cmd):
    """Commands: load, tree, rules, list, codes, pin, unpin, pins, count, enumerate, check,
    why, fusion, quit."""

    intro: str | None = ("liftmap mapping shell: 'help' lists commands, 'codes' the map "
                         "codes, 'quit' leaves.")
    prompt = "mapper> "

    def __init__(self, console: Console | None = None, **kw):
        super().__init__(**kw)
        self.console = console or Console(highlight=False)
        self.problem: MappingProblem | None = None
        self.path: str | None = None
        self.pins: dict[str, int] = {}
        self.fusion = "always"

    # helpers
    def say(self, text: str) -> None:
        self.console.print(text, markup=False)

    def need(self) -> MappingProblem:
        if self.problem is None:
            raise CliError("no program loaded: 'load FILE' first")
        return self.problem

    def onecmd(self, line: str):
        try:
            return super().onecmd(line)
        except KeyboardInterrupt:  # Ctrl-C cancels the command, not the session
            self.console.print("interrupted: the command was cancelled; the program and "
                               "its pins are kept ('quit' leaves)")
            return False
        except Exception as e:
            if not isinstance(e, library_errors()):
                raise  # a bug: the traceback is the report
            self.console.print(f"[red]error:[/red] {escape(str(e))}")
            return False

    def emptyline(self) -> bool:
        return False

    # onecmd returns what default returns, the stop flag (typeshed declares None)
    def default(self, line: str) -> bool:  # type: ignore[override]
        self.say(f"unknown command {line.split()[0]!r}; 'help' lists the commands")
        return False

    # commands
    def do_load(self, arg: str) -> None:
        """load FILE: parse a program and build its mapping problem."""
        from ir.syntax import parse_file
        from mapper.api import problem

        words = _words(arg)
        if len(words) != 1:
            raise CliError("usage: load FILE (one file; quote a path that has spaces)")
        (path,) = words
        self.problem = problem(parse_file(path), fusion=self.fusion)
        self.path, self.pins = path, {}
        p = self.problem
        self.say(f"{path}: {len(p.labels)} maps ({', '.join(p.labels)}), "
                 f"{len(p.constraints)} constraint instances")

    def do_fusion(self, arg: str) -> None:
        """fusion always|never|free: the sequential-fusion strategy (reloads the program)."""
        if arg.strip() not in ("always", "never", "free"):
            raise CliError("usage: fusion always|never|free")
        self.fusion = arg.strip()
        if self.path:
            pins = self.pins
            self.do_load(self.path)
            self.pins = pins

    def do_tree(self, arg: str) -> None:
        """tree: the map-nesting tree with memory use and chains."""
        p = self.need()
        self.say(p.tree.render())
        self.say("chains: " + "  ".join("-".join(c) for c in p.tree.chains()))

    def do_rules(self, arg: str) -> None:
        """rules: constraint instances per rule."""
        for rule, n in self.need().per_rule().items():
            self.say(f"  {rule:26s} {n}")

    def do_list(self, arg: str) -> None:
        """list [RULE|MAP]: the constraint instances, optionally of one rule or about one map."""
        p = self.need()
        key = arg.strip()
        for c in p.constraints:
            if not key or c.rule == key or key in c.subjects:
                self.say(f"  [{c.rule}] {c.description}\n      "
                         f"{show_predicate_short(c.predicate, domains=_domains(p))}")

    def do_codes(self, arg: str) -> None:
        """codes: the map codes (S, F, L0-L2, W0-W2, G0-G2) and how predicates name them."""
        self.say(CODES_HELP)

    def do_pin(self, arg: str) -> None:
        """pin A=W0 B=L0: fix some maps (a contradiction is explained)."""
        from mapper.api import _fixed

        p = self.need()
        new = dict(self.pins)
        new.update(dict(p.mapping(arg)))
        _fixed(p, new)  # raises ContradictoryFixedError with the reason
        self.pins = new
        self.do_pins("")

    def do_unpin(self, arg: str) -> None:
        """unpin A B | unpin: release some or all pinned maps."""
        names = arg.split()
        self.pins = {k: v for k, v in self.pins.items() if names and k not in names}
        self.do_pins("")

    def do_pins(self, arg: str) -> None:
        """pins: the pinned maps."""
        from mapper.encoding import MapCodes

        self.say("pinned: " + (str(MapCodes(self.pins)) if self.pins else "nothing"))

    def do_count(self, arg: str) -> None:
        """count: how many valid mappings agree with the pins."""
        from mapper.api import count_valid_mappings

        n = count_valid_mappings(self.need(), fusion=self.fusion, fixed=self.pins or None)
        self.say(f"{n} valid mapping(s)")

    def do_enumerate(self, arg: str) -> None:
        """enumerate [N]: list valid mappings agreeing with the pins (default 20)."""
        from mapper.api import enumerate_mappings

        words = _words(arg)
        if len(words) > 1 or (words and not (words[0].isascii() and words[0].isdigit())):
            raise CliError(f"usage: enumerate [N]: N is how many mappings to list (default 20),"
                           f" e.g. 'enumerate 5'; got {arg.strip()!r}")
        limit = (int(words[0]) if len(words[0]) <= 9 else None) if words else 20
        for i, m in enumerate(enumerate_mappings(self.need(), fusion=self.fusion,
                                                 fixed=self.pins or None, limit=limit), 1):
            self.say(f"  {i:3d}  {m}")

    def do_check(self, arg: str) -> None:
        """check A=W0 B=L0 C=L0 D=S: a full mapping's violated rule instances, and what
        the mapping does that each forbids."""
        from mapper.api import check_mapping

        p = self.need()
        bad = check_mapping(p, arg, fusion=self.fusion)
        mapping = dict(p.mapping(arg))
        self.say("valid" if not bad else "\n".join(
            f"  [{c.rule}] {c.description}\n      {why_violated(c, mapping, _domains(p))}"
            for c in bad))

    def do_why(self, arg: str) -> None:
        """why C=G0: why can't this hold together with the pins? (a minimal set of rules)"""
        from mapper.api import explain

        p = self.need()
        partial = dict(self.pins)
        partial.update(dict(p.mapping(arg)))
        e = explain(p, partial, fusion=self.fusion)
        if e.possible:
            self.say(str(e))
            return
        self.say(str(e).splitlines()[0])
        for c in e.core:
            self.say(f"  {show_constraint(c, domains=_domains(p))}")

    def do_quit(self, arg: str) -> bool:
        """quit: leave the shell."""
        return True

    do_exit = do_quit
    do_EOF = do_quit  # noqa: N815  (cmd's name for end of input)


def _domains(p: MappingProblem) -> dict[str, tuple[int, ...]]:
    """Each map's possible codes in ``p``."""
    return {m: p.model.param(m).domain for m in p.labels}


def _words(arg: str) -> list[str]:
    """The words of a command's argument (shell quoting); a bad quote is a usage error."""
    try:
        return shlex.split(arg)
    except ValueError as e:  # shlex: "No closing quotation" / "No escaped character"
        raise CliError(f"cannot read {arg!r}: {e}") from None


def run_repl(path: str | None = None, console: Console | None = None) -> int:
    shell = MapperShell(console)
    if path:
        shell.onecmd(f"load {shlex.quote(path)}")
    while True:
        try:
            shell.cmdloop()
            return 0
        except KeyboardInterrupt:  # Ctrl-C at the prompt: a new prompt, nothing lost
            shell.intro = None
            shell.console.print("\n(Ctrl-C: 'quit' leaves the shell)")
