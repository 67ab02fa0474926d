"""``mapper repl``: an interactive shell for debugging a program's mapping constraints.

Load a program, look at its map-nesting tree and rule instances, pin some maps to codes
and ask what remains possible and why not::

    mapper> load examples/cc22_listing3.lift
    mapper> pin A=W0
    mapper> count
    mapper> why C=G0
"""

from __future__ import annotations

import cmd
import shlex

from rich.console import Console
from rich.markup import escape

from constraints.errors import ConstraintError
from ir.errors import IRError
from mapper.errors import MapperError

_ERRORS = (IRError, MapperError, ConstraintError, ValueError, OSError)


class MapperShell(cmd.Cmd):
    """Commands: load, tree, rules, list, pin, unpin, pins, count, enumerate, check, why,
    fusion, quit."""

    intro = "liftmap mapping shell: 'help' lists commands, 'quit' leaves."
    prompt = "mapper> "

    def __init__(self, console: Console | None = None, **kw):
        super().__init__(**kw)
        self.console = console or Console(highlight=False)
        self.problem = None
        self.path: str | None = None
        self.pins: dict[str, int] = {}
        self.fusion = "always"

    # helpers
    def say(self, text: str) -> None:
        self.console.print(text, markup=False)

    def need(self):
        if self.problem is None:
            raise ValueError("no program loaded: 'load FILE' first")
        return self.problem

    def onecmd(self, line: str):
        try:
            return super().onecmd(line)
        except _ERRORS as e:
            self.console.print(f"[red]error:[/red] {escape(str(e))}")
            return False
        except KeyboardInterrupt:  # Ctrl-C cancels the command, not the session
            self.console.print("interrupted: the command was cancelled; the program and "
                               "its pins are kept ('quit' leaves)")
            return False

    def emptyline(self) -> bool:
        return False

    def default(self, line: str) -> bool:
        self.say(f"unknown command {line.split()[0]!r}; 'help' lists the commands")
        return False

    # commands
    def do_load(self, arg: str) -> None:
        """load FILE: parse a program and build its mapping problem."""
        from ir.syntax import parse_file
        from mapper.api import problem

        (path,) = shlex.split(arg) or [""]
        if not path:
            raise ValueError("usage: load FILE")
        self.problem = problem(parse_file(path), fusion=self.fusion)
        self.path, self.pins = path, {}
        p = self.problem
        self.say(f"{path}: {len(p.labels)} maps ({', '.join(p.labels)}), "
                 f"{len(p.constraints)} constraint instances")

    def do_fusion(self, arg: str) -> None:
        """fusion always|never|free: the sequential-fusion strategy (reloads the program)."""
        if arg.strip() not in ("always", "never", "free"):
            raise ValueError("usage: fusion always|never|free")
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
                self.say(f"  [{c.rule}] {c.description}\n      {c.predicate}")

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
        from mapper.encoding import Mapping

        self.say("pinned: " + (str(Mapping(self.pins)) if self.pins else "nothing"))

    def do_count(self, arg: str) -> None:
        """count: how many valid mappings agree with the pins."""
        from mapper.api import count_mappings

        n = count_mappings(self.need(), fusion=self.fusion, fixed=self.pins or None)
        self.say(f"{n} valid mapping(s)")

    def do_enumerate(self, arg: str) -> None:
        """enumerate [N]: list valid mappings agreeing with the pins (default 20)."""
        from mapper.api import enumerate_mappings

        limit = int(arg) if arg.strip() else 20
        for i, m in enumerate(enumerate_mappings(self.need(), fusion=self.fusion,
                                                 fixed=self.pins or None, limit=limit), 1):
            self.say(f"  {i:3d}  {m}")

    def do_check(self, arg: str) -> None:
        """check A=W0 B=L0 C=L0 D=S: a full mapping's violated rule instances."""
        from mapper.api import check_mapping

        bad = check_mapping(self.need(), arg, fusion=self.fusion)
        self.say("valid" if not bad else "\n".join(f"  [{c.rule}] {c.description}"
                                                   for c in bad))

    def do_why(self, arg: str) -> None:
        """why C=G0: why can't this hold together with the pins? (a minimal set of rules)"""
        from mapper.api import explain

        p = self.need()
        partial = dict(self.pins)
        partial.update(dict(p.mapping(arg)))
        self.say(str(explain(p, partial, fusion=self.fusion)))

    def do_quit(self, arg: str) -> bool:
        """quit: leave the shell."""
        return True

    do_exit = do_quit
    do_EOF = do_quit  # noqa: N815  (cmd's name for end of input)


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
