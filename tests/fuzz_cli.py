"""A mutation fuzzer for the ``mapper`` command line, run in-process.

Every case is a mutated example program (``examples/*.lift``) given to one command
(``show``, ``enumerate --count``, ``constraints``, ``check --mapping``) through
``mapper.cli.main``, with stdout and stderr captured. A case ends as:

- ``ok`` (status 0), ``error`` (status 1 or 2: a clean message), ``usage`` (argparse's
  ``SystemExit``),
- ``unlocated``: a clean error about the program's text or types (a ``ParseError`` or an
  ``IRTypeError``) that does not name its line and column (a bug),
- ``traceback``: any other exception escapes ``main`` (a bug),
- ``hang``: the case runs past its time limit (``signal.alarm``; Unix main thread only).

Mutations: delete, duplicate, swap, replace or insert tokens; unicode noise; huge numbers;
truncation; bytes that are not UTF-8 (random bytes, UTF-16 with its byte order mark,
Latin-1, a stray, truncated, overlong or surrogate sequence); and generated edge cases
(deep map nesting, deep brackets and types, long ``o`` chains, many sibling maps).
``python tests/fuzz_cli.py --cases 3000`` prints the tally per command and every
traceback, hang or unlocated error with its reproducer.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import re
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
COMMANDS = ("show", "count", "constraints", "check")
OUTCOMES = ("ok", "error", "usage", "unlocated", "traceback", "hang")
FINDINGS = ("unlocated", "traceback", "hang")  # the outcomes that are bugs
LOCATED = re.compile(r"line \d+, column \d+")

_TOKEN = re.compile(r"\s+|#[^\n]*|[A-Za-z_][A-Za-z_0-9]*|[0-9]+(?:\.[0-9]*)?f?|->|\S")
_POOL = (
    "map", "mapA", "mapSeq", "reduce", "split", "join", "zip", "id", "o", "$", "\\", "->",
    "(", ")", "[", "]", "<", ">", ",", ":", "=", "_", "+", "*", "let", "in", "toLocal",
    "toPrivate", "toGlobal", "transpose", "slideND", "float", "int", "float<0>", "float<-1>",
    "asVector", "kernel", "global", "userfun", "#", "0", "-1", "0.0f", "N", "X", "s0",
    "٢.٥", "é", "λ", "\u200b", "𝑥", "🙂", "\x00", "\t", "\n", "N" * 300,
    "9" * 40, "1" + "0" * 400, "1e999", "0x1F",
)


def examples() -> dict[str, str]:
    """The example programs by file name."""
    out = {}
    for name in sorted(os.listdir(EXAMPLES)):
        if name.endswith(".lift"):
            with open(os.path.join(EXAMPLES, name), encoding="utf-8") as f:
                out[name] = f.read()
    return out


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _meaningful(toks: list[str]) -> list[int]:
    return [i for i, t in enumerate(toks) if not t.isspace() and not t.startswith("#")]


def mutate_bytes(text: str, rng: random.Random) -> tuple[str, bytes]:
    """One mutation of ``text`` into bytes that are not UTF-8: (kind, bytes)."""
    data = text.encode("utf-8")
    kind = rng.choice(("random-bytes", "utf16", "latin1", "stray-byte", "truncated-utf8",
                       "overlong", "surrogate", "utf32"))
    i = rng.randint(0, len(data))
    if kind == "random-bytes":
        return kind, bytes(rng.randrange(256) for _ in range(rng.randint(1, 400)))
    if kind == "utf16":
        return kind, text.encode(rng.choice(("utf-16", "utf-16-le", "utf-16-be")))
    if kind == "utf32":
        return kind, text.encode("utf-32")
    if kind == "latin1":  # an accented name or comment saved as Latin-1
        word = rng.choice(("# café\n", "# naïve ½\n", "Xé : [float]N\n", "# °C\n"))
        return kind, data[:i] + word.encode("latin-1") + data[i:]
    if kind == "stray-byte":
        return kind, data[:i] + bytes([rng.choice((0x80, 0xbf, 0xc0, 0xf8, 0xfe, 0xff))]) \
            + data[i:]
    if kind == "truncated-utf8":  # a multi-byte character cut short, maybe at the end
        cut = "λ𝑥é".encode()[: rng.choice((1, 3, 5))]
        return kind, (data + cut) if rng.random() < 0.5 else data[:i] + cut + data[i:]
    if kind == "overlong":  # '/' as two bytes
        return kind, data[:i] + b"\xc0\xaf" + data[i:]
    return kind, data[:i] + b"\xed\xa0\x80" + data[i:]  # a UTF-16 surrogate in UTF-8


def mutate(text: str, rng: random.Random) -> tuple[str, str]:
    """One random mutation of ``text``: (kind, mutated text)."""
    toks = _tokens(text)
    idx = _meaningful(toks)
    if not idx:  # nothing left to mutate: start again from a token
        return "insert", text + rng.choice(_POOL)
    kind = rng.choice(("delete", "delete", "duplicate", "swap", "replace", "replace",
                       "insert", "unicode", "number", "truncate", "multi", "ident", "ident",
                       "ident", "same-class"))
    if kind == "multi":  # several mutations at once
        out = text
        for _ in range(rng.randint(2, 5)):
            out = mutate(out, rng)[1]
        return kind, out
    i = rng.choice(idx)
    if kind == "delete":
        del toks[i]
    elif kind == "duplicate":
        toks.insert(i, toks[i])
    elif kind == "swap":
        j = rng.choice(idx)
        toks[i], toks[j] = toks[j], toks[i]
    elif kind == "replace":
        toks[i] = rng.choice(_POOL + tuple(toks[k] for k in idx))
    elif kind == "insert":
        toks.insert(i, rng.choice(_POOL))
    elif kind == "unicode":
        toks.insert(i, rng.choice(("٢", "é", "λ", "\u200b", "𝑥", "\ufeff", "Ω", "\u0301")))
    elif kind == "number":
        nums = [k for k in idx if toks[k][0].isdigit()] or idx
        toks[rng.choice(nums)] = rng.choice(("0", "-1", "9" * rng.randint(10, 60),
                                             "1" + "0" * rng.randint(300, 5000), "0.0",
                                             "2147483648", "1.5f"))
    elif kind == "ident":  # one name for another name of the program: often still parses
        names = [k for k in idx if toks[k][0].isalpha() or toks[k][0] == "_"] or idx
        toks[rng.choice(names)] = toks[rng.choice(names)]
    elif kind == "same-class":  # swap two tokens of the same kind (two names, two symbols)
        same = [k for k in idx if toks[k][0].isalnum() == toks[i][0].isalnum()]
        j = rng.choice(same)
        toks[i], toks[j] = toks[j], toks[i]
    elif kind == "truncate":
        return kind, text[: rng.randint(0, len(text))]
    return kind, "".join(toks)


def _program(body: str, decls: str = "X : [float]N\n") -> str:
    return decls + body + "\n"


def edge_cases(heavy: bool = True) -> Iterator[tuple[str, str | bytes]]:
    """Generated extremes: deep nesting of maps, brackets, expressions and types, long
    chains, many sibling maps, huge numbers and odd characters. ``heavy`` adds the ones
    that take seconds each (deep map nests, many maps)."""
    for d in (3, 8, 12, 20, 30, 45, 49, 50, 51, 99, 100, 101, 300, 1000):
        ty = "[" * d + "float" + "".join(f"]N{i}" for i in range(d))
        if heavy or d < 20 or d > 60:
            yield f"nested-maps-{d}", _program("map(" * d + "toGlobal(id)" + ")" * d + " $ X",
                                               f"X : {ty}\n")
        yield f"parens-{d}", _program("(" * d + "map(id)" + ")" * d + " $ X")
        yield f"type-{d}", _program("map(id) $ X", f"X : {ty}\n")
        yield f"adds-{d}", _program("map(\\x -> " + "add(x, " * d + "1.0f" + ")" * d + ") $ X")
        yield f"cexpr-{d}", ("userfun f(x: float) : float = " + "(" * d + "x" + ")" * d
                             + "\nX : [float]N\nmap(f) $ X\n")
        yield f"lambda-params-{d}", _program("map(\\" + " ".join(f"a{i}" for i in range(d))
                                             + " -> a0) $ X")
    for n in (10, 100, 500, 2000, 5000):
        yield f"id-chain-{n}", _program("map(id) o " + "id o " * n + "id $ X")
        if heavy or n != 100:
            yield f"map-chain-{n}", _program("map(\\x -> add(x, 1.0f)) o " * n + "id $ X")
        yield f"join-split-{n}", _program("join o split(4) o " * n + "map(id) $ X")
    for n in (5, 20, 60, 100) if heavy else (5, 20):
        parts = ", ".join(f"map(\\x -> add(x, {i}.0f))(X)" for i in range(n))
        yield f"siblings-{n}", _program(f"map(\\t -> get(0)(t)) $ zip({parts})")
    for n in (1, 20, 400, 5000):
        yield f"huge-size-{n}", _program("map(id) $ X", f"X : [float]{'9' * n}\n")
        yield f"huge-split-{n}", _program(f"join o map(map(id)) o split({'7' * n}) $ X")
    yield "empty", ""
    yield "only-comment", "# nothing\n"
    yield "nul", "X : [float]N\nmap(id) $ X\x00\n"
    yield "bom", "\ufeffX : [float]N\nmap(id) $ X\n"
    yield "arabic-digit", _program("map(\\x -> add(x, ٢.٥f)) $ X")
    yield "keyword-param", _program("map(\\kernel -> add(kernel, 1.0f)) $ X")
    yield "float-vec-0", _program("map(id) $ X", "X : [float<0>]N\n")
    yield "float-vec-neg", _program("map(id) $ X", "X : [float<-1>]N\n")
    yield "mapA-mapA", _program("join o mapA(mapA(id)) o split(4) $ X")
    yield "comment-in-body", ("userfun f(x: float) : float = (x # note\n + 1.0f)\n"
                              "X : [float]N\nmap(f) $ X\n")
    yield "huge-macro", _program("joinND(2147483648) o mapND(99999999999, id) $ X")
    yield "utf16-bom", _program("map(id) $ X").encode("utf-16")
    yield "latin1-comment", ("# café\n" + _program("map(id) $ X")).encode("latin-1")
    yield "byte-ff", b"\xff"
    yield "utf8-bom", "\ufeff" + _program("map(id) $ X")


@dataclass(frozen=True)
class Case:
    """One program text (or bytes that are not UTF-8) given to one command."""

    name: str
    text: str | bytes
    command: str  # show | count | constraints | check
    json: bool = False


@dataclass
class Finding:
    """A traceback or a hang, with what reproduces it."""

    case: Case
    outcome: str
    detail: str

    def reproducer(self) -> str:
        """The case's name, command line, what happened and its program (cut at 300
        characters; generated edge cases are rebuilt by name with ``edge_cases()``)."""
        text = self.case.text
        shown = repr(text if len(text) <= 300 else text[:300]) + (
            f" ... ({len(text)} characters)" if len(text) > 300 else "")
        lines = self.detail.strip().splitlines() or [""]
        last = lines[0] if self.outcome == "unlocated" else lines[-1]
        return (f"{self.case.name}: mapper {' '.join(argv(self.case, 'PROGRAM.lift'))} -> "
                f"{self.outcome} ({last})\n  PROGRAM.lift = {shown}")


@dataclass
class Report:
    """Outcome counts per command, the findings, and the time taken."""

    counts: dict[str, Counter] = field(default_factory=lambda: {c: Counter() for c in COMMANDS})
    binary: int = 0  # cases whose file is not UTF-8 text
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    times: list[tuple[float, str, str]] = field(default_factory=list)  # (s, case, command)

    @property
    def cases(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())

    def summary(self) -> str:
        lines = [f"{self.cases} cases ({self.binary} not UTF-8) in {self.seconds:.1f} s: "
                 + ", ".join(f"{o} {self.total(o)}" for o in OUTCOMES)]
        for cmd, c in self.counts.items():
            lines.append(f"  {cmd:12s} " + ", ".join(f"{o} {c[o]}" for o in OUTCOMES))
        slow = sorted(self.times, reverse=True)[:8]
        if slow:
            lines.append("slowest: " + ", ".join(f"{n} {c} {s:.1f} s" for s, n, c in slow))
        return "\n".join(lines)


def cases(n: int, seed: int = 0, heavy: bool = True, binary: float = 0.0,
          edges: bool = True) -> list[Case]:
    """``n`` cases: every generated edge case (``heavy``: the slow ones too; none without
    ``edges``) under every command first, then random mutations of random examples under
    random commands; a fraction ``binary`` of the mutations are bytes that are not UTF-8
    (``mutate_bytes``)."""
    rng = random.Random(seed)
    out: list[Case] = []
    for name, text in edge_cases(heavy) if edges else ():
        for cmd in COMMANDS:
            out.append(Case(name, text, cmd, json=rng.random() < 0.3))
    progs = list(examples().items())
    i = 0
    while len(out) < n:
        ex, text = rng.choice(progs)
        kind, mutated = mutate_bytes(text, rng) if rng.random() < binary else \
            mutate(text, rng)
        out.append(Case(f"{ex}:{kind}:{i}", mutated, rng.choice(COMMANDS),
                        json=rng.random() < 0.3))
        i += 1
    return out[:n]


def argv(case: Case, path: str) -> list[str]:
    """The command line of ``case`` for the program file ``path``."""
    cmd = {"show": ["show", path], "constraints": ["constraints", path],
           "count": ["enumerate", path, "--count", "--timeout", "3"],
           "check": ["check", path, "--mapping", "A=S"]}[case.command]
    return cmd + (["--json"] if case.json else [])


class Hang(BaseException):
    """Raised by the alarm: the case ran past its time limit."""


def _alarm(signum, frame):
    raise Hang()


def run_case(case: Case, path: str, limit_s: int = 30) -> tuple[str, str]:
    """Run one case in-process: (outcome, detail)."""
    from ir.errors import IRTypeError, ParseError
    from mapper import cli
    from mapper.cli import main

    if isinstance(case.text, bytes):
        with open(path, "wb") as fb:
            fb.write(case.text)
    else:
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(case.text)
    out, err = io.StringIO(), io.StringIO()
    about_program: list[str] = []  # the errors about the program's text or types, as shown
    real_located = cli.located

    def located(e: Exception, *sources) -> str:
        text = real_located(e, *sources)
        if isinstance(e, (ParseError, IRTypeError)):
            about_program.append(text)
        return text

    cli.located = located
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit_s)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv(case, path))
        signal.alarm(0)
    except Hang:
        return "hang", f"over {limit_s} s"
    except SystemExit as e:
        signal.alarm(0)
        return ("ok" if e.code == 0 else "usage"), err.getvalue()[-300:]
    except BaseException as e:  # noqa: BLE001 - every other escape is the finding
        signal.alarm(0)
        if isinstance(e, KeyboardInterrupt):
            raise
        return "traceback", "".join(traceback.format_exception(type(e), e, e.__traceback__)
                                    )[-3000:]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        cli.located = real_located
    if rc == 0:
        return "ok", ""
    if "Traceback (most recent call last)" in err.getvalue():
        return "traceback", err.getvalue()[-3000:]
    if any(not LOCATED.search(t) for t in about_program):
        return "unlocated", err.getvalue()[-1000:]
    return "error", err.getvalue()[-300:]


@contextlib.contextmanager
def memory_cap(extra_gb: float | None) -> Iterator[None]:
    """Caps this process's address space at its size now plus ``extra_gb`` GiB while the
    block runs (``None``: no cap), so that a run-away allocation is a ``MemoryError`` (a
    traceback finding) instead of the machine running out of memory."""
    if extra_gb is None:
        yield
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = used + int(extra_gb * 2**30)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# (text, command, json, limit) -> (outcome, detail) of every case run in this process: the
# generated edge cases come first in every run (only their --json flags differ by seed),
# and a case gives the same outcome however often it runs (the CLI is deterministic): a
# case already run is counted again, not run again
_OUTCOMES: dict[tuple, tuple[str, str]] = {}


@contextlib.contextmanager
def one_parser() -> Iterator[None]:
    """``mapper.cli.main`` builds the same argument parser on every call (two thirds of
    a small case's time): while the block runs, it is built once and reused (argparse
    parsers parse any number of command lines; what each case's program does is the
    same)."""
    import functools

    from mapper import cli

    real = cli.build_parser
    cli.build_parser = functools.lru_cache(maxsize=None)(real)
    try:
        yield
    finally:
        cli.build_parser = real


def fuzz(n: int, seed: int = 0, limit_s: int = 30, heavy: bool = True,
         verbose: bool = False, binary: float = 0.0, edges: bool = True,
         memory_gb: float | None = 4.0) -> Report:
    """Run ``n`` cases (see ``cases``; ``binary``: the fraction of mutations that are not
    UTF-8; ``edges``: the generated edge cases first), each within ``limit_s`` seconds
    and ``memory_gb`` GiB more memory (Linux); the report counts outcomes per command and
    keeps the findings (tracebacks, hangs, unlocated errors)."""
    rep = Report()
    t0 = time.perf_counter()
    old_limit = sys.getrecursionlimit()
    with tempfile.TemporaryDirectory(prefix="fuzz-cli-") as d, memory_cap(
            memory_gb if sys.platform == "linux" else None), one_parser():
        path = os.path.join(d, "prog.lift")
        for case in cases(n, seed, heavy, binary, edges):
            t = time.perf_counter()
            key = (case.text, case.command, case.json, limit_s)
            if key in _OUTCOMES:  # the same case in an earlier run of this process
                outcome, detail = _OUTCOMES[key]
            else:
                outcome, detail = run_case(case, path, limit_s)
                if outcome != "hang":  # the one outcome that depends on the machine's load
                    _OUTCOMES[key] = (outcome, detail)
            rep.times.append((time.perf_counter() - t, case.name, case.command))
            rep.counts[case.command][outcome] += 1
            rep.binary += isinstance(case.text, bytes)
            if outcome in FINDINGS:
                rep.findings.append(Finding(case, outcome, detail))
                if verbose:
                    print(rep.findings[-1].reproducer(), file=sys.stderr)
            sys.setrecursionlimit(old_limit)
    rep.seconds = time.perf_counter() - t0
    return rep


def _cli(argv_: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=30, help="seconds per case")
    ap.add_argument("--light", action="store_true", help="leave out the slow edge cases")
    ap.add_argument("--binary", type=float, default=0.1, help="fraction of the mutations "
                    "that are bytes, not UTF-8 text (default 0.1)")
    args = ap.parse_args(argv_)
    sys.path.insert(0, ROOT)
    rep = fuzz(args.cases, args.seed, args.limit, not args.light, verbose=True,
               binary=args.binary)
    print(rep.summary())
    for f in rep.findings:
        print(f.reproducer())
        print(f.detail)
    return 1 if rep.findings else 0


if __name__ == "__main__":
    sys.exit(_cli())
