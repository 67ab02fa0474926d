"""Typed errors of the mapper (one class per failure kind)."""

from __future__ import annotations

from ir.errors import LiftmapError


def library_errors() -> tuple[type[BaseException], ...]:
    """The exception classes whose messages are meant for the user: the library's error
    root (``ir.errors.LiftmapError``: every error it raises on purpose) and file errors.
    Anything else is a bug and propagates (the command line and the REPL print these in
    one line and show a traceback for the rest)."""
    return (LiftmapError, FileNotFoundError, IsADirectoryError, NotADirectoryError,
            PermissionError)


def value_text(x: object) -> str:
    """``int 42``: the type and a short text of a value, for messages."""
    text = repr(x)
    return f"{type(x).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


class MapperError(LiftmapError):
    """Base of mapper errors."""


class NoMapsError(MapperError):
    """The expression has no map to parallelise."""


class ArgumentError(MapperError, TypeError):
    """An argument of the library's API is not of a kind it accepts (``problem(None)``, a
    list where a mapping or sizes are expected); the message says what it expects."""


class MappingError(MapperError, ValueError):
    """A mapping names unknown maps, uses codes outside the encoding, or misses maps."""


class InvalidMappingError(MapperError):
    """A mapping violates constraints; ``violations`` lists the constraint instances."""

    def __init__(self, message: str, violations=()):
        super().__init__(message)
        self.violations = list(violations)


class ContradictoryFixedError(MapperError):
    """A fixed partial assignment admits no valid mapping; ``core`` explains why."""

    def __init__(self, message: str, core=()):
        super().__init__(message)
        self.core = list(core)


class ConfigurationError(MapperError, ValueError):
    """A keyword argument contradicts the configuration of the problem it is applied to
    (e.g. ``heuristics=False`` on a problem built with the heuristic rules)."""


class SizeError(MapperError, ValueError):
    """Size values that name no size of the program, or miss one a build needs."""


class InputError(MapperError, ValueError):
    """Input data that does not match the program's declared inputs (names, shapes)."""


class DeviceUseError(MapperError, ValueError):
    """A device that cannot do what is asked (a description cannot run kernels)."""


class UsageError(MapperError, ValueError):
    """A command (of the command line or the REPL) is used wrongly; the message says how
    to use it."""
