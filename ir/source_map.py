"""Where the nodes of a parsed program are in its text, so that an error about a node
(``IRTypeError.node``) names the file, line and column of what the user wrote.

:func:`parse_mapped` parses a program (text or ``.lift`` file) and returns it with its
:class:`SourceMap`. :meth:`SourceMap.attach` sets an error's ``location`` (an
``IRTypeError``'s text then starts with it and shows the source line with a caret). A
node of a rewritten copy of the program (maps labelled, same shape: the error's ``root``)
is found at the same place in the parsed program.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ir.errors import IRTypeError, Location
from ir.nodes import Node, walk
from ir.parser import parse, parse_file, read_source

__all__ = ["Location", "SourceMap", "parse_mapped"]


@dataclass
class SourceMap:
    """The source positions of one parsed program's nodes (valid while it lives: the
    map holds it)."""

    program: Node
    spans: dict[int, tuple[int, int]]  # id(node) -> (line, column)
    lines: list[str]
    path: str | None = None  # None: the program was given as text

    def locate(self, node, root=None) -> Location | None:
        """Where ``node`` (of this program, or of ``root``, a copy of it of the same
        shape) starts; None if it is in neither."""
        span = self.spans.get(id(node))
        if span is None and isinstance(root, Node):
            for mine, theirs in zip(walk(self.program), walk(root)):
                if type(mine) is not type(theirs):
                    break
                if theirs is node:
                    span = self.spans.get(id(mine))
                    break
        if span is None:
            return None
        line, col = span
        src = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return Location(self.path, line, col, src)

    def attach(self, e: BaseException) -> bool:
        """Sets ``e.location`` where ``e`` is an ``IRTypeError`` about a node of this
        program that has none yet; True if it did."""
        if not isinstance(e, IRTypeError) or e.location is not None or e.node is None:
            return False
        e.location = self.locate(e.node, e.root)
        return e.location is not None


# one word of path characters: a path (a program declares its inputs, ``X : [float]N``)
_PATH_RE = re.compile(r"[\w./~+-]+")


def parse_mapped(source: str | os.PathLike) -> tuple[Node, SourceMap]:
    """The program in ``source`` and its source map. ``source`` is a path (an
    ``os.PathLike``; a one-line string ending in ``.lift``, naming a file or a folder, or
    made of path characters alone, such as ``nope``: no program is one word) or program
    text. A path that names no file raises ``ProgramFileError``."""
    spans: dict[int, tuple[int, int]] = {}
    if isinstance(source, os.PathLike) or ("\n" not in source and (
            source.strip().endswith(".lift") or _PATH_RE.fullmatch(source.strip())
            or os.path.exists(source))):
        path = os.fspath(source)
        program = parse_file(path, spans=spans)
        text, where = read_source(path), path
    else:
        program = parse(source, spans=spans)
        text, where = source, None
    return program, SourceMap(program, spans, text.split("\n"), where)
