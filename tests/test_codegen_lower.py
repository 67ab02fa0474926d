"""Lowering mapped programs to OpenCL: the kernels compile on PoCL and match the interpreter.

Every mapping either lowers and computes the interpreter's result, or is rejected with a
typed error naming the failed check; none may produce a wrong result silently.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import statistics
import time
import warnings

import numpy as np
import pytest
from conv_reference import conv2d_hwc
from opencl_required import import_pyopencl, opencl_device

from codegen import errors
from codegen.device import NoDeviceError, NoPlatformError
from codegen.lower import lower
from codegen.program import DTYPES, CompiledProgram
from codegen.target import POCL_CPU, Device
from experiments.vgg16 import PAPER_HAND_MAPPING
from ir.builders import (
    add,
    as_scalar,
    as_vector,
    compose,
    join,
    lam,
    map_glb,
    map_lcl,
    map_seq,
    map_wrg,
    mult,
    param,
    split,
    to_global,
    to_local,
    transpose,
    vectorize,
)
from ir.conv_layer import ConvLayer
from ir.interp import evaluate
from ir.nodes import FunCall, Join, Lambda, Map, Split, ToMem, UserFun, maps_in, rebuild, replace
from ir.programs import cc22_listing1, cc22_listing3, conv_partial_stage, gpgpu20_conv_pipeline
from ir.sym import Var
from ir.types import Float, array

RTOL = ATOL = 1e-4

# ------------------------------------------------------------------ OpenCL helper


class CL:
    """A context on the PoCL CPU device (the first PoCL device that compiles)."""

    def __init__(self):
        cl = import_pyopencl()

        self.cl = cl
        try:
            plats = [p for p in cl.get_platforms() if "Portable Computing Language" in p.name]
        except cl.Error as e:  # PLATFORM_NOT_FOUND_KHR when no ICD at all
            raise NoPlatformError(f"no OpenCL platform found ({e})") from e
        plats.sort(key=lambda p: "DISTRO" not in p.version)  # pip's PoCL first
        for p in plats:
            for d in p.get_devices():
                try:
                    ctx = cl.Context([d])
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        cl.Program(ctx, "kernel void k(global float* x) { x[0] = 1.0f; }"
                                   ).build()
                except cl.Error:
                    continue
                self.device, self.ctx = d, ctx
                self.queue = cl.CommandQueue(ctx)
                return
        raise NoDeviceError("no PoCL device compiles a kernel")

    def build(self, programs: list[CompiledProgram]):
        """One OpenCL program holding every kernel of ``programs`` (names must differ)."""
        funs: list[str] = []
        bodies: list[str] = []
        for cp in programs:
            for k in cp.kernels:
                head, kern = k.source.split("__kernel void", 1)
                for line in head.splitlines():
                    if line and not line.startswith("//") and line not in funs:
                        funs.append(line)
                bodies.append("__kernel void" + kern)
        src = "\n".join(funs + bodies)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self.cl.Program(self.ctx, src).build(
                options=list(programs[0].build_options))

    def run(self, cp: CompiledProgram, inputs: dict, prg=None) -> np.ndarray:
        cl, q = self.cl, self.queue
        prg = prg or self.build([cp])
        mf = cl.mem_flags
        bufs = {}
        for name, b in cp.buffers.items():
            if b.role == "input":
                a = np.ascontiguousarray(np.asarray(inputs[name], DTYPES[b.dtype]).ravel())
                assert a.size == b.count, (name, a.size, b.count)
                bufs[name] = cl.Buffer(self.ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a)
            else:
                bufs[name] = cl.Buffer(self.ctx, mf.READ_WRITE, size=max(b.nbytes, 4))
        for k in cp.kernels:
            getattr(prg, k.name)(q, k.global_size, k.local_size, *[bufs[n] for n in k.args])
        out_b = cp.buffers[cp.output]
        out = np.empty(out_b.count, DTYPES[out_b.dtype])
        cl.enqueue_copy(q, out, bufs[cp.output])
        q.finish()
        return out.reshape(cp.output_shape)


@pytest.fixture(scope="module")
def ocl():
    with opencl_device():  # none here: a skip, or with LIFTMAP_REQUIRE_OPENCL a failure
        return CL()


# ------------------------------------------------------------------ mapping helpers

KINDS = ("mapSeq", "mapGlb(0)", "mapGlb(1)", "mapWrg(0)", "mapWrg(1)", "mapLcl(0)", "mapLcl(1)")


def mapped(program, codes: dict[str, str], rest: str | None = None):
    """``program`` with map kinds by label (``"mapWrg(0)"``); ``rest`` for unlisted maps."""
    if rest is not None:
        codes = {**{m.label: rest for m in maps_in(program) if m.label}, **codes}

    def fn(n):
        if isinstance(n, Map) and n.label in codes:
            k = codes[n.label]
            if k == "mapSeq":
                return replace(n, kind="mapSeq", dim=None)
            return replace(n, kind=k[:-3], dim=int(k[-2]))
        return None

    return rebuild(program, fn)


def vectorised(program, label: str, width: int = 4):
    """``mapX(toMem(f))`` -> ``asScalar o mapSeqX(toMem(vectorize(w, f))) o asVector(w)``."""

    def fn(n):
        if isinstance(n, Map) and n.label == label:
            tm = n.f
            assert isinstance(tm, ToMem) and isinstance(tm.f, UserFun)
            inner = replace(n, f=ToMem(vectorize(width, tm.f), tm.space), kind="mapSeq",
                            dim=None)
            return compose(as_scalar(), inner, as_vector(width))
        return None

    return rebuild(program, fn)


def fused_cd(program, s1: str = "s1"):
    """Listing 3 with D fused into C: ``mapC(mapD(f))`` -> ``split(s1) o mapC(f) o join``."""

    def fn(n):
        if isinstance(n, FunCall) and isinstance(n.f, Map) and n.f.label == "C":
            d = n.f.f
            c = Map(d.f, n.f.kind, n.f.dim, "C")
            return FunCall(Split(s1), (FunCall(c, (FunCall(Join(), n.args),)),))
        return None

    return rebuild(program, fn)


L3_SIZES = dict(N=64, s0=16, s1=4)


def l3_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {"X": rng.standard_normal(64).astype(np.float32), "y": np.float32(1.5),
            "z": np.float32(-0.25)}


def check(ocl, program, sizes, inputs, **kw) -> CompiledProgram:
    cp = lower(program, sizes, **kw)
    ref = evaluate(program, inputs, sizes)
    out = ocl.run(cp, inputs)
    np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)
    return cp


# ---------------------------------------------------------------------- CC'22 Listing 3


@pytest.mark.parametrize("variant", ["global", "local", "private"])
@pytest.mark.parametrize("codes", [
    dict(A="mapGlb(0)", B="mapSeq", C="mapSeq", D="mapSeq"),
    dict(A="mapSeq", B="mapSeq", C="mapSeq", D="mapSeq"),
    dict(A="mapGlb(1)", B="mapSeq", C="mapSeq", D="mapSeq"),
])
def test_listing3_outer_parallel(ocl, variant, codes):
    p = mapped(cc22_listing3(local=variant == "local", private=variant == "private"), codes)
    check(ocl, p, L3_SIZES, l3_inputs())


def test_listing3_paper_legal_local_mapping_needs_a_barrier(ocl):
    codes = dict(A="mapWrg(0)", B="mapLcl(0)", C="mapLcl(0)", D="mapSeq")
    cp = check(ocl, mapped(cc22_listing3(local=True), codes), L3_SIZES, l3_inputs())
    (k,) = cp.kernels
    assert k.source.startswith("// mapping: A=mapWrg(0) B=mapLcl(0) C=mapLcl(0) D=mapSeq\n")
    assert "// sizes: N=64 s0=16 s1=4" in k.source
    assert k.source.count("barrier(CLK_LOCAL_MEM_FENCE)") == 1
    assert "__local float" in k.source
    assert k.global_size == (64,) and k.local_size == (16,)
    assert [b.count for b in k.local_buffers] == [16]
    assert cp.memory_report()["local_per_group"] == 64
    # the illegal mapping of the same paragraph (CC'22 4.3): mapGlb with local memory
    bad = dict(A="mapGlb(1)", B="mapGlb(0)", C="mapGlb(0)", D="mapSeq")
    with pytest.raises(errors.CrossGroupDependencyError):
        lower(mapped(cc22_listing3(local=True), bad), L3_SIZES)


@pytest.mark.parametrize("variant", ["global", "local"])
def test_listing3_c_seq_d_local(ocl, variant):
    codes = dict(A="mapWrg(0)", B="mapLcl(0)", C="mapSeq", D="mapLcl(0)")
    cp = check(ocl, mapped(cc22_listing3(local=variant == "local"), codes), L3_SIZES,
               l3_inputs(1))
    assert "barrier(" in cp.kernels[0].source


def test_listing3_fused_needs_no_barrier(ocl):
    p = mapped(fused_cd(cc22_listing3(local=True)), dict(A="mapWrg(0)", B="mapLcl(0)",
                                                          C="mapLcl(0)"))
    cp = check(ocl, p, L3_SIZES, l3_inputs(2))
    assert "barrier(" not in cp.kernels[0].source  # each work-item reads what it wrote
    p = mapped(fused_cd(cc22_listing3()), dict(A="mapGlb(0)", B="mapSeq", C="mapSeq"))
    check(ocl, p, L3_SIZES, l3_inputs(2))


def test_listing3_private_memory_keeps_consumers_in_one_work_item():
    p = mapped(cc22_listing3(private=True),
               dict(A="mapWrg(0)", B="mapLcl(0)", C="mapLcl(0)", D="mapSeq"))
    with pytest.raises(errors.MemoryScopeError, match="private"):
        lower(p, L3_SIZES)
    cp = lower(mapped(cc22_listing3(private=True),
                      dict(A="mapGlb(0)", B="mapSeq", C="mapSeq", D="mapSeq")), L3_SIZES)
    assert cp.kernels[0].private_bytes == 16 * 4  # one A-iteration's products per work-item
    assert cp.memory_report()["global_temps"] == 0


# Valid mappings per variant among the 7^4 assignments of KINDS to A-D (see docs/codegen.md).
EXPECTED_VALID = {"global": 75, "local": 91, "private": 57}


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["global", "local", "private"])
def test_listing3_every_assignment_is_correct_or_rejected(ocl, variant):
    base = cc22_listing3(local=variant == "local", private=variant == "private")
    inputs = l3_inputs(3)
    ref = evaluate(base, inputs, L3_SIZES)
    valid, rejected = [], {}
    for n, combo in enumerate(itertools.product(KINDS, repeat=4)):
        codes = dict(zip("ABCD", combo))
        try:
            cp = lower(mapped(base, codes), L3_SIZES, name=f"k{n}")
        except errors.LoweringError as e:
            rejected[e.check] = rejected.get(e.check, 0) + 1
            continue
        valid.append((codes, cp))
    prg = ocl.build([cp for _, cp in valid])
    wrong = []
    for codes, cp in valid:
        out = ocl.run(cp, inputs, prg)
        if not np.allclose(out, ref, rtol=RTOL, atol=ATOL):
            wrong.append(codes)
    assert not wrong, f"wrong results for {wrong}"
    assert len(valid) == EXPECTED_VALID[variant], rejected
    assert set(rejected) <= {"parallel-nesting", "cross-group-dependency", "memory-scope",
                             "data-race"}


# ---------------------------------------------------------------------- CC'22 Listing 1

L1_SIZES = dict(I=4, J=8, K=8)
TABLE1 = {
    "M1": dict(A="mapGlb(0)", B="mapSeq", C="mapSeq", D="mapSeq", E="mapSeq"),
    "M2": dict(A="mapGlb(1)", B="mapGlb(0)", C="mapSeq", D="mapGlb(0)", E="mapSeq"),
    "M3": dict(A="mapSeq", B="mapWrg(0)", C="mapLcl(0)", D="mapWrg(0)", E="mapLcl(0)"),
    "M4": dict(A="mapWrg(0)", B="mapLcl(0)", C="mapSeq", D="mapLcl(0)", E="mapSeq"),
    "M5": dict(A="mapWrg(0)", B="mapLcl(0)", C="mapSeq", D="mapLcl(0)", E="V"),
    "M6": dict(A="mapWrg(0)", B="mapLcl(0)", C="V", D="mapSeq", E="mapLcl(0)"),
    "M6seq": dict(A="mapWrg(0)", B="mapLcl(0)", C="mapSeq", D="mapSeq", E="mapLcl(0)"),
}


def listing1(name: str):
    p = cc22_listing1()
    codes = TABLE1[name]
    for k, v in codes.items():
        if v == "V":
            p = vectorised(p, k)
    return mapped(p, {k: v for k, v in codes.items() if v != "V"})


@pytest.mark.parametrize("name,barriers", [("M1", 0), ("M4", 1), ("M6", 0), ("M6seq", 0)])
def test_listing1_valid_mappings(ocl, name, barriers):
    x = np.random.default_rng(4).standard_normal((4, 8, 8)).astype(np.float32)
    cp = check(ocl, listing1(name), L1_SIZES, {"input": x})
    assert cp.kernels[0].source.count("barrier(") == barriers
    if name == "M6":
        assert "vload4" in cp.kernels[0].source and "vstore4" in cp.kernels[0].source
    if name == "M1":
        assert cp.kernels[0].local_size == (1,)  # local memory under mapGlb: one per group


@pytest.mark.parametrize("name,error", [
    ("M2", errors.CrossGroupDependencyError),
    ("M3", errors.MemoryScopeError),
    ("M5", errors.UnvectorizableError),
])
def test_listing1_invalid_mappings(name, error):
    with pytest.raises(error) as ei:
        lower(listing1(name), L1_SIZES)
    assert ei.value.check in {"cross-group-dependency", "memory-scope", "vectorization"}
    assert "CC'22" in str(ei.value) or "contiguous" in str(ei.value)


# ------------------------------------------------------------------------- the checks


def test_unmapped_map_is_rejected():
    with pytest.raises(errors.UnmappedMapError, match="map B computes but has no parallel mapping"):
        lower(mapped(cc22_listing3(), dict(A="mapGlb(0)", C="mapSeq", D="mapSeq")), L3_SIZES)


def test_duplicate_dimension_is_rejected():
    p = mapped(cc22_listing3(), dict(A="mapGlb(0)", B="mapSeq", C="mapGlb(0)", D="mapSeq"))
    with pytest.raises(errors.ParallelNestingError, match="dimension 0"):
        lower(p, L3_SIZES)


def test_redundant_sequential_writes_race():
    p = mapped(cc22_listing3(), dict(A="mapWrg(0)", B="mapLcl(0)", C="mapSeq", D="mapSeq"))
    with pytest.raises(errors.DataRaceError, match="local id 0"):
        lower(p, L3_SIZES)


@pytest.mark.parametrize("crop", [0, 3])
def test_a_cropped_output_writes_through_and_still_races(crop):
    """A crop of the result (``pad`` by negative amounts) is written through, its last
    writes guarded; the guard does not hide a race: the output written redundantly by
    every local id is one, cropped or not; written once per element it is none."""
    from ir.builders import pad

    base = cc22_listing3()
    cropped = replace(base, body=FunCall(pad(0, -crop), (base.body,))) if crop else base
    race = mapped(cropped, dict(A="mapWrg(0)", B="mapSeq", C="mapLcl(0)", D="mapSeq"))
    with pytest.raises(errors.DataRaceError, match="local id 0"):
        lower(race, L3_SIZES)
    fine = lower(mapped(cropped, dict(A="mapWrg(0)", B="mapLcl(0)", C="mapLcl(0)",
                                      D="mapSeq")), L3_SIZES)
    assert len(fine.kernels) == 1  # no copy kernel for the crop
    writes = [w.strip() for w in fine.kernels[0].source.splitlines() if "out[" in w]
    assert any(w.startswith("if (") for w in writes) == bool(crop), writes


def sync_example(n: int = 6, m: int = 4):
    """CC'22 Section 4.6: ``mapLclA(1)(mapLclB(0)(f) o transpose o mapLclC(0)(g)) $ X``."""
    X = param("X", array(Float, n, m, m))
    g = lam(lambda x: FunCall(mult, (x, x)))
    f = lam(lambda x: FunCall(add, (x, x)))
    body = map_lcl(1, compose(map_lcl(0, map_seq(to_global(f)), "B"), transpose(),
                              map_lcl(0, map_seq(g), "C")), "A")(X)
    return Lambda((X,), body)


def test_synchronizability(ocl):
    x = np.random.default_rng(5).standard_normal((6, 4, 4)).astype(np.float32)
    cp = check(ocl, sync_example(), {}, {"X": x})  # local size 6 in dim 1: one iteration
    assert "barrier(CLK_GLOBAL_MEM_FENCE)" in cp.kernels[0].source
    check(ocl, sync_example(), {}, {"X": x}, local_sizes={0: 4, 1: 3})  # 6 % 3 == 0
    with pytest.raises(errors.SynchronizabilityError, match="mapLcl\\(1\\) A"):
        lower(sync_example(), {}, local_sizes={0: 4, 1: 4})  # 6 % 4 != 0


def test_barrier_before_the_next_iteration_reuses_local_memory(ocl):
    """A sequential loop around a local producer/consumer pair needs a second barrier."""
    X = param("X", array(Float, 2, 3, 4, 4))
    f = to_local(lam(lambda x: FunCall(mult, (x, x))))
    g = to_global(lam(lambda x: FunCall(add, (x, x))))
    inner = compose(transpose(), map_lcl(0, map_seq(g, "E"), "D"), transpose(),
                    map_lcl(0, map_seq(f, "C"), "B"))
    p = Lambda((X,), map_wrg(0, map_seq(inner, "S"), "A")(X))
    x = np.random.default_rng(6).standard_normal((2, 3, 4, 4)).astype(np.float32)
    cp = check(ocl, p, {}, {"X": x})
    assert cp.kernels[0].source.count("barrier(CLK_LOCAL_MEM_FENCE)") == 2


def test_work_group_size_and_memory_limits():
    p = mapped(cc22_listing3(local=True), dict(A="mapWrg(0)", B="mapLcl(0)", C="mapLcl(0)",
                                               D="mapSeq"))
    with pytest.raises(errors.WorkGroupSizeError, match="exceeds"):
        lower(p, L3_SIZES, local_sizes={0: 8192})
    big = dict(N=2 ** 19, s0=2 ** 19, s1=4)  # 2 MiB of local memory per work-group
    with pytest.raises(errors.LocalMemoryError, match="local memory"):
        lower(p, big)
    small = dataclasses.replace(POCL_CPU, max_mem_alloc_size=128)
    with pytest.raises(errors.MaxAllocationError, match="allocates at most"):
        lower(p, L3_SIZES, device=small)
    q = mapped(cc22_listing3(private=True), dict(A="mapGlb(0)", B="mapSeq", C="mapSeq",
                                                 D="mapSeq"))
    with pytest.raises(errors.PrivateMemoryError):
        lower(q, L3_SIZES, device=dataclasses.replace(POCL_CPU, private_mem_size=32))


def test_global_size_rounded_up_to_the_local_size(ocl):
    p = mapped(cc22_listing3(), dict(A="mapGlb(0)", B="mapSeq", C="mapSeq", D="mapSeq"))
    cp = check(ocl, p, L3_SIZES, l3_inputs(7), local_sizes={0: 3})
    k = cp.kernels[0]
    assert k.global_size == (6,) and k.local_size == (3,)
    assert "if (i_A < 4)" in k.source


def test_top_level_nests_with_a_global_dependency_become_two_kernels(ocl):
    X = param("X", array(Float, 8, 6))
    sq = map_seq(to_global(lam(lambda x: FunCall(mult, (x, x)))))
    inc = map_seq(to_global(lam(lambda x: FunCall(add, (x, x)))))
    body = map_glb(0, inc, "B")(FunCall(transpose(), (map_glb(0, sq, "A")(X),)))
    p = Lambda((X,), body)
    x = np.random.default_rng(8).standard_normal((8, 6)).astype(np.float32)
    cp = check(ocl, p, {}, {"X": x})
    assert len(cp.kernels) == 2
    assert [b.role for b in cp.buffers.values()].count("temp") == 1


# ------------------------------------------------------------------- GPGPU'20 convolution

SMALL = ConvLayer("small", C=2, H=6, W=6, M=4, K=3, S=1, P=1)


def conv_data(layer: ConvLayer, seed=9):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((layer.H, layer.W, layer.C)).astype(np.float32)
    w = rng.standard_normal((layer.M, layer.K, layer.K, layer.C)).astype(np.float32)
    return x, w


def padded_input(layer, env, x):
    return evaluate(gpgpu20_conv_pipeline().stage("pad").program, {"inputData": x}, env)


@pytest.mark.parametrize("layer,tuning", [
    (SMALL, dict(theta=4, rho=0, kappa=2, sigma=2, omega=6, v=1)),
    (SMALL, dict(theta=5, rho=0, kappa=4, sigma=3, omega=9, v=1)),
    (ConvLayer("c4", C=4, H=6, W=6, M=4, K=3, S=1, P=1),
     dict(theta=4, rho=0, kappa=2, sigma=2, omega=36, v=4)),
])
def test_conv_partial_paper_hand_mapping(ocl, layer, tuning):
    env = dict(layer.sizes(), **tuning)
    x, w = conv_data(layer)
    p = mapped(conv_partial_stage(), PAPER_HAND_MAPPING, rest="mapSeq")
    cp = check(ocl, p, env, {"kernelsWeights": w, "paddedInput": padded_input(layer, env, x)})
    src = cp.kernels[0].source
    assert "get_group_id(1)" in src and "get_local_id(0)" in src
    if tuning["v"] == 4:
        # the dot-product reduction accumulates in float4 registers (codegen.accumulate)
        assert "float4" in src and "fma(" in src and "vload4" in src


def test_conv_partial_vectorises_with_several_chunks(ocl):
    """Vectorising before the coalescing reorder keeps lanes contiguous even when a window
    has several chunks (omega < C*K*K); before, every such v > 1 was unvectorizable."""
    layer = ConvLayer("c4", C=4, H=6, W=6, M=4, K=3, S=1, P=1)
    env = dict(layer.sizes(), theta=4, rho=0, kappa=2, sigma=2, omega=12, v=4)
    x, w = conv_data(layer)
    p = mapped(conv_partial_stage(), PAPER_HAND_MAPPING, rest="mapSeq")
    cp = check(ocl, p, env, {"kernelsWeights": w, "paddedInput": padded_input(layer, env, x)})
    assert "vload4" in cp.kernels[0].source


def test_non_contiguous_vector_access_is_rejected():
    """CC'22 Table 1 M5: a vectorised map over a transposed (strided) view."""
    from ir.builders import as_scalar, as_vector, idf, map_glb, map_seq, param, transpose
    from ir.builders import compose as comp
    from ir.nodes import Lambda, Vectorize

    X = param("X", array(Float, "N", "M"))
    body = map_glb(0, comp(as_scalar(), map_seq(Vectorize(4, idf)), as_vector(4)))(
        transpose()(X))
    with pytest.raises(errors.UnvectorizableError):
        lower(Lambda((X,), body), {"N": 8, "M": 8})


def test_conv_partial_lowering_time():
    env = dict(ConvLayer("7", C=128, H=112, W=112, M=128).sizes(), theta=5, rho=11,
               kappa=4, sigma=3, omega=1152, v=4)
    p = mapped(conv_partial_stage(), PAPER_HAND_MAPPING, rest="mapSeq")
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        lower(p, env)
        times.append(time.perf_counter() - t0)
    assert statistics.median(times) < 0.5, times


STAGE_MAPPINGS = {
    "pad": dict(Ph="mapGlb(1)", Pw="mapGlb(0)"),
    "partial": PAPER_HAND_MAPPING,
    "final": dict(F1="mapGlb(2)", F2="mapGlb(1)", F3="mapGlb(0)"),
    "crop": dict(Ch="mapGlb(1)", Cw="mapGlb(0)"),
}


@pytest.mark.parametrize("layer,tuning", [
    (SMALL, dict(theta=4, rho=0, kappa=2, sigma=2, omega=6, v=1)),
    (ConvLayer("odd-stride2", C=2, H=7, W=7, M=2, K=3, S=2, P=1),
     dict(theta=5, rho=0, kappa=2, sigma=2, omega=3, v=1)),
])
def test_conv_pipeline_on_the_device(ocl, layer, tuning):
    env = dict(layer.sizes(), **tuning)
    x, w = conv_data(layer, 10)
    inputs = {"inputData": x, "kernelsWeights": w}
    prev = None
    for st in gpgpu20_conv_pipeline().stages:
        args = {n: (prev if src == "<previous>" else inputs[src]) for n, src in st.sources}
        p = mapped(st.program, STAGE_MAPPINGS[st.name], rest="mapSeq")
        # ``check`` with the device's output kept for the next stage (one build, not two)
        prev = ocl.run(lower(p, env), args)
        np.testing.assert_allclose(prev, evaluate(p, args, env), rtol=RTOL, atol=ATOL)
    ref = conv2d_hwc(x, w, None, layer.S, (layer.P,) * 4)
    np.testing.assert_allclose(prev, ref, rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------------------- general


def test_no_mad_or_fma_and_build_options():
    p = mapped(conv_partial_stage(), PAPER_HAND_MAPPING, rest="mapSeq")
    env = dict(ConvLayer("c4", C=4, H=6, W=6, M=4, K=3).sizes(), theta=4, rho=0, kappa=2,
               sigma=2, omega=36, v=4)
    cp = lower(p, env)
    src = cp.kernels[0].source
    assert "mad(" not in src
    # fma only in the vector accumulators of the dot-product reduction (codegen.accumulate)
    assert all("vacc_" in line for line in src.splitlines() if "fma(" in line)
    assert cp.build_options == ("-cl-mad-enable",)


def test_limits_are_read_from_the_device(ocl):
    """``Device.from_opencl`` reports what the live device says (no machine's values
    are hard-coded: PoCL's allocation limit, for one, follows the free memory)."""
    from codegen.device import device_limits

    dev = Device.from_opencl(ocl.device)
    rep = device_limits(ocl.device)
    from codegen.target import stable_memory_size

    for key in ("max_work_group_size", "max_work_item_sizes", "local_mem_size"):
        assert getattr(dev, key) == rep[key], key
    for key in ("max_mem_alloc_size", "global_mem_size"):  # rounded down: a stable space
        assert getattr(dev, key) == stable_memory_size(rep[key]) <= rep[key], key
    assert dev.max_mem_alloc_size <= dev.global_mem_size


def test_loop_variables_have_ranges_and_indices_are_simplified():
    p = mapped(cc22_listing3(), dict(A="mapGlb(0)", B="mapSeq", C="mapSeq", D="mapSeq"))
    src = lower(p, L3_SIZES).kernels[0].source
    assert "out[16*i_A + i_B]" in src
    assert "/4" not in src and "%" not in src
    assert Var("i", 0, 3).bounds() == (0, 3)


def test_one_work_item_writes_the_others_wait(ocl):
    """A mapLcl of one iteration runs on work-item 0 only: readers need a barrier."""
    X = param("X", array(Float, 4, 16))
    g = to_local(lam(lambda x: FunCall(mult, (x, x))))
    f = to_global(lam(lambda x: FunCall(add, (x, x))))
    row = compose(map_lcl(0, f, "B"), join(), map_lcl(0, map_seq(g, "D"), "C"), split(16))
    p = Lambda((X,), map_wrg(0, row, "A")(X))
    x = np.random.default_rng(11).standard_normal((4, 16)).astype(np.float32)
    cp = check(ocl, p, {}, {"X": x})
    assert cp.kernels[0].source.count("barrier(CLK_LOCAL_MEM_FENCE)") == 1


def test_listing1_sampled_assignments_are_correct_or_rejected(ocl):
    """Every 29th of the 7^5 assignments of Listing 1 (all of them agree with Oclgrind's
    race detector, see docs/codegen.md)."""
    base = cc22_listing1()
    sizes = dict(I=2, J=4, K=3)
    x = np.random.default_rng(12).standard_normal((2, 4, 3)).astype(np.float32)
    ref = evaluate(base, {"input": x}, sizes)
    valid = []
    for n, combo in enumerate(itertools.product(KINDS, repeat=5)):
        if n % 29:
            continue
        try:
            valid.append(lower(mapped(base, dict(zip("ABCDE", combo))), sizes, name=f"k{n}"))
        except errors.LoweringError:
            pass
    assert len(valid) > 10
    prg = ocl.build(valid)
    for cp in valid:
        np.testing.assert_allclose(ocl.run(cp, {"input": x}, prg), ref, rtol=RTOL, atol=ATOL,
                                   err_msg=cp.kernels[0].source.splitlines()[0])


def test_input_named_like_an_opencl_keyword(ocl):
    X = param("local", array(Float, 8))
    p = Lambda((X,), map_glb(0, to_global(lam(lambda x: FunCall(mult, (x, x)))), "A")(X))
    x = np.arange(8, dtype=np.float32)
    cp = check(ocl, p, {}, {"local": x})
    assert cp.inputs == ("local",) and cp.kernels[0].args[0] == "local"
    assert "restrict in_0" in cp.kernels[0].source


def test_kernels_of_a_multi_kernel_program_are_named_after_the_given_name():
    from ir.parser import parse_file
    from mapper.api import enumerate_mappings, lower_mapping

    p = parse_file(os.path.join(os.path.dirname(__file__), "..", "examples", "rowcol_sums.lift"))
    low = lower_mapping(p, next(iter(enumerate_mappings(p))))
    assert [k.name for k in lower(low, {"H": 8, "W": 8}, name="stage").kernels] == \
        ["stage_0", "stage_1"]
    assert [k.name for k in lower(low, {"H": 8, "W": 8}).kernels] == ["kernel_0", "kernel_1"]
