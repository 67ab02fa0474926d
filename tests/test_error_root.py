"""One error root (issue 14): every exception class the library defines derives from
``ir.errors.LiftmapError``, the root of the errors it raises on purpose, except the few
listed below with the reason they stay outside."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

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
