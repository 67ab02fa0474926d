"""Tuning-parameter inference: domains, constraints with origins, counts against brute force."""

import itertools
from dataclasses import replace

import numpy as np
import pytest
from conv_reference import conv2d_hwc

from codegen.lower import lower
from codegen.target import POCL_CPU
from ir.conv_layer import ConvLayer
from ir.interp import evaluate
from ir.pipeline import run_pipeline
from ir.programs import cc22_listing3, conv_partial_stage, gpgpu20_conv_pipeline
from ir.sym import NonIntegralError, SymbolicZeroDivisionError
from ir.typecheck import typecheck
from mapper.errors import ConfigurationError
from mapper.tuning import JointSpace, infer_tuning, to_predicate


def brute_force(program, sizes, tp):
    """Filter the Cartesian product with the IR's own relations, evaluated by ir.sym."""
    rels = [c.rel for c in typecheck(program).constraints]
    names = list(tp.params)
    out = set()
    for vals in itertools.product(*(tp.params[n].domain for n in names)):
        env = {**sizes, **dict(zip(names, vals))}
        ok = True
        for r in rels:
            try:
                ok = r.evaluate(env)
            # undefined for these values: not valid. Any other error (an unbound size, a
            # bug in ir.sym) is the test's or the library's fault, and must not pass as "not
            # valid"
            except (SymbolicZeroDivisionError, NonIntegralError):
                ok = False
            if not ok:
                break
        if ok:
            out.add(tuple(vals))
    return names, out


@pytest.mark.parametrize("layer", [ConvLayer("a", C=2, H=6, W=6, M=4, K=3, S=1, P=1),
                                   ConvLayer("b", C=1, H=7, W=7, M=2, K=3, S=2, P=1)],
                         ids=["small", "stride2"])
def test_conv_space_equals_brute_force(layer):
    prog = conv_partial_stage()
    tp = infer_tuning(prog, layer.sizes(), max_value=10,
                      device=replace(POCL_CPU, max_mem_alloc_size=1 << 40))
    names, expected = brute_force(prog, layer.sizes(), tp)
    got = {tuple(int(c[n]) for n in names) for c in tp.space}
    assert tp.count() == len(expected) == len(got) > 50
    assert got == expected


def test_domains_and_origins():
    layer = ConvLayer("a", C=2, H=6, W=6, M=4, K=3, S=1, P=1)
    tp = infer_tuning(conv_partial_stage(), layer.sizes(), max_value=10)
    assert tp.params["kappa"].domain == (1, 2, 4)
    assert tp.params["omega"].domain == (1, 2, 3, 6, 9, 18)  # divisors of C*K*K
    assert tp.params["v"].domain == (1, 2, 4, 8, 16)
    assert tp.params["rho"].domain[0] == 0  # declared Var("rho", 0, None)
    origins = [o for _, o in tp.restrictions]
    assert any(o.startswith("split(kappa) at node") and "M % kappa == 0" in o for o in origins)
    assert any("omega % v == 0" in o or "integer" in o for o in origins)
    assert any("asVector(v)" in o for o in origins)


def test_sampled_configurations_compute_correctly():
    layer = ConvLayer("a", C=2, H=6, W=6, M=4, K=3, S=1, P=1)
    tp = infer_tuning(conv_partial_stage(), layer.sizes(), max_value=9)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 6, 2)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    ref = conv2d_hwc(x, w, None, 1, (1, 1, 1, 1))
    for cfg in tp.space.sample(25, seed=1):
        out = run_pipeline(gpgpu20_conv_pipeline(), {"inputData": x, "kernelsWeights": w},
                           tp.sizes_for(cfg))
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


def test_guarded_translation():
    from ir.sym import Var

    rel = ((Var("n") - Var("k")) / Var("s") + 1).ge(2)
    pred = to_predicate(rel)
    src = pred.to_python()
    # the guards first, then the relation, as Python source with the fewest parentheses
    assert src == "s != 0 and ((-k) + n) % s == 0 and ((-k) + n) // s + 1 >= 2", src
    from constraints.space import SearchSpace

    sp = SearchSpace({"n": range(0, 9), "k": [3], "s": range(0, 4)}, [pred])
    assert sp.restrictions[0].source == src and sp.restrictions[0].predicate == pred
    assert sp.to_dicts() == SearchSpace(sp.params, [src]).to_dicts()  # the text: the same
    for c in sp:
        assert c["s"] and (c["n"] - c["k"]) % c["s"] == 0 and (c["n"] - c["k"]) // c["s"] >= 1


def test_listing3_tuning_and_launch_limits():
    from mapper.api import lower_mapping

    low = lower_mapping(cc22_listing3(), "A=W0 B=L0 C=L0 D=S")
    tp = infer_tuning(low, {"N": 1024}, device=replace(POCL_CPU, max_work_group_size=64,
                                                      max_work_item_sizes=(64, 64, 64)))
    assert set(tp.params) == {"s0", "s1"}
    for c in tp.space:  # a mapLcl(0) longer than the group's 64 work-items loops over them
        assert 1024 % c["s0"] == 0 and c["s0"] % c["s1"] == 0
        lower(low, tp.sizes_for(c), device=replace(POCL_CPU, max_work_group_size=64,
                                                   max_work_item_sizes=(64, 64, 64)))


def test_joint_space():
    js = JointSpace(cc22_listing3(), {"N": 64})
    assert len(js.mappings) == 37
    assert js.count() == sum(js.counts()) > 13
    for m, cfg in js.sample(10, seed=3):
        low_sizes = {"N": 64, **cfg}
        from mapper.api import lower_mapping

        X = np.arange(64, dtype=np.float32)
        out = evaluate(lower_mapping(cc22_listing3(), m), {"X": X, "y": 2.0, "z": 1.0},
                       low_sizes)
        np.testing.assert_allclose(out, X * 2 + 1)


def test_bad_domains():
    with pytest.raises(ConfigurationError, match="unknown parameter"):
        infer_tuning(conv_partial_stage(), ConvLayer("a", 2, 6, 6, 4).sizes(),
                     domains={"zeta": (1, 2)})


def test_joint_sample_per_mapping_skips_mappings_without_a_configuration():
    """A uniform mapping is drawn among those whose tuning space is not empty: a device too
    small for some mappings leaves them out, and an empty space gives no sample."""
    import dataclasses

    from codegen.target import POCL_CPU
    from ir.conv_layer import ConvLayer
    from ir.programs import conv_partial_stage
    from mapper.tuning import JointSpace

    tiny = dataclasses.replace(POCL_CPU, private_mem_size=8, private_group_budget=32,
                               local_mem_size=64, max_work_group_size=4,
                               max_work_item_sizes=(4, 4, 4))
    layer = ConvLayer("t", C=4, H=8, W=8, M=8, K=3, S=1, P=1)
    js = JointSpace(conv_partial_stage(), layer.sizes(), device=tiny)
    js.mappings = js.mappings[::70]
    empty = [m for m in js.mappings if not js.tuning(m).count()]
    assert empty and len(empty) < len(js.mappings)
    got = js.sample(30, seed=1, per_mapping=True)
    assert len(got) == 30 and all(js.tuning(m).count() for m, _ in got)
    js.mappings = empty
    assert js.sample(5, seed=1, per_mapping=True) == [] == js.sample(5, seed=1)
