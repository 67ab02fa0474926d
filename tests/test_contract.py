"""Multiply-adds (``codegen.contract``): ``add(c, mult(a, b))`` becomes one ``a * b + c``."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from opencl_required import opencl_device

from codegen.accumulate import body_is
from codegen.buffers import Buf
from codegen.contract import MIN_CHAINS, contract_multiply_adds, mad_source
from codegen.runner import Runner
from codegen.stmt import Loop, Store
from codegen.views import Call, Const, Leaf, Mem, Sel, VecMem
from ir.builders import add, mult, userfun
from ir.interp import evaluate
from ir.programs import plain_matmul
from ir.sym import Var, sym
from ir.syntax import parse_file
from ir.types import Float, Int, VectorType
from mapper.api import problem
from mapper.candidates import build_candidate
from mapper.data import random_inputs, reduction_tolerance

ROOT = Path(__file__).resolve().parent.parent
CONV = ROOT / "examples" / "gpgpu20_conv_highlevel.lift"
CONV_SIZES = {"H": 6, "W": 5, "C": 16, "M": 16, "KH": 3, "KW": 3, "padT": 1, "padB": 1,
              "padL": 1, "padR": 1, "strideY": 1, "strideX": 1}
MM_SIZES = {"M": 32, "N": 32, "K": 48}

V16 = VectorType(Float, 16)
sub = userfun("sub", ("a", "b"), (Float, Float), Float, "return a - b;", lambda a, b: a - b)
mult_plus_one = userfun("multp1", ("a", "b"), (Float, Float), Float, "return a*b+1;",
                        lambda a, b: a * b + 1)
add3 = userfun("add3", ("a", "b", "c"), (Float, Float, Float), Float, "return a + b + c;",
               lambda a, b, c: a + b + c)
FUN_OF = {"uf_add": add, "uf_mult": mult, "uf_add_x16": add, "uf_mult_x16": mult,
          "uf_sub": sub, "uf_multp1": mult_plus_one, "uf_add3": add3}

ACC = Buf("acc", "private", "float", 1, "acc", scalar=True)
VACC = Buf("vacc", "private", "float16", 1, "acc", scalar=True)
X = Buf("x", "global", "float", 64, "input")
OUT = Buf("out", "global", "float", 64, "output")
IX = Buf("ix", "global", "int", 64, "input")


def scalar(k: int = 0) -> Mem:
    return Mem(X, sym(k), Float)


def vec(k: int = 0) -> VecMem:
    return VecMem(X, sym(16 * k), V16)


def contracted(value: Leaf, dest: Mem | VecMem | None = None) -> tuple[Leaf, list]:
    """``value`` stored (into an output of its type, unless ``dest``) and contracted: the
    new value and the helpers."""
    if dest is None:
        dest = VecMem(OUT, sym(16), V16) if value.type == V16 else Mem(OUT, sym(0), Float)
    st = Store(dest, value)
    helpers = contract_multiply_adds([st], FUN_OF)
    return st.value, helpers


def is_mad(v: Leaf, ctype: str, *args: Leaf) -> bool:
    return (isinstance(v, Call) and v.fname == f"liftmap_mad_{ctype}" and len(v.args) == 3
            and all(a is b for a, b in zip(v.args, args)))


# ------------------------------------------------------------------ recognising the bodies


@pytest.mark.parametrize("body,op,yes", [
    ("return a * b;", "mult", True), ("return b*a;", "mult", True), ("(a * b)", "mult", True),
    ("return a*b+1;", "mult", False), ("return a * a;", "mult", False),
    ("return a + b;", "mult", False), ("return a + b;", "add", True),
    ("return (b + a);", "add", True), ("return a - b;", "add", False),
    ("return dot(a, b);", "dot", True), ("return dot(a, b);", "mult", False),
])
def test_body_is_recognises_exactly_the_operator(body, op, yes):
    uf = userfun("f", ("a", "b"), (Float, Float), Float, body, lambda a, b: a)
    assert body_is(uf, op) is yes


# ------------------------------------------------------------------ the rewrite


@pytest.mark.parametrize("product_first", [False, True])
def test_add_of_a_product_becomes_one_multiply_add_scalar(product_first):
    acc, x, y = Mem(ACC, sym(0), Float), scalar(1), scalar(2)
    prod = Call("uf_mult", (x, y), Float)
    v, helpers = contracted(Call("uf_add", (prod, acc) if product_first else (acc, prod),
                                 Float))
    assert is_mad(v, "float", x, y, acc)
    assert helpers == [("liftmap_mad_float", mad_source("float"))]
    assert mad_source("float") == ("float liftmap_mad_float(float a, float b, float c) "
                                   "{ return a * b + c; }")


@pytest.mark.parametrize("product_first", [False, True])
def test_add_of_a_product_becomes_one_multiply_add_vector(product_first):
    acc, w = Mem(VACC, sym(0), V16), vec(1)
    bcast = Call("(float16)", (scalar(3),), V16)  # a scalar broadcast: a float16 value
    prod = Call("uf_mult_x16", (bcast, w), V16)
    v, helpers = contracted(Call("uf_add_x16", (prod, acc) if product_first else (acc, prod),
                                 V16))
    assert is_mad(v, "float16", bcast, w, acc)
    assert [h for h, _ in helpers] == ["liftmap_mad_float16"]


def test_nested_additions_and_select_branches_are_rewritten():
    acc = Mem(ACC, sym(0), Float)
    a, b, c, d = (scalar(k) for k in range(4))
    inner = Call("uf_add", (acc, Call("uf_mult", (a, b), Float)), Float)
    v, _ = contracted(Call("uf_add", (inner, Call("uf_mult", (c, d), Float)), Float))
    assert is_mad(v, "float", c, d, v.args[2]) and is_mad(v.args[2], "float", a, b, acc)
    # inside another call's argument, and in a padding select's branches
    other = Const(0.0, Float)
    sel = Sel((Var("i").lt(4),), Call("uf_add", (acc, Call("uf_mult", (a, b), Float)), Float),
              other)
    v, _ = contracted(Call("uf_sub", (sel, c), Float))
    assert isinstance(v, Call) and v.fname == "uf_sub" and v.args[1] is c
    s = v.args[0]
    assert isinstance(s, Sel) and s.conds == sel.conds and s.other is other
    assert is_mad(s.then, "float", a, b, acc)


def test_what_is_not_an_add_of_a_product_is_left_alone():
    acc, vacc = Mem(ACC, sym(0), Float), Mem(VACC, sym(0), V16)
    x, y = scalar(1), scalar(2)
    values = [
        Call("uf_sub", (acc, Call("uf_mult", (x, y), Float)), Float),  # not an addition
        Call("uf_add", (acc, Call("uf_multp1", (x, y), Float)), Float),  # not exactly a*b
        Call("uf_add", (acc, Call("uf_add", (x, y), Float)), Float),  # no product
        Call("uf_add3", (acc, x, Call("uf_mult", (x, y), Float)), Float),  # three terms
        # a scalar times a vector: the factors' types differ from the sum's
        Call("uf_add_x16", (vacc, Call("uf_mult_x16", (x, vec(1)), V16)), V16),
        # integers
        Call("uf_add", (Mem(IX, sym(0), Int), Call("uf_mult", (Mem(IX, sym(1), Int),
                                                               Mem(IX, sym(2), Int)), Int)),
             Int),
    ]
    for value in values:
        dest = Mem(VACC, sym(0), V16) if value.type == V16 else Mem(ACC, sym(0), Float)
        v, helpers = contracted(value, dest)
        assert v is value and helpers == []


def _updates(n: int) -> tuple[Loop, list[Store]]:
    """A loop whose body makes ``n`` accumulations ``acc[k] = add(acc[k], mult(x, y))``."""
    accs = Buf("accs", "private", "float", 8, "acc")
    lp = Loop("seq", None, Var("r"), 64, "r", "reduce")
    lp.body = [Store(Mem(accs, sym(k), Float),
                     Call("uf_add", (Mem(accs, sym(k), Float),
                                     Call("uf_mult", (scalar(k), scalar(k + 1)), Float)), Float),
                     parent=lp) for k in range(n)]
    return lp, lp.body


def test_an_accumulation_is_fused_only_among_enough_independent_chains():
    """One accumulator's chain runs at its update's latency: a fused update (the FMA's
    latency) would make it longer; a register block of MIN_CHAINS hides it."""
    for n in (1, MIN_CHAINS - 1):
        lp, stores = _updates(n)
        assert contract_multiply_adds([lp], FUN_OF) == []
        assert all(s.value.fname == "uf_add" for s in stores)
    lp, stores = _updates(MIN_CHAINS)
    assert [h for h, _ in contract_multiply_adds([lp], FUN_OF)] == ["liftmap_mad_float"]
    assert all(s.value.fname == "liftmap_mad_float" for s in stores)
    # a value that accumulates nothing is fused wherever it is
    acc, x, y = Mem(ACC, sym(0), Float), scalar(1), scalar(2)
    v, _ = contracted(Call("uf_add", (acc, Call("uf_mult", (x, y), Float)), Float))
    assert is_mad(v, "float", x, y, acc)
    v, _ = contracted(Call("uf_add", (acc, Call("uf_mult", (x, y), Float)), Float), acc)
    assert v.fname == "uf_add"  # into itself, alone: a chain


# ------------------------------------------------------------------ lowered kernels


def test_a_lowered_matmul_fuses_its_updates():
    """Without the pass (codegen.lower) the updates stay uf_add(acc, uf_mult(...))."""
    p = problem(plain_matmul(), device="pocl-cpu")
    src = p.build("A=G1 B=G0", {**MM_SIZES, "vB": 16, "uA": 4, "uB": 1}).source
    assert "float16 liftmap_mad_float16(float16 a, float16 b, float16 c)" in src
    assert src.count("= liftmap_mad_float16(") >= 4  # a register block of vectors
    assert "uf_mult" not in src and "uf_add" not in src  # no longer called: not printed
    # one dot product per work-item: one chain, left unfused
    src = p.build("A=G0 B=S", MM_SIZES).source
    assert "liftmap_mad" not in src and "acc = uf_add(acc, uf_mult(" in src


@pytest.fixture(scope="module")
def runner():
    with opencl_device():  # none here: a skip, or with LIFTMAP_REQUIRE_OPENCL a failure
        return Runner()


def _check(runner, program, mapping: str, sizes: dict[str, int], helper: str) -> None:
    cp = build_candidate(program, mapping, sizes)
    assert any(helper + "(" in k.source for k in cp.kernels), mapping
    data = random_inputs(program, sizes, seed=1)
    ref = evaluate(program, data, sizes)
    o = runner.evaluate(cp, data, ref, repeats=1, **reduction_tolerance(ref))
    assert o.ok, (mapping, o.reason)


@pytest.mark.opencl
@pytest.mark.parametrize("mapping,tuning,helper", [
    ("A=G1 B=G0", {"vB": 16, "uA": 4, "uB": 1}, "liftmap_mad_float16"),  # 4 float16
    ("A=G1 B=G0", {"vB": 4, "uA": 2, "uB": 2}, "liftmap_mad_float4"),
    ("A=G1 B=G0", {"vB": 1, "uA": 2, "uB": 2}, "liftmap_mad_float"),  # 4 scalars
])
def test_a_fused_matmul_matches_the_reference(runner, mapping, tuning, helper):
    _check(runner, plain_matmul(), mapping, {**MM_SIZES, **tuning}, helper)


@pytest.mark.opencl
def test_a_fused_convolution_matches_the_reference(runner):
    prog = parse_file(str(CONV))
    _check(runner, prog, "Y=G1 X=G0 K=G2", {**CONV_SIZES, "vK": 16, "uX": 5, "uK": 1},
           "liftmap_mad_float16")


_CHILD = """
from codegen.runner import Runner
from ir.programs import plain_matmul
from mapper.candidates import build_candidate
from mapper.data import random_inputs
sizes = dict(M=32, N=32, K=48, vB=16, uA=4, uB=1)
cp = build_candidate(plain_matmul(), "A=G1 B=G0", sizes, name="contracted")
assert "liftmap_mad_float16(" in cp.kernels[0].source
Runner().run(cp, random_inputs(plain_matmul(), sizes), repeats=1, warmup=0)
"""


def _fma_cpu() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        return " fma " in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@pytest.mark.opencl
@pytest.mark.slow
def test_the_device_runs_the_multiply_adds_as_fma_instructions(tmp_path):
    """PoCL's machine code (NOTES-opencl: "How to see what the device really runs"): the
    kernel's updates are vfmadd, not vmulps + vaddps (as PoCL's own mad() would be)."""
    if shutil.which("objdump") is None or not _fma_cpu():
        pytest.skip("needs objdump and an x86-64 CPU with FMA")
    env = {**os.environ, "POCL_LEAVE_KERNEL_COMPILER_TEMP_FILES": "1",
           "POCL_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    if r.returncode:
        with opencl_device():
            Runner()  # no device here: a skip (or a failure where one is required)
        pytest.fail(r.stderr[-3000:])
    (so,) = tmp_path.rglob("contracted.so")
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(so)], capture_output=True,
                         text=True, check=True).stdout
    assert "vfmadd" in dis and "vmulps" not in dis and "vaddps" not in dis
