"""One error root (issue 14): every exception class the library defines derives from
``ir.errors.LiftmapError``, the root of the errors it raises on purpose, except the few
listed below with the reason they stay outside."""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import pkgutil
import re
import textwrap
import tokenize
from pathlib import Path

import pytest

from ir.errors import LiftmapError

PACKAGES = ("ir", "constraints", "mapper", "codegen")

# (module, class name): why the class is not a LiftmapError
ALLOWED = {
    # the space worker failed with an error that is not the user's: it marks a bug (its
    # message is the worker's traceback), so the CLI must not print it as a one-line error
    ("mapper.space_report", "SpaceWorkerError"): "a bug report",
    # control flow inside ir.sym_expr (a constant that is a fraction), caught there
    ("ir.sym_expr", "_NonIntegral"): "internal, never escapes",
    # a warning (warnings.warn category), not an error
    ("constraints.errors", "LateRestrictionWarning"): "a warning",
}


def _modules() -> list:
    out = []
    for name in PACKAGES:
        pkg = importlib.import_module(name)
        out.append(pkg)
        for info in pkgutil.walk_packages(pkg.__path__, f"{name}."):
            try:
                out.append(importlib.import_module(info.name))
            except ModuleNotFoundError as e:  # an optional third-party dependency
                if (e.name or "").split(".")[0] in PACKAGES:
                    raise
    return out


def _exception_classes() -> dict[tuple[str, str], type]:
    """Every Exception subclass defined (by its ``__module__``) in a module of the four
    packages, by (module, qualified name)."""
    found: dict[tuple[str, str], type] = {}
    for mod in _modules():
        for obj in vars(mod).values():
            if (inspect.isclass(obj) and issubclass(obj, Exception)
                    and obj.__module__ == mod.__name__):
                found[(obj.__module__, obj.__qualname__)] = obj
    return found


@pytest.fixture(scope="module")
def classes() -> dict[tuple[str, str], type]:
    return _exception_classes()


def test_every_library_exception_derives_from_liftmap_error(classes) -> None:
    outside = sorted(f"{m}.{n}" for (m, n), cls in classes.items()
                     if not issubclass(cls, LiftmapError) and (m, n) not in ALLOWED)
    assert not outside, ("exception classes outside the root ir.errors.LiftmapError (derive "
                         "from it, or list them in ALLOWED with the reason): "
                         + ", ".join(outside))


def test_allow_list_is_current(classes) -> None:
    missing = sorted(f"{m}.{n}" for m, n in ALLOWED if (m, n) not in classes)
    assert not missing, f"ALLOWED names classes that no longer exist: {missing}"
    rooted = sorted(f"{m}.{n}" for m, n in ALLOWED if issubclass(classes[(m, n)], LiftmapError))
    assert not rooted, f"ALLOWED names classes that derive from LiftmapError: {rooted}"


def test_the_walk_finds_the_package_roots(classes) -> None:
    names = {n for _, n in classes}
    assert {"LiftmapError", "IRError", "SymbolicError", "ConstraintError", "MapperError",
            "LoweringError", "DeviceError", "CliError", "StoreError"} <= names
    assert len(classes) > 40


def test_compatibility_bases_are_kept() -> None:
    from codegen.runner import BuildError
    from codegen.target import DeviceDescriptionError
    from codegen.worker import WorkerStartError
    from experiments.paper import ExperimentError
    from mapper.cli import CliError
    from mapper.explore.plot import PlotError
    from mapper.explore.ray_pool import RayUnavailableError
    from mapper.explore.run import BudgetError
    from mapper.explore.store import StoreError
    from mapper.explore.strategies import StrategyError

    for cls in (CliError, PlotError, StrategyError, BudgetError, ExperimentError, StoreError,
                DeviceDescriptionError):
        assert issubclass(cls, LiftmapError) and issubclass(cls, ValueError), cls
    for cls in (RayUnavailableError, WorkerStartError, BuildError):
        assert issubclass(cls, LiftmapError) and issubclass(cls, RuntimeError), cls


def test_symbolic_errors_are_one_class_under_the_root() -> None:
    import ir.errors
    import ir.sym

    for name in ("SymbolicError", "UnboundSizeError", "NonIntegralError",
                 "SymbolicZeroDivisionError"):
        assert getattr(ir.errors, name) is getattr(ir.sym, name)
        assert issubclass(getattr(ir.sym, name), LiftmapError)


def test_cli_reports_every_library_error_in_one_line() -> None:
    from mapper.cli import library_errors

    assert LiftmapError in library_errors()


# ------------------------------------------------------------- no bare builtin raises (issue 23)

ROOT = Path(__file__).resolve().parents[1]
BARE = ("ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError", "Exception")
SKIPPED_DIRS = (Path("mapper", "cli"),)  # the command line's own errors are CliError

# (file, text of the raise) -> why it is not converted yet: a site in a file that another
# change owns; remove the entry when the raise is a typed error (the test says when)
PENDING: dict[tuple[str, str], str] = {}  # (file, message): why a bare raise stays for now


def _library_files() -> list[Path]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if not any(rel.is_relative_to(d) for d in SKIPPED_DIRS):
                out.append(rel)
    return out


def _builtin_comment_lines(source: str) -> set[int]:
    """The lines that carry a ``# builtin: <why>`` comment (a real comment, not text in a
    string)."""
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and re.match(r"#\s*builtin:\s*\S", tok.string):
            lines.add(tok.start[0])
    return lines


def bare_builtin_raises(rel: Path, source: str) -> list[tuple[int, str]]:
    """(line, text of the statement) of each ``raise`` of a bare builtin exception class in
    ``source`` without a ``# builtin:`` comment on one of the statement's lines."""
    marked = _builtin_comment_lines(source)
    found = []
    for node in ast.walk(ast.parse(source, str(rel))):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if not (isinstance(exc, ast.Name) and exc.id in BARE):
            continue
        end = node.end_lineno or node.lineno
        if not marked & set(range(node.lineno, end + 1)):
            found.append((node.lineno, ast.get_source_segment(source, node) or ""))
    return sorted(found)


def test_the_library_raises_no_bare_builtin_exception() -> None:
    files = _library_files()
    assert len(files) > 50 and Path("ir", "errors.py") in files
    bad, pending_seen = [], set()
    for rel in files:
        for line, text in bare_builtin_raises(rel, (ROOT / rel).read_text(encoding="utf-8")):
            key = next((k for k in PENDING if k[0] == rel.as_posix() and k[1] in text), None)
            if key is not None:
                pending_seen.add(key)
            else:
                bad.append(f"{rel.as_posix()}:{line}: {text.splitlines()[0].strip()}")
    assert not bad, (
        "raise a typed library error (a class in the package's errors module deriving from "
        "its root and from the builtin it replaces), or, where Python's protocols need the "
        "builtin itself, say why with a '# builtin: <why>' comment on the raise:\n  "
        + "\n  ".join(bad))
    gone = sorted(f"{f}: {t!r}" for f, t in set(PENDING) - pending_seen)
    assert not gone, f"PENDING names raises that are gone; remove them: {gone}"


def test_the_raise_check_catches_a_new_bare_raise() -> None:
    source = textwrap.dedent('''
        def f(x):
            if x:
                raise ValueError(f"bad {x}")
            raise KeyError(x)  # builtin: a mapping's __getitem__
        def g():
            raise TypeError(
                "no"
            )
        def h():
            raise RuntimeError  # not a builtin: marker
        def k(e):
            raise SomeError("fine") from e
        ''')
    found = bare_builtin_raises(Path("x.py"), source)
    assert [line for line, _ in found] == [4, 7, 11]


def test_typed_errors_keep_the_builtin_they_replace() -> None:
    """The classes that replaced bare builtin raises (issue 23) are still those builtins,
    so a caller that catches ValueError, TypeError or KeyError keeps working."""
    import codegen.errors as ce
    import constraints.errors as ke
    import ir.errors as ie

    expected = {
        ie.SymbolicTypeError: (ie.SymbolicError, TypeError),
        ie.RelationTruthError: (ie.SymbolicError, TypeError),
        ie.InvalidNodeError: (ie.IRError, ValueError),
        ie.NotAFunctionError: (ie.IRError, TypeError),
        ie.DuplicateUserFunError: (ie.IRError, ValueError),
        ie.UserFunBodyError: (ie.IRError, ValueError),
        ie.UnknownStageError: (ie.IRError, KeyError),
        ie.InvalidOptionError: (ie.IRError, ValueError),
        ie.NoSizesError: (ie.IRError, ValueError),
        ke.ConstraintTypeError: (ke.ConstraintError, TypeError),
        ke.PredicateTruthError: (ke.ConstraintError, TypeError),
        ke.MalformedExpressionError: (ke.ConstraintError, ValueError),
        ke.DuplicateNameError: (ke.ConstraintError, ValueError),
        ce.KernelInputError: (ce.CodegenError, ValueError),
        ce.InvalidArgumentError: (ce.CodegenError, ValueError),
    }
    for cls, bases in expected.items():
        assert all(issubclass(cls, b) for b in bases), cls
        assert issubclass(cls, LiftmapError), cls
    assert issubclass(ce.LoweringError, ce.CodegenError)
