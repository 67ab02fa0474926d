"""Typed errors of the IR package (one class per failure kind), and the library's error root.

:class:`LiftmapError` is the root of every error the library raises on purpose (its message
is meant for the user); each package's root derives from it: ``IRError``, ``SymbolicError``
(``ir.sym``), ``ConstraintError`` (``constraints``, with ``SpaceError`` under it),
``MapperError``, ``CodegenError`` (with ``LoweringError`` under it), ``DeviceError`` and the
explorer's errors. ``ir`` is the base layer, so the root lives here and this module imports
nothing from the library: the symbolic errors are defined here too (``ir.sym`` re-exports
them), so that no module of ``ir`` imports in a cycle.

A typed error that replaced a bare builtin keeps that builtin as a base
(``InvalidNodeError(IRError, ValueError)``), so code that catches the builtin still works.
"""

from __future__ import annotations

from dataclasses import dataclass


class LiftmapError(Exception):
    """Root of every error the library raises on purpose; anything else is a bug."""


class SymbolicError(LiftmapError):
    """Base class of the errors of symbolic expressions (``ir.sym``)."""


class UnboundSizeError(SymbolicError):
    """``evaluate`` found a variable without a value."""


class NonIntegralError(SymbolicError):
    """An exact division is not integral for the values given (or a constant is a fraction)."""


class SymbolicZeroDivisionError(SymbolicError):
    """Division or modulo by zero."""


class SymbolicTypeError(SymbolicError, TypeError):
    """A value that is neither an int, a name nor a symbolic expression is used as one (a
    float constant, an arbitrary object)."""


class RelationTruthError(SymbolicError, TypeError):
    """A relation between symbolic expressions (``a < b``) is used as a truth value: it has
    none until sizes are given (``evaluate`` it, or ask ``is_trivially_true``)."""


class IRError(LiftmapError):
    """Base of all IR errors."""


@dataclass(frozen=True)
class Location:
    """Where a construct starts in a program's text (``path`` None: text given inline)."""

    path: str | None
    line: int
    column: int
    source_line: str = ""

    def format(self, message: str) -> str:
        """``PATH, line L, column C: message``, then the source line with a caret."""
        where = f"line {self.line}, column {self.column}"
        text = f"{self.path}, {where}: {message}" if self.path else f"{where}: {message}"
        if self.source_line:
            text += f"\n  {self.source_line}\n  {' ' * (self.column - 1)}^"
        return text


class IRTypeError(IRError):
    """An expression is not well typed. Names the node and shows the expression around it.

    ``node`` is the construct at fault (the source position of a parsed program's nodes is
    in ``ir.parser.parse``'s ``spans``), ``root`` the program it was found in (the checker
    sets it: a rewritten copy of a parsed program, with its maps labelled, has the same
    shape, so ``node`` is found in the parsed program at the same place). ``location``
    (set by ``ir.source_map.SourceMap.attach``) puts file, line and column in the text."""

    def __init__(self, message: str, node=None, context: str | None = None, root=None):
        self.node = node
        self.root = root
        self.context = context
        self.location: Location | None = None
        text = message
        if context:
            text += f"\n  in: {context}"
        super().__init__(text)

    def __str__(self) -> str:
        text = super().__str__()
        return text if self.location is None else self.location.format(text)


class ConstraintViolation(IRTypeError):
    """An algorithmic constraint (``N % s == 0`` for ``split(s)``) fails for the given sizes."""

    # an evaluation rejected for this reads rejected:<check>; the same name as
    # codegen.errors.Check.ALGORITHMIC_CONSTRAINT (ir cannot import codegen; checked there)
    check = "algorithmic-constraint"


class UnboundParameterError(IRTypeError):
    """A parameter is used but neither declared with a type nor bound by a lambda."""


class InvalidNodeError(IRError, ValueError):
    """A node (or a pattern of nodes: ``slideND``, ``padND``) is built with an argument
    outside what it accepts: an unknown map or reduce kind, a dimension, a map label, an
    address space, a number of sizes. The message names the argument and what it may be."""


class NotAFunctionError(IRError, TypeError):
    """A node that is not a function (an expression) is applied to arguments."""


class DuplicateUserFunError(IRError, ValueError):
    """Two different user functions of one program have the same name."""


class UserFunBodyError(IRError, ValueError):
    """A user function's C body is not ``return <expression>;``, so it has no meaning for
    the interpreter and no form in the text syntax."""


class UnknownStageError(IRError, KeyError):
    """A pipeline has no stage of the name asked for (the message lists its stages)."""


class InvalidOptionError(IRError, ValueError):
    """An option with a fixed set of choices is given a value outside them."""


class NoSizesError(IRError, ValueError):
    """No concrete sizes within the bound searched satisfy a program's algorithmic
    constraints."""


class InterpreterError(IRError):
    """The reference interpreter cannot evaluate the program with the inputs given."""


class ProgramFileError(IRError):
    """A program given as a path names no file, or a folder (the message says which)."""


class ParseError(IRError):
    """Text syntax error, with line and column (and ``path``, the file, when parsed from
    one: ``ir.parser.parse_file``)."""

    def __init__(self, message: str, line: int, column: int, source_line: str = "",
                 path: str | None = None):
        self.message, self.line, self.column, self.source_line = message, line, column, source_line
        self.path = path
        text = f"line {line}, column {column}: {message}"
        if source_line:
            text += f"\n  {source_line}\n  {' ' * (column - 1)}^"
        super().__init__(text)


class NotUTF8Error(ParseError):
    """A program file is not UTF-8 text: names the file and the first bad byte (its line
    and column, counted in characters of the text before it)."""

    def __init__(self, path: str, line: int, column: int, byte: int):
        self.message = f"not UTF-8 text (byte 0x{byte:02x})"
        self.line, self.column, self.source_line, self.path = line, column, "", path
        self.byte = byte
        IRError.__init__(self, f"{path} is not UTF-8 text (byte 0x{byte:02x} at line {line}, "
                               f"column {column}); save it as UTF-8")
