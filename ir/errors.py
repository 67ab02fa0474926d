"""Typed errors of the IR package (one class per failure kind), and the library's error root.

:class:`LiftmapError` is the root of every error the library raises on purpose (its message
is meant for the user); each package's root derives from it: ``IRError``, ``SymbolicError``
(``ir.sym``), ``ConstraintError`` (``constraints``, with ``SpaceError`` under it),
``MapperError``, ``LoweringError``, ``DeviceError`` and the explorer's errors. ``ir`` is the
base layer, so the root lives here and this module imports nothing from the library (the
symbolic errors are re-exported lazily, so that ``ir.sym`` can import the root).
"""

from __future__ import annotations

from typing import Any

_FROM_SYM = ("NonIntegralError", "SymbolicError", "UnboundSizeError")


def __getattr__(name: str) -> Any:  # re-exports of ir.sym's errors, imported on first use
    if name in _FROM_SYM:
        from ir import sym

        return getattr(sym, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class LiftmapError(Exception):
    """Root of every error the library raises on purpose; anything else is a bug."""


class IRError(LiftmapError):
    """Base of all IR errors."""


class IRTypeError(IRError):
    """An expression is not well typed. Names the node and shows the expression around it."""

    def __init__(self, message: str, node=None, context: str | None = None):
        self.node = node
        self.context = context
        text = message
        if context:
            text += f"\n  in: {context}"
        super().__init__(text)


class ConstraintViolation(IRTypeError):
    """An algorithmic constraint (``N % s == 0`` for ``split(s)``) fails for the given sizes."""

    # an evaluation rejected for this reads rejected:<check>; the same name as
    # codegen.errors.Check.ALGORITHMIC_CONSTRAINT (ir cannot import codegen; checked there)
    check = "algorithmic-constraint"


class UnboundParameterError(IRTypeError):
    """A parameter is used but neither declared with a type nor bound by a lambda."""


class InterpreterError(IRError):
    """The reference interpreter cannot evaluate the program with the inputs given."""


class ParseError(IRError):
    """Text syntax error, with line and column."""

    def __init__(self, message: str, line: int, column: int, source_line: str = ""):
        self.message, self.line, self.column, self.source_line = message, line, column, source_line
        text = f"line {line}, column {column}: {message}"
        if source_line:
            text += f"\n  {source_line}\n  {' ' * (column - 1)}^"
        super().__init__(text)
