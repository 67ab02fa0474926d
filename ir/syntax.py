r"""Text syntax of the IR: a hand-written parser and a printer (this module re-exports them).

The notation follows the CC'22 and GPGPU'20 papers (CC'22 Listing 3)::

    # X*y + z, multiplication double-tiled, addition single-tiled
    X : [float]N
    y : float
    z : float
    join o mapA(mapB(\e -> add(e, z)) o join o mapC(mapD(\e -> mult(e, y))) o split(s1))
      o split(s0) $ X

Grammar (EBNF: ``{x}`` repeats, ``[x]`` is optional; ``#`` starts a comment)::

    program  = {userfun | decl} term
    decl     = NAME ":" type                       (a program input, in order)
    userfun  = "userfun" NAME "(" [NAME ":" type {"," NAME ":" type}] ")" ":" type "=" cexpr
    type     = "float" | "int" | "float2" | "float4" | ... | "float" "<" size ">"
             | "[" type "]" sizeatom                (an array of sizeatom elements)
             | "(" ")" | "(" type "," ")" | "(" type {"," type} ")"   ((T) is just T)
    size     = sizeterm {("+" | "-") sizeterm}
    sizeterm = sizeunary {("*" | "/" | "//" | "%") sizeunary}     (/ exact, // floor)
    sizeunary= "-" sizeunary | sizeatom
    sizeatom = INT | NAME | "(" size ")" | ("min" | "max") "(" size "," size ")"
    term     = comp ["$" term]                     ($ is lowest and right-associative)
    comp     = app {"o" app}                       (f o g o h: h applied first)
    app      = atom {"(" term {"," term} ")"}      (application)
    atom     = NAME | NUMBER | "-" NUMBER | "(" term ")" | lambda | let | hole | keyword
    lambda   = ("\" | "λ") NAME {[","] NAME} "->" term   (the body extends to the right)
    let      = "let" NAME "=" term "in" term       (is (\NAME -> term) $ term)
    hole     = "_" ("+" | "*") app                 (_ + z is \e -> add(e, z); _ * y uses mult)

Keywords (function terms unless marked; ``s`` is a size, ``f`` a function term)::

    id  join  transpose  asScalar  zip  zip(a, b, ...)  split(s)  reorderStride(s)  asVector(s)
    slide(s, s)  slideStrict(s, s)  pad(s, s)  pad(s, s, NUMBER)  get(INT)
    map(f)  mapA(f)  mapSeq(f)  mapSeqD(f)  mapGlb(d)(f)  mapWrgA(d)(f)  mapLcl(d)(f)  (d: 0|1|2)
    reduce(f)  reduceSeq(f)  reduceVec(s)(f)  (applied to (init, array))
    toGlobal(f)  toLocal(f)  toPrivate(f)
    vectorize(s, userfun)   value(NUMBER, type)  (an expression: a literal, an array when typed so)
    macros, expanded with ir.builders: mapND(n, f)  zipND(n)(a, b, ...)  joinND(n)
    slideND(n, (s1, ..), (st1, ..))  slideStrictND(...)  padND(n, ((l1, r1), ..) [, NUMBER])

A map label is ``[A-Z][A-Za-z0-9_]*`` not starting with Seq, Vec, Glb, Wrg or Lcl
(``mapND(f)`` with one argument is the map labelled ND). ``0.0``, ``0.0f``, ``1e-5`` are
float literals, ``2`` an int literal. Sizes become ``ir.sym`` expressions, so ``str(expr)``
parses back to an equal expression.

User functions are the builtins of ``ir.builders.USER_FUNS``, those given to :func:`parse`
and those declared in the text (a declaration shadows a builtin). A declared body ``cexpr``
is one C expression (``+ - * / %``, comparisons, ``&& || !``, ``c ? a : b``, calls of
``fmax fmin max min exp log sqrt fabs abs tanh sin cos pow floor ceil mad fma clamp dot``):
the OpenCL body is ``return cexpr;`` and its numpy translation (``f`` suffixes dropped) is
the interpreter's meaning. It ends at the end of its line (outside parentheses); elsewhere
newlines are free.

Names are resolved innermost first: lambda parameters, declared inputs, keywords, user
functions. Keywords, ``o``, ``let``, ``in``, ``userfun`` and user function names cannot
name parameters. A text with declarations parses to a ``Lambda`` over the declared inputs;
without declarations to the term itself (an expression, or a function term). A
composition builds the Lambda of ``ir.builders.compose`` with a fresh parameter whose
name occurs nowhere in the text.

The printer writes core nodes (macros appear expanded), compositions (a one-parameter
lambda whose body is a chain of at least two single-argument calls ending in the
parameter) as ``f o g``, single-argument calls as ``f $ x`` (``f(x)`` inside argument
lists and for user functions), one-parameter lambdas applied to a value as ``let``.

The code: ``ir.lexer`` (tokens), ``ir.parse_types`` (types and sizes),
``ir.parse_keywords`` (keyword forms, reserved words), ``ir.cexpr`` (C bodies to numpy),
``ir.parser`` (declarations and terms, files: ``read_source``, ``parse_file``),
``ir.printer`` (``show``, ``print_program``).

A map label names one map: a label written twice is a ``ParseError`` at the second.
``parse``'s ``spans`` give every node of the program its line and column, which a type
error's ``node`` is looked up in. A file that is not UTF-8 text is a ``NotUTF8Error``
naming the first bad byte.
"""

from __future__ import annotations

from ir.lexer import MAX_NESTING
from ir.nodes import userfun_from_c
from ir.parse_keywords import is_reserved
from ir.parse_types import parse_size, parse_type
from ir.parser import MAX_DEPTH, parse, parse_file, read_source, tree_depth
from ir.printer import print_program, show, show_type

__all__ = [
    "parse",
    "parse_file",
    "read_source",
    "parse_type",
    "parse_size",
    "show",
    "show_type",
    "print_program",
    "is_reserved",
    "MAX_NESTING",
    "MAX_DEPTH",
    "tree_depth",
    "userfun_from_c",
]
