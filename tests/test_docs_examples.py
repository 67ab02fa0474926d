"""Every example of README.md and docs/*.md runs and prints what it shows.

The convention (docs/language.md, "Examples in these docs", says the same for readers):

* A fenced block whose first line starts with ``$ `` is a shell session. Each line that
  starts with ``$ `` is a command (continued on the next line after a trailing ``\\``, and
  to the terminator line of a here-document it opens: ``cat > f << 'EOF'``). It runs with
  ``bash -c`` from the repository root, with ``.venv/bin`` (then the directory of the
  Python running the tests) first on ``PATH`` and ``COLUMNS=80``; its stdout must match the
  lines that follow it, up to the next ``$ `` line or the end of the block. stderr is not
  compared (write ``2>&1`` to show it). A command that exits with status N != 0 prints a
  last line ``[N]`` (as in cram), so an error example shows its status.
* Matching (doctest's ELLIPSIS, by lines): a line ``...`` matches any number of lines
  (none included); ``...`` inside a line matches any text within that line. Trailing
  whitespace and trailing blank lines are ignored.
* A ``python`` (or ``py``, ``pycon``) block is executed in a fresh namespace in a fresh
  interpreter, from the repository root. With ``>>>`` prompts it is a doctest (ELLIPSIS on).
  Otherwise it runs as a script, one top-level statement at a time, and a comment
  ``# -> TEXT`` on the last line of a top-level statement is checked: what the statement
  prints (or, for an expression that prints nothing, the ``repr`` of its value), with its
  whitespace runs and line breaks collapsed to one space, must match ``TEXT`` (``...``
  matches anything).
* Everything else is not an example: blocks without a leading ``$ `` (synopses of
  commands, programs, grammars) and ``python synopsis`` blocks (Python that would take
  minutes, or fragments). An example must run in seconds: past LIMIT_S it fails.

The examples of one file run in order (a later one may read a file an earlier one wrote),
in one test per file; a failure names the file, the line and shows the diff.
"""

from __future__ import annotations

import ast
import difflib
import doctest
import io
import json
import linecache
import os
import re
import signal
import subprocess
import sys
import tempfile
import tokenize
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
LIMIT_S = 60  # one command or one Python block; an example runs in seconds
PYTHON_INFOS = ("python", "py", "pycon")
ELLIPSIS = "..."


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


# ------------------------------------------------------------------------- parsing


@dataclass
class Block:
    """A fenced block: its first content line (1-based), info string and lines."""

    path: Path
    line: int
    info: str
    lines: list[str]

    @property
    def lang(self) -> str:
        return self.info.split()[0].lower() if self.info.split() else ""

    @property
    def is_python(self) -> bool:
        return self.lang in PYTHON_INFOS and "synopsis" not in self.info.split()[1:]

    @property
    def is_session(self) -> bool:
        return self.lang not in PYTHON_INFOS and bool(self.lines) and \
            self.lines[0].startswith("$ ")


@dataclass
class Command:
    """One ``$ `` command of a shell session and the output the docs show for it."""

    line: int
    text: str
    expected: list[str] = field(default_factory=list)


_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")


def fenced_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file (CommonMark fences, indented up to 3)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or (m[2][0] == "`" and "`" in m[3]):
            i += 1
            continue
        indent, fence, info = len(m[1]), m[2], m[3].strip()
        start = i + 1
        j = start
        while j < len(lines):
            c = re.match(r"^ {0,3}(`{3,}|~{3,})\s*$", lines[j])
            if c and c[1][0] == fence[0] and len(c[1]) >= len(fence):
                break
            j += 1
        body = [ln[min(indent, len(ln) - len(ln.lstrip(" "))):] for ln in lines[start:j]]
        out.append(Block(path, start + 1, info, body))
        i = j + 1
    return out


def session_commands(block: Block) -> list[Command]:
    """The commands of a shell session with the output shown after each."""
    cmds: list[Command] = []
    lines, i = block.lines, 0
    while i < len(lines):
        if not lines[i].startswith("$ "):  # only the first line can get here
            raise ValueError(f"{block.path.name}:{block.line + i}: a shell session starts "
                             "with a '$ ' line")
        cmd = Command(block.line + i, lines[i][2:])
        i += 1
        while cmd.text.endswith("\\") and i < len(lines):
            cmd.text += "\n" + lines[i]
            i += 1
        for dash, _, word in _HEREDOC.findall(cmd.text):
            while i < len(lines):
                ln = lines[i]
                cmd.text += "\n" + ln
                i += 1
                if (ln.lstrip("\t") if dash else ln) == word:
                    break
            else:
                raise ValueError(f"{block.path.name}:{cmd.line}: the here-document {word!r} "
                                 "is not closed in its block")
        while i < len(lines) and not lines[i].startswith("$ "):
            cmd.expected.append(lines[i])
            i += 1
        cmds.append(cmd)
    return cmds


# ------------------------------------------------------------------------ matching


def _line_re(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(p) for p in pattern.split(ELLIPSIS)), re.S)


def _trim(lines: list[str]) -> list[str]:
    out = [ln.rstrip() for ln in lines]
    while out and not out[-1]:
        out.pop()
    return out


def lines_match(expected: list[str], got: list[str]) -> bool:
    """``got`` matches ``expected``: a line ``...`` stands for any lines, ``...`` in a line
    for any text of that line; trailing whitespace and trailing blank lines are ignored."""
    want, have = _trim(expected), _trim(got)
    pats = [None if w.strip() == ELLIPSIS else _line_re(w) for w in want]
    # ok[j]: the patterns from i on match the lines from j on (i from the last pattern up)
    ok = [j == len(have) for j in range(len(have) + 1)]
    for p in reversed(pats):
        if p is None:  # any lines: a match from some k >= j on
            for j in range(len(have) - 1, -1, -1):
                ok[j] = ok[j] or ok[j + 1]
        else:
            ok = [j < len(have) and ok[j + 1] and p.fullmatch(have[j]) is not None
                  for j in range(len(have) + 1)]
    return ok[0]


def text_matches(pattern: str, got: str) -> bool:
    """A ``# -> TEXT`` check: whitespace runs collapse to one space on both sides."""
    norm = " ".join(got.split())
    return _line_re(" ".join(pattern.split())).fullmatch(norm) is not None


def diff(expected: list[str], got: list[str]) -> str:
    return "\n".join(difflib.unified_diff(_trim(expected), _trim(got), "shown in the docs",
                                          "printed", lineterm=""))


# ------------------------------------------------------------------------- running


def session_env() -> dict[str, str]:
    env = dict(os.environ)
    bins = [str(REPO / ".venv" / "bin"), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join([*bins, env.get("PATH", "")])
    env["COLUMNS"] = "80"  # rich's width when stdout is not a terminal, whatever the caller's
    for k in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "LINES"):
        env.pop(k, None)
    return env


def run_bounded(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    """``argv`` run from the repository root in its own session; None when it runs past
    LIMIT_S, after killing its whole process group (the workers it started included)."""
    with subprocess.Popen(argv, cwd=REPO, env=session_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def run_command(cmd: Command, where: str) -> str | None:
    """None when the command prints what the docs show, else the failure."""
    p = run_bounded(["bash", "-c", cmd.text])
    if p is None:
        return (f"{where}:{cmd.line}: `{cmd.text}` ran more than {LIMIT_S} s; an example "
                "runs in seconds (write a longer run as a synopsis, without '$ ')")
    got = p.stdout.split("\n")
    if p.returncode != 0:
        got = [*_trim(got), f"[{p.returncode}]"]
    if lines_match(cmd.expected, got):
        return None
    msg = f"{where}:{cmd.line}: `{cmd.text}` prints something else:\n{diff(cmd.expected, got)}"
    if p.stderr.strip():
        msg += "\n--- its stderr:\n" + p.stderr.rstrip()[-3000:]
    return msg


def run_python(block: Block, where: str) -> list[str]:
    """Runs a Python block in a fresh interpreter (this file's ``__main__``); its failures."""
    with tempfile.TemporaryDirectory(prefix="docs-example-") as tmp:
        src, res = Path(tmp, "block.py"), Path(tmp, "result.json")
        src.write_text("\n".join(block.lines) + "\n", encoding="utf-8")
        p = run_bounded([sys.executable, __file__, str(src), str(res), where, str(block.line)])
        if p is None:
            return [f"{where}:{block.line}: the Python block ran more than {LIMIT_S} s; an "
                    "example runs in seconds (mark a longer one ```python synopsis)"]
        if not res.exists():
            return [f"{where}:{block.line}: the Python block did not finish (exit status "
                    f"{p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}"]
        return list(json.loads(res.read_text(encoding="utf-8")))


# -------------------------------------------- the Python driver (in a fresh interpreter)


def _doctest_block(source: str, where: str, first: int) -> list[str]:
    test = doctest.DocTestParser().get_doctest(source, {"__name__": "__main__"}, where,
                                               where, first - 1)
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=report.write, clear_globs=True)
    return [report.getvalue()] if runner.failures else []


def _script_block(source: str, where: str, first: int) -> list[str]:
    checks: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and tok.string.startswith("# ->"):
            checks[tok.start[0]] = tok.string[len("# ->"):].strip()
    tree = ast.parse(source)
    name = f"<{where}, the block at line {first}>"  # its source, for inspect and tracebacks
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    ends = {stmt.end_lineno for stmt in tree.body}
    fails = [f"{where}:{first + n - 1}: a '# ->' comment must end a top-level statement"
             for n in sorted(checks) if n not in ends]
    ns: dict[str, object] = {"__name__": "__main__"}
    for stmt in tree.body:
        out = io.StringIO()
        line = first + stmt.lineno - 1
        try:
            with redirect_stdout(out):
                if isinstance(stmt, ast.Expr):
                    value = eval(compile(ast.Expression(stmt.value), name, "eval"), ns)
                else:
                    exec(compile(ast.Module([stmt], []), name, "exec"), ns)
                    value = None
        except Exception as e:  # the example fails; report where and why
            return [*fails, f"{where}:{line}: raised {type(e).__name__}: {e}"]
        want = checks.get(stmt.end_lineno or stmt.lineno)
        if want is None:
            continue
        got = out.getvalue()
        if not got and value is not None:
            got = repr(value)
        if not text_matches(want, got):
            fails.append(f"{where}:{first + (stmt.end_lineno or stmt.lineno) - 1}: shows "
                         f"'# -> {want}' but prints:\n{got.rstrip()}")
    return fails


def _driver(src: str, result: str, where: str, first: str) -> int:
    sys.path[0] = str(REPO)  # as `python script.py` in the repository root
    source = Path(src).read_text(encoding="utf-8")
    if any(ln.lstrip().startswith(">>>") for ln in source.split("\n")):
        fails = _doctest_block(source, where, int(first))
    else:
        fails = _script_block(source, where, int(first))
    Path(result).write_text(json.dumps(fails), encoding="utf-8")
    return 0


# --------------------------------------------------------------------------- tests


def examples_of(path: Path) -> list[Block]:
    return [b for b in fenced_blocks(path) if b.is_session or b.is_python]


def _param(path: Path) -> Any:  # a pytest.param
    text = "\n".join("\n".join(b.lines) for b in examples_of(path))
    marks = [pytest.mark.opencl] if "mapper run" in text else []
    return pytest.param(path, id=path.name, marks=marks)


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
@pytest.mark.parametrize("path", [_param(p) for p in doc_files()])
def test_examples_of(path: Path) -> None:
    where = str(path.relative_to(REPO))
    failures: list[str] = []
    for block in examples_of(path):
        if block.is_session:
            for cmd in session_commands(block):
                msg = run_command(cmd, where)
                if msg:
                    failures.append(msg)
        else:
            failures.extend(run_python(block, where))
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


SAMPLE = """\
Text, then a session:

```
$ echo one; echo two \\
    three
one
two three
$ printf 'a\\nb\\nc\\nd\\n'
a
...
d
$ cat > /dev/null << 'EOF'
$ not a command
EOF
```

```
X : [float]N
$ not a session
```

```python synopsis
raise SystemExit("never run")
```

    ```python
    x = 2 + 2   # -> ...
    ```
"""


def test_the_convention_reads_blocks(tmp_path: Path) -> None:
    path = tmp_path / "sample.md"
    path.write_text(SAMPLE, encoding="utf-8")
    blocks = fenced_blocks(path)
    assert [(b.line, b.is_session, b.is_python) for b in blocks] == [
        (4, True, False), (18, False, False), (23, False, False)]
    cmds = session_commands(blocks[0])
    assert [(c.line, c.text.split("\n")[0], c.expected) for c in cmds] == [
        (4, "echo one; echo two \\", ["one", "two three"]),
        (8, "printf 'a\\nb\\nc\\nd\\n'", ["a", "...", "d"]),
        (12, "cat > /dev/null << 'EOF'", [])]
    assert all(run_command(c, "sample.md") is None for c in cmds)
    wrong = Command(1, "echo hello; exit 3", ["hello"])
    msg = run_command(wrong, "sample.md")
    assert msg is not None and "sample.md:1:" in msg and "+[3]" in msg


def test_the_matching() -> None:
    assert lines_match(["a", "...", "d"], ["a", "d"])
    assert lines_match(["a", "...", "d"], ["a", "b", "c", "d", ""])
    assert not lines_match(["a", "...", "d"], ["a", "b"])
    assert lines_match(["median ... us; build ... s"], ["median 1.5 us; build 0.6 s  "])
    assert not lines_match(["x ..."], ["x", "y"])
    assert not lines_match(["a"], ["a", "b"])
    assert text_matches("A=S B=S ...", "A=S B=S\nA=G0 B=S\n")
    assert not text_matches("A=S", "A=S B=S")


def test_python_blocks_check_what_they_show(tmp_path: Path) -> None:
    ok = Block(tmp_path / "x.md", 10, "python",
               ["xs = [1, 2]", "for x in xs:", "    print(x)   # -> 1 2", "len(xs)  # -> 2"])
    assert run_python(ok, "x.md") == []
    bad = Block(tmp_path / "x.md", 10, "python", ["print('a')  # -> b", "1 / 0"])
    fails = run_python(bad, "x.md")
    assert len(fails) == 2 and fails[0].startswith("x.md:10:") and "ZeroDivision" in fails[1]
    doc = Block(tmp_path / "x.md", 20, "pycon", [">>> 1 + 1", "3"])
    (fail,) = run_python(doc, "x.md")
    assert "line 20" in fail and "Expected:" in fail


if __name__ == "__main__":  # the driver of one Python block (run_python)
    sys.exit(_driver(*sys.argv[1:5]))
