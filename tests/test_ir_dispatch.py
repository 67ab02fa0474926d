"""One dispatch over node classes (ir.visitor) in the passes of ir and in the lowering's walk
(codegen.builder), and the import graph of ir without cycles."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pickle
import pkgutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ir
import ir.nodes
from codegen.builder import Builder  # (and codegen.write_through) define their dispatches
from codegen.errors import LoweringError, UnsupportedError
from codegen.memory import Buf, natural_view, size_of
from ir.builders import USER_FUNS, dot, idf, lam, map_seq, param
from ir.interp import Interpreter, evaluate
from ir.nodes import ExprNode, FunCall, FunDecl, Lambda, Node
from ir.syntax import parse, print_program, show
from ir.typecheck import typecheck
from ir.types import Float, array
from ir.visitor import Dispatch, UnhandledNodeError, dispatches, snake_name, unhandled

IR_DIR = Path(ir.__file__).parent
IR_MODULES = sorted(f"ir.{m.name}" for m in pkgutil.iter_modules([str(IR_DIR)]))
for _m in IR_MODULES:  # every pass of ir defines its dispatches on import
    importlib.import_module(_m)

NODE_CLASSES = [c for c in vars(ir.nodes).values()
                if isinstance(c, type) and issubclass(c, Node) and dataclasses.is_dataclass(c)
                and c.__module__ == "ir.nodes"]
PASSES = [d for d in dispatches() if d.owner and d.owner.__module__.startswith("ir.")]
# the lowering's walk (codegen.builder) and its write-through analysis
LOWERING = [d for d in dispatches()
            if d.owner and d.owner.__module__ in ("codegen.builder", "codegen.write_through")]


@dataclasses.dataclass(frozen=True, slots=True, eq=True)
class Rotate(FunDecl):
    """A primitive no pass knows (what a new node class is until the passes handle it)."""


@dataclasses.dataclass(frozen=True, slots=True, eq=True)
class Hole(ExprNode):
    """An expression no pass knows."""


def test_node_classes_found() -> None:
    names = {c.__name__ for c in NODE_CLASSES}
    assert {"Param", "Literal", "FunCall", "Lambda", "UserFun", "Map", "Reduce", "Split",
            "Zip", "ToMem", "AsScalar"} <= names
    assert len(names) >= 20


def test_the_passes_use_the_visitor() -> None:
    owners = {f"{d.owner.__module__}.{d.owner.__qualname__}.{d.name}" for d in PASSES}
    assert {"ir.interp.Interpreter.expr", "ir.interp.Interpreter.apply",
            "ir.typecheck._Checker._infer", "ir.typecheck._Checker._apply",
            "ir.printer._Printer.expr", "ir.printer._Printer.fun"} <= owners


@pytest.mark.parametrize("dispatch", PASSES, ids=repr)
def test_every_pass_handles_every_node_class(dispatch: Dispatch) -> None:
    missing = unhandled(dispatch, NODE_CLASSES)
    assert not missing, (
        f"{dispatch!r} has no method for {', '.join(c.__name__ for c in missing)}: add "
        + ", ".join(f"{dispatch.prefix}_{snake_name(c)}" for c in missing))


@pytest.mark.parametrize("dispatch", PASSES, ids=repr)
def test_a_new_node_class_is_reported(dispatch: Dispatch) -> None:
    # what the test above reports when a node class is added and this pass misses it: a
    # new expression where expressions are handled, a new primitive where functions are
    # (each kind in the other place is a typed error of the pass, or its own printing)
    new = unhandled(dispatch, [*NODE_CLASSES, Rotate, Hole])
    assert new in ([Rotate], [Hole], [Rotate, Hole])


def test_unhandled_node_is_a_typed_error_naming_the_pass_and_class() -> None:
    X = param("X", array(Float, "N"))
    prog = Lambda((X,), Rotate()(X))
    with pytest.raises(UnhandledNodeError, match="the type checker does not handle Rotate"):
        typecheck(prog)
    with pytest.raises(UnhandledNodeError, match="the interpreter does not handle Rotate") as e:
        evaluate(prog, {"X": np.ones(4)}, check_types=False)
    assert e.value.pass_name == "interpreter" and e.value.node_class is Rotate
    assert e.value.method == "apply_rotate"
    with pytest.raises(UnhandledNodeError, match="the printer does not handle Rotate"):
        print_program(prog)
    assert show(prog) == "<Lambda>"  # messages never fail because of their printing


def test_dispatch_follows_the_mro_and_caches() -> None:
    class Count:
        visit = Dispatch("visit", Node)

        def visit_fun_decl(self, f: FunDecl) -> str:
            return "decl"

        def visit_fun_call(self, e: FunCall) -> str:
            return "call"

    c = Count()
    X = param("X")
    assert c.visit(Rotate()) == "decl" and c.visit(Rotate()(X)) == "call"
    assert Count.visit.dispatch._cache[Count, Rotate] is Count.visit_fun_decl
    with pytest.raises(UnhandledNodeError, match="the Count does not handle Param nodes"):
        c.visit(X)
    assert snake_name(type(Rotate())) == "rotate"
    assert [snake_name(c) for c in (FunCall, ExprNode)] == ["fun_call", "expr_node"]


def test_interpreter_entry_points_keep_their_signatures() -> None:
    it = Interpreter({"N": 3})
    X = param("X", array(Float, "N"))
    assert it.expr(X, {"X": (np.arange(3.0), 0)}, 0).tolist() == [0.0, 1.0, 2.0]
    f = lam(lambda x: x)
    assert it.apply(f, [np.ones(2)], {}, 0).tolist() == [1.0, 1.0]


# ------------------------------------------------------------------------ lowering


def test_the_lowering_uses_the_visitor() -> None:
    owners = {f"{d.owner.__qualname__}.{d.name}" for d in LOWERING}
    assert owners == {
        *(f"Builder.{n}" for n in ("value", "value_call", "apply_value", "emit_into",
                                   "emit_call", "emit_annotated", "apply_into", "inverse",
                                   "inverse_body", "owns_buffer")),
        "_Spine.on_spine", "_Spine.through"}


@pytest.mark.parametrize("dispatch", LOWERING, ids=repr)
def test_the_lowering_handles_every_node_class(dispatch: Dispatch) -> None:
    missing = unhandled(dispatch, NODE_CLASSES)
    assert not missing, (
        f"{dispatch!r} has no method for {', '.join(c.__name__ for c in missing)}: add "
        + ", ".join(f"{dispatch.prefix}_{snake_name(c)}" for c in missing)
        + " (or refuse the class with codegen.builder._refuse)")


def _refusals() -> list[tuple[Dispatch, type]]:
    out = []
    for d in LOWERING:
        assert d.owner is not None
        for c in NODE_CLASSES:
            fn = d.method_for(d.owner, c) if issubclass(c, d.root) else None
            if getattr(fn, "refuses", False):
                out.append((d, c))
    return out


def test_the_lowering_refuses_only_functions_where_values_are_lowered() -> None:
    refused = {(d.name, c.__name__) for d, c in _refusals()}
    funs = {c.__name__ for c in NODE_CLASSES if issubclass(c, FunDecl)}
    assert refused == {*(("value", f) for f in funs), *(("emit_into", f) for f in funs),
                       ("apply_value", "Reduce"), ("apply_value", "ToMem")}


@pytest.mark.parametrize("dispatch,node_class", _refusals(),
                         ids=lambda x: x.name if isinstance(x, Dispatch) else x.__name__)
def test_a_refusal_is_a_typed_lowering_error_naming_the_class(dispatch: Dispatch,
                                                              node_class: type) -> None:
    entry = getattr(Builder, dispatch.name)
    b = object.__new__(Builder)  # a refusal reads nothing of the builder nor of the node
    with pytest.raises(UnsupportedError, match=rf"\b{node_class.__name__}\b") as e:
        entry(b, object.__new__(node_class), {}, None, None)
    assert isinstance(e.value, LoweringError) and e.value.check == "unsupported"


def test_a_new_node_class_is_reported_by_the_lowering() -> None:
    # a new primitive needs a decision wherever functions are lowered (toMem of anything
    # but a lambda, and owns_buffer of anything but a memory annotation or a computing
    # map, have one answer for every function); a new expression wherever one is
    reported = {f"{d.owner.__qualname__}.{d.name}": [c.__name__ for c in
                                                     unhandled(d, [*NODE_CLASSES, Rotate, Hole])]
                for d in LOWERING if d.owner is not None}
    assert reported == {
        "Builder.value": ["Hole"], "Builder.value_call": ["Rotate"],
        "Builder.apply_value": ["Rotate"], "Builder.emit_into": ["Hole"],
        "Builder.emit_call": ["Rotate"], "Builder.emit_annotated": [],
        "Builder.apply_into": ["Rotate"], "Builder.inverse": ["Rotate"],
        "Builder.inverse_body": ["Hole"], "Builder.owns_buffer": ["Hole"],
        "_Spine.on_spine": ["Hole"], "_Spine.through": ["Rotate"]}


def test_the_builder_reports_an_unknown_class_and_refuses_a_function_as_a_value() -> None:
    X = param("X", array(Float, 4))
    copy = map_seq(idf)
    b = Builder(Lambda((X,), copy(X)), {})
    env = {"X": natural_view(array(Float, 4), Buf("X", "global", "float", size_of(
        array(Float, 4)), "input"))}
    with pytest.raises(UnhandledNodeError, match="the lowering does not handle Rotate") as e:
        b.value(Rotate()(X), env)
    assert e.value.method == "value_call_rotate"
    with pytest.raises(UnhandledNodeError, match="the lowering does not handle Hole"):
        b.emit_into(Hole(), env, env["X"])
    with pytest.raises(UnsupportedError, match="cannot lower Rotate"):
        b.value(Rotate(), env)
    with pytest.raises(UnsupportedError, match="cannot lower Map"):
        b.emit_into(copy, env, env["X"])


# --------------------------------------------------------------------- import graph


def _ir_imports(path: Path) -> set[str]:
    """The ir modules ``path`` imports, at the top or in functions (not for type checking)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            skip |= {id(x) for x in ast.walk(n)}
    out = set()
    for n in ast.walk(tree):
        if id(n) in skip:
            continue
        if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            if n.module == "ir":
                out |= {f"ir.{a.name}" for a in n.names}
            elif n.module.startswith("ir."):
                out.add(n.module)
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names if a.name.startswith("ir.")}
    return out


def test_ir_import_graph_has_no_cycle() -> None:
    graph = {f"ir.{p.stem}": _ir_imports(p) for p in IR_DIR.glob("*.py")
             if p.stem != "__init__"}
    # ir.nodes stays near the bottom: ir.errors (a leaf) for its typed errors, and these
    assert graph["ir.nodes"] == {"ir.cexpr", "ir.errors", "ir.sym", "ir.types"}
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycle = path[path.index(d):] + [m, d] if d in path else [m, d]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d, path + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_each_ir_module_imports_first_in_a_fresh_interpreter() -> None:
    code = (
        "import importlib, subprocess, sys\n"
        "mods = sys.argv[1:]\n"
        "bad = [m for m in mods if subprocess.run([sys.executable, '-c',\n"
        "       f'import {m}; import ' + ', '.join(reversed(mods))]).returncode]\n"
        "print(', '.join(bad), file=sys.stderr)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, *IR_MODULES], capture_output=True,
                       text=True, cwd=IR_DIR.parent, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]


# ------------------------------------------------------------- user function pickles


def test_user_functions_pickle_through_their_c_body() -> None:
    prog = parse("userfun f(a: float, b: float) : float = a > b ? a : fmax(b, 0.0f)  # c\n"
                 "X : [float]N\nY : [float]N\nmap(\\p -> f(get(0)(p), get(1)(p))) $ zip(X, Y)")
    back = pickle.loads(pickle.dumps(prog))
    assert back == prog
    (uf,) = [n for n in ir.nodes.walk(back) if isinstance(n, ir.nodes.UserFun)]
    assert uf.c_body == "return a > b ? a : fmax(b, 0.0f);"
    x, y = np.array([1.0, -2.0, 3.0]), np.array([0.5, -1.0, 4.0])
    np.testing.assert_array_equal(evaluate(back, {"X": x, "Y": y}), [1.0, 0.0, 4.0])
    assert all(pickle.loads(pickle.dumps(f)) is f for f in USER_FUNS.values())


def test_standard_user_functions_unpickle_as_themselves_in_a_fresh_interpreter() -> None:
    data = pickle.dumps(dot)
    code = ("import pickle, sys\nimport ir.nodes\nf = pickle.loads(sys.stdin.buffer.read())\n"
            "from ir.builders import dot\nassert f is dot, f\n")
    r = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True,
                       cwd=IR_DIR.parent, timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
