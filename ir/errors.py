"""Typed errors of the IR package (one class per failure kind)."""

from __future__ import annotations

from ir.sym import NonIntegralError, SymbolicError, UnboundSizeError  # noqa: F401  (re-exported)


class IRError(Exception):
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

    check = "algorithmic-constraint"  # an evaluation rejected for this reads rejected:<check>


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
