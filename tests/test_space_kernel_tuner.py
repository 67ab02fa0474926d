"""Kernel Tuner's restriction forms in the tuning search space (constraints/space.py):
``restrictions=None``, dict-style callables, ``max_threads``, the ``max_rows`` size limit and
the errors of these forms.  Counts are checked by brute force over ``itertools.product``."""

from __future__ import annotations

import itertools
import math
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from constraints.restrictions import (
    EmptySpaceError,
    LateRestrictionWarning,
    RestrictionEvaluationError,
    SpaceError,
    SpaceTooLargeError,
    UnknownNameError,
)
from constraints.space import SearchSpace

HAS_POSITIONS = sys.version_info >= (3, 11)  # two lambdas on one line are told apart by column

KT_PARAMS = {
    "block_size_x": [16, 32, 64, 128, 256, 512, 1024],
    "block_size_y": [1, 2, 4, 8, 16, 32],
    "tile_size_x": [1, 2, 3, 4],
    "tile_size_y": [1, 2, 4, 8],
    "use_shared_mem": [0, 1],
    "loop_unroll_factor_x": [1, 2, 4],
}


def brute(params: Mapping[str, Sequence[Any]], ok: Callable[[dict], bool]) -> list[dict]:
    """Every configuration of the Cartesian product that ``ok`` accepts, in product order."""
    names = list(params)
    out = []
    for values in itertools.product(*params.values()):
        cfg = dict(zip(names, values, strict=True))
        if ok(cfg):
            out.append(cfg)
    return out


def as_set(configs: list[dict]) -> set[tuple]:
    return {tuple(sorted(c.items())) for c in configs}


# ----------------------------------------------------------------------------- 1. None


@pytest.mark.parametrize("restrictions", [None, [], ()])
def test_no_restrictions_is_the_cartesian_product(restrictions: Any) -> None:
    params = {"a": [1, 2, 3], "b": [10, 20], "c": [0.5]}
    space = SearchSpace(params, restrictions)
    assert space.count() == 6 == space.cartesian_size()
    assert list(space) == brute(params, lambda c: True)
    assert SearchSpace(params).count() == 6  # the default


# ----------------------------------------------------------------------------- 2. dict callables


def test_dict_lambda_is_called_with_a_dict_and_depends_on_the_keys_it_reads() -> None:
    params = {"x": [0, 1, 2, 3], "y": [1, 2, 3], "z": [5, 6]}
    space = SearchSpace(params, [lambda p: p["x"] > 1])
    assert space.count() == len(brute(params, lambda c: c["x"] > 1)) == 12
    (r,) = space.restrictions
    assert r.takes_dict and r.keys_inferred and r.params == ("x",)
    assert 'p["x"] > 1' in r.source
    assert ("x",) in space.groups  # read from the source: a group of its own


def test_two_dict_lambdas_on_one_line() -> None:
    params = {"x": [0, 1, 2, 3], "y": [1, 2, 3], "z": [5, 6]}
    space = SearchSpace(params, [lambda p: p["x"] > 1, lambda p: p["y"] * p["z"] < 15])
    assert as_set(list(space)) == as_set(
        brute(params, lambda c: c["x"] > 1 and c["y"] * c["z"] < 15)
    )
    if HAS_POSITIONS:
        assert [r.params for r in space.restrictions] == [("x",), ("y", "z")]


def restrict(p: dict) -> bool:
    """Kernel Tuner's single restriction function, reading keys (also with .get)."""
    if p["block_size_x"] * p["block_size_y"] < 32:
        return False
    return p.get("loop_unroll_factor_x") <= p["tile_size_x"]


def test_single_function_not_in_a_list() -> None:
    space = SearchSpace(KT_PARAMS, restrict)
    expected = brute(KT_PARAMS, restrict)
    assert space.count() == len(expected) > 0
    assert as_set(list(space)) == as_set(expected)
    (r,) = space.restrictions
    assert r.takes_dict and r.keys_inferred
    assert set(r.params) == {"block_size_x", "block_size_y", "loop_unroll_factor_x", "tile_size_x"}
    assert "restrict" in r.source


def _helper(p: dict) -> bool:
    return p["tile_size_x"] * p["tile_size_y"] <= 8


def opaque(p: dict) -> bool:
    """Passes the dict on: the keys it reads cannot be read from the source."""
    return _helper(p)


def test_dict_callable_with_unknown_keys_depends_on_all_parameters() -> None:
    params = {"tile_size_x": [1, 2, 4], "tile_size_y": [1, 2, 4, 8], "other": [0, 1]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # small space: no warning
        space = SearchSpace(params, [opaque])
    (r,) = space.restrictions
    assert r.takes_dict and not r.keys_inferred and r.params == tuple(params)
    assert space.groups == [tuple(space.order)] and len(space.order) == 3
    assert as_set(list(space)) == as_set(brute(params, _helper))


def test_late_dict_callable_on_a_large_space_warns() -> None:
    params = {f"p{i}": list(range(10)) for i in range(5)}  # 100,000 configurations

    def late(p: dict) -> bool:
        return sum(p.values()) > 40  # not p["name"]: depends on all parameters

    with pytest.warns(LateRestrictionWarning) as record:
        space = SearchSpace(params, late)
    text = str(record[0].message)
    assert "all 5 parameters" in text and "100,000" in text and "strings" in text
    assert record[0].filename == __file__  # points at the caller
    assert space.count() == len(brute(params, late))
    with warnings.catch_warnings():  # keys read from the source: no warning
        warnings.simplefilter("error")
        SearchSpace(params, lambda p: p["p0"] + p["p1"] > 15)


def test_dict_callable_key_analysis() -> None:
    params = {"a": [1, 2, 3], "b": [1, 2], "c": [0, 1]}

    def multi_line(cfg: dict) -> bool:
        if cfg["a"] > 1:
            return cfg.get("b", 0) == 2
        return True

    def rebinds(p: dict) -> bool:
        return any(p > 1 for p in p.values())

    def mutates(p: dict) -> bool:
        p["c"] = 1
        return p["a"] > 1

    def uses_in(p: dict) -> bool:
        return "c" in p and p["c"] == 1

    cases = [(multi_line, ("a", "b")), (rebinds, ("a", "b", "c")), (mutates, ("a", "b", "c"))]
    cases.append((uses_in, ("a", "b", "c")))
    for fn, expected in cases:
        (r,) = SearchSpace(params, fn).restrictions
        assert r.takes_dict and r.params == expected, fn.__name__


def test_argument_named_like_a_parameter_keeps_named_argument_semantics() -> None:
    space = SearchSpace({"p": [1, 2, 3], "q": [0, 1]}, [lambda p: p > 1])
    assert space.count() == 4 and not space.restrictions[0].takes_dict
    with pytest.raises(UnknownNameError, match="'r'"):  # used as a number: a misnamed parameter
        SearchSpace({"p": [1]}, [lambda r: r + 1 > 1])


# ----------------------------------------------------------------------------- 3. max_threads

ORIGIN_XY = "max_threads: block_size_x*block_size_y <= 1024 (Kernel Tuner's implicit restriction)"


def test_max_threads_adds_kernel_tuners_implicit_restriction() -> None:
    space = SearchSpace(KT_PARAMS, None, max_threads=1024)
    expected = brute(KT_PARAMS, lambda c: c["block_size_x"] * c["block_size_y"] <= 1024)
    assert space.count() == len(expected) < space.cartesian_size()
    assert as_set(list(space)) == as_set(expected)
    (r,) = space.restrictions
    assert r.origin == ORIGIN_XY and r.params == ("block_size_x", "block_size_y")
    assert ORIGIN_XY in space.describe()
    assert SearchSpace(KT_PARAMS).count() == space.cartesian_size()  # nothing without it


def test_max_threads_block_size_names_and_z() -> None:
    params = {"bx": [32, 64, 128], "by": [1, 2, 4, 8], "bz": [1, 2], "t": [1, 2]}
    space = SearchSpace(params, max_threads=256, block_size_names=("bx", "by", "bz"))
    expected = brute(params, lambda c: c["bx"] * c["by"] * c["bz"] <= 256)
    assert space.count() == len(expected)
    assert space.restrictions[0].origin.startswith("max_threads: bx*by*bz <= 256")
    # Kernel Tuner's default names: none present, nothing added
    assert SearchSpace(params, max_threads=256).count() == math.prod(map(len, params.values()))
    # only the names present take part; user restrictions keep their positions and origins
    one = {"block_size_x": [256, 512, 1024, 2048], "n": [1, 2]}
    space = SearchSpace(one, ["n < 2"], origins={0: "mine"}, max_threads=1024)
    assert space.count() == 3
    assert [r.origin for r in space.restrictions][0] == "mine"
    assert space.restrictions[1].source == "block_size_x <= 1024"
    with pytest.raises(SpaceError, match="max_threads must be positive"):
        SearchSpace(one, max_threads=0)


def test_max_threads_is_part_of_the_cache_key(tmp_path) -> None:
    path = tmp_path / "kt.npz"
    space = SearchSpace(KT_PARAMS, max_threads=512)
    space.save(path)
    loaded = SearchSpace.load(path, KT_PARAMS, max_threads=512)
    assert loaded.count() == space.count() and loaded[5] == space[5]
    with pytest.raises(SpaceError, match="stale"):
        SearchSpace.load(path, KT_PARAMS)
    cached = SearchSpace.cached(tmp_path / "c.npz", KT_PARAMS, max_threads=512)
    assert cached.count() == space.count()


# ----------------------------------------------------------------------------- 4. size limit


def test_billion_row_group_is_refused_before_enumerating() -> None:
    params = {n: range(178) for n in "abcd"}  # 1.0e9 points, all valid
    with pytest.raises(SpaceTooLargeError) as e:  # refused from the sizes: no enumeration
        SearchSpace(params, ["a + b + c + d >= 0"])
    text = str(e.value)
    assert "(a, b, c, d) would hold" in text and "1,003,875,856" in text
    assert "max_rows=50,000,000" in text and "split the group" in text
    assert isinstance(e.value, SpaceError)


def test_max_rows_keyword() -> None:
    params = {"a": range(100), "b": range(100)}
    with pytest.raises(SpaceTooLargeError, match="max_rows=1,000"):
        SearchSpace(params, ["a <= b"], max_rows=1000)
    assert SearchSpace(params, ["a <= b"], max_rows=10_000).count() == 5050
    assert SearchSpace(params, ["a <= b"], max_rows=None).count() == 5050


def test_max_rows_checked_while_enumerating() -> None:
    # 10,000 valid rows out of 10^8: too rare for the sampled estimate, caught while enumerating
    params = {n: range(100) for n in "abcd"}
    rs = ["a == b", "b == c", "c + d >= 0"]
    assert SearchSpace(params, rs).count() == 10_000
    with pytest.raises(SpaceTooLargeError, match="enumeration stopped"):
        SearchSpace(params, rs, max_rows=1000)


def test_memory_error_while_enumerating_is_a_space_error() -> None:
    def oom(a: int, b: int) -> bool:
        raise MemoryError

    with pytest.raises(SpaceTooLargeError, match=r"ran out of memory.*\(a, b\)|\(a, b\).*memory"):
        SearchSpace({"a": [1, 2], "b": [1, 2]}, [oom])


# ----------------------------------------------------------------------------- 5. errors


def test_unknown_key_in_dict_lambda() -> None:
    with pytest.raises(UnknownNameError) as e:
        SearchSpace(KT_PARAMS, [lambda p: p["block_sise_x"] > 16])
    assert "'block_sise_x'" in str(e.value) and "did you mean 'block_size_x'" in str(e.value)


def test_key_error_at_evaluation_is_an_unknown_name() -> None:
    key = "tile_size_z"  # not a constant in the source: found only when called

    with pytest.raises(UnknownNameError) as e:
        SearchSpace(KT_PARAMS, [lambda p: p[key] > 1])
    assert "'tile_size_z'" in str(e.value) and "tile_size_x" in str(e.value)


def test_raising_callables_name_the_restriction_and_configuration() -> None:
    params = {"x": [1, 2], "y": [0, 1]}
    with pytest.raises(RestrictionEvaluationError) as e:
        SearchSpace(params, [lambda p: p["x"] / p["y"] > 1])
    text = str(e.value)
    assert 'p["x"] / p["y"] > 1' in text and "ZeroDivisionError" in text and "'y': 0" in text
    assert isinstance(e.value.__cause__, ZeroDivisionError)

    def ratio(x: int, y: int) -> bool:
        return x / y > 1

    with pytest.raises(RestrictionEvaluationError, match=r"ratio.*ZeroDivisionError.*'y': 0"):
        SearchSpace(params, [ratio])


def test_empty_space_names_the_dict_lambda() -> None:
    space = SearchSpace({"x": [1, 2], "y": [3]}, [lambda p: p["x"] > 5])
    assert space.count() == 0
    assert 'p["x"] > 5' in space.explain_empty()
    with pytest.raises(EmptySpaceError, match="x"):
        space.require_nonempty()


# ----------------------------------------------------------------------------- all together


def test_kernel_tuner_style_space_matches_brute_force() -> None:
    """A synthetic space written the way Kernel Tuner users write theirs: strings, dict
    lambdas, a named-argument callable, and the implicit max_threads restriction."""
    params = dict(KT_PARAMS, n_y_blocks=[1, 2, 4, 8])
    restrictions = [
        "block_size_x * block_size_y >= 64",
        lambda p: p["use_shared_mem"] == 0 or p["tile_size_y"] <= 4,
        lambda p: p["loop_unroll_factor_x"] <= p["tile_size_x"],
        lambda n_y_blocks, block_size_y: n_y_blocks * block_size_y <= 64,
    ]

    def ok(c: dict) -> bool:
        return (
            64 <= c["block_size_x"] * c["block_size_y"] <= 512
            and (c["use_shared_mem"] == 0 or c["tile_size_y"] <= 4)
            and c["loop_unroll_factor_x"] <= c["tile_size_x"]
            and c["n_y_blocks"] * c["block_size_y"] <= 64
        )

    space = SearchSpace(params, restrictions, max_threads=512)
    expected = brute(params, ok)
    assert space.count() == len(expected) > 1000
    assert as_set(list(space)) == as_set(expected)
    assert all(space.index_of(space[i]) == i for i in range(0, space.count(), 97))
    assert all(c in space for c in space.sample(50, seed=1))


# ----------------------------------------------------------------------------- 6. Kernel Tuner's
# restriction forms, counted by Kernel Tuner 1.5 itself (its Searchspace, python-constraint)

KT_MIXED = {
    "block_size_x": [16, 32, 64, 128, 256],
    "block_size_y": [1, 2, 4, 8],
    "tile": [1, 2, 3, 4],
    "precision": ["float", "double", "half"],
    "use_shmem": [True, False],
    "unroll": [0, 1],
}


def kernel_tuner_space(
    params: Mapping[str, Sequence[Any]], restrictions: list, max_threads: int = 1024
) -> set[tuple]:
    """The configurations Kernel Tuner's own search space holds (skips without it)."""
    searchspace = pytest.importorskip(
        "kernel_tuner.searchspace", reason="kernel_tuner is not installed (the bench extra)"
    )
    space = searchspace.Searchspace(dict(params), list(restrictions), max_threads)
    names = list(params)
    return {tuple(sorted(zip(names, c, strict=True))) for c in space.list}


def liftmap_space(
    params: Mapping[str, Sequence[Any]], restrictions: list, max_threads: int = 1024
) -> set[tuple]:
    return as_set(list(SearchSpace(params, restrictions, max_threads=max_threads)))


@pytest.mark.parametrize(
    "restriction",
    [
        "block_size_x in [32, 64, 128]",
        "block_size_x not in [32, 64]",
        "block_size_x * block_size_y in [64, 128, 256]",
        "tile in (1, 3) and block_size_y not in {2, 8}",
        "precision == 'float' or block_size_x <= 64",
        "precision in ['float', 'half'] and tile > 1",
        "precision != \"double\"",
        "use_shmem or block_size_x >= 64",
        "not use_shmem and block_size_y > 1",
        "unroll or tile == 1",
        "use_shmem == True or unroll == False",
        "use_shmem",
        "precision == 'half' and use_shmem or precision > 'e'",
    ],
)
def test_kernel_tuner_string_forms_count_as_kernel_tuner(restriction: str) -> None:
    expected = kernel_tuner_space(KT_MIXED, [restriction])
    space = SearchSpace(KT_MIXED, [restriction], max_threads=1024)
    assert space.count() == len(expected) > 0
    assert as_set(list(space)) == expected
    assert space.restrictions[0].vectorised  # a typed predicate, checked column-wise


def test_kernel_tuner_forms_together_count_as_kernel_tuner() -> None:
    restrictions = [
        "block_size_x in [32, 64, 128, 256]",
        "precision == 'float' or block_size_x <= 64",
        "use_shmem or block_size_x * block_size_y >= 64",
        "unroll == 0 or tile not in [3]",
    ]
    expected = kernel_tuner_space(KT_MIXED, restrictions, max_threads=512)
    assert liftmap_space(KT_MIXED, restrictions, max_threads=512) == expected
    assert len(expected) > 100


def _constraint_objects() -> list[Any]:
    pc = pytest.importorskip("constraint", reason="python-constraint2 is not installed")
    return [
        pc.MaxProdConstraint(256),
        pc.MinProdConstraint(64),
        pc.ExactProdConstraint(128),
        pc.MaxSumConstraint(100, [1, 2, 4]),
        pc.MinSumConstraint(90),
        pc.ExactSumConstraint(72, [1, 1, 2]),
        pc.AllDifferentConstraint(),
        pc.AllEqualConstraint(),
        pc.InSetConstraint({1, 2, 4, 16, 64}),
        pc.NotInSetConstraint([2, 4]),
        pc.SomeInSetConstraint([4, 8], 2),
        pc.SomeInSetConstraint([1, 4], 1, True),
        pc.SomeNotInSetConstraint([1, 16], 2),
        pc.VariableMaxProdConstraint("c", ["a", "b"]),
        pc.VariableMinSumConstraint("c", ["a", "b"]),
        pc.VariableExactSumConstraint("c", ["a", "b"]),
        pc.VariableMaxSumConstraint("c", ["a", "b"], [2, 1, 1]),
        pc.VariableExactProdConstraint("c", ["a", "b"]),
        pc.VariableMinProdConstraint("c", ["a", "b"]),
        pc.FunctionConstraint(lambda a, b, c: a * b <= c),
        pc.CompilableFunctionConstraint("def r(a, b): return a * b >= 16 \n"),
    ]


NUMERIC = {"a": [1, 2, 4, 8, 16], "b": [1, 2, 4, 8, 16, 32], "c": [1, 4, 8, 16, 32, 64]}


@pytest.mark.parametrize("index", range(21))
def test_python_constraint_objects_count_as_kernel_tuner(index: int) -> None:
    obj = _constraint_objects()[index]
    compiled = type(obj).__name__ == "CompilableFunctionConstraint"  # Kernel Tuner: its text
    expected = kernel_tuner_space(NUMERIC, ["a * b >= 16" if compiled else obj])
    got = liftmap_space(NUMERIC, [obj])
    assert got == expected, type(obj).__name__
    (r,) = SearchSpace(NUMERIC, obj).restrictions  # bare, not in a list
    assert type(obj).__name__.replace("Compilable", "") in r.source or "a * b" in r.source


def test_constraint_object_on_named_variables_as_python_constraint() -> None:
    pc = pytest.importorskip("constraint", reason="python-constraint2 is not installed")
    for obj, names in [
        (pc.MaxProdConstraint(256), ["block_size_x", "block_size_y"]),
        (pc.MaxSumConstraint(130, [1, 32]), ["block_size_x", "tile"]),
        (pc.InSetConstraint(["float", "half"]), ["precision"]),
        (pc.FunctionConstraint(lambda x, t: x % t == 0), ["block_size_x", "tile"]),
    ]:
        problem = pc.Problem()
        for n, d in KT_MIXED.items():
            problem.addVariable(n, d)
        problem.addConstraint(obj, names)
        expected = {tuple(sorted(s.items())) for s in problem.getSolutions()}
        space = SearchSpace(KT_MIXED, [(obj, names)])
        assert as_set(list(space)) == expected, type(obj).__name__
        assert space.restrictions[0].params == tuple(names) or set(
            space.restrictions[0].params
        ) == set(names)


def test_unconvertible_constraint_object_is_refused_with_what_to_do() -> None:
    from constraints.restrictions import UnsupportedConstraintError

    pc = pytest.importorskip("constraint", reason="python-constraint2 is not installed")

    class Mine(pc.Constraint):
        def __call__(self, *args: Any, **kwargs: Any) -> bool:
            return True

    with pytest.raises(UnsupportedConstraintError) as e:
        SearchSpace(NUMERIC, [Mine()])
    text = str(e.value)
    assert "Mine" in text and "restriction string" in text and "'variables'" not in text
    assert isinstance(e.value, SpaceError)
    with pytest.raises(UnknownNameError, match="'block_size_z'"):
        SearchSpace(NUMERIC, [(pc.MaxProdConstraint(8), ["a", "block_size_z"])])
    with pytest.raises(UnknownNameError, match="'d'"):
        SearchSpace(NUMERIC, [pc.VariableMaxSumConstraint("d", ["a"])])


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("precision + 1 > 2", "parameter taking strings, not a number"),
        ("precision < 3", "compares a string with a number"),
        ("'float' * 2 == precision", "is a string, not a number"),
        ("block_size_x in block_size_y", "literal list"),
        ("block_size_x in [tile]", "literals"),
        ("tile < block_size_x in [32]", "chained"),
    ],
)
def test_kernel_tuner_forms_errors(bad: str, words: str) -> None:
    from constraints.restrictions import RestrictionSyntaxError

    with pytest.raises(RestrictionSyntaxError, match=words):
        SearchSpace(KT_MIXED, [bad])


def test_only_flags_stand_as_truth_values() -> None:
    from constraints.restrictions import NotAPredicateError

    with pytest.raises(NotAPredicateError, match="only when it takes just True/False or 0/1"):
        SearchSpace(KT_MIXED, ["tile or block_size_x > 16"])
    space = SearchSpace(KT_MIXED, ["unroll"])
    assert space.count() == math.prod(map(len, KT_MIXED.values())) // 2
    assert str(space.restrictions[0].predicate) == "unroll != 0"
