"""Tests of the tuning search space (constraints/space.py, constraints/restrictions.py)."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from statistics import NormalDist

import constraint
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from constraints.examples import DEDISPERSION_PARAMS, DEDISPERSION_RESTRICTIONS
from constraints.restrictions import (
    EmptyParameterDomainError,
    EmptySpaceError,
    NotAPredicateError,
    Restriction,
    RestrictionSyntaxError,
    SpaceError,
    UnknownNameError,
    parse_restriction,
)
from constraints.space import SearchSpace

SAFE_GLOBALS = {"__builtins__": {}, "min": min, "max": max, "abs": abs}


def holds(source: str, config: dict) -> bool:
    """Reference semantics: plain Python eval; a raising restriction is false."""
    try:
        return bool(eval(source, dict(SAFE_GLOBALS), dict(config)))  # noqa: S307
    except (ArithmeticError, ValueError, TypeError):
        return False


def key(config: dict, names) -> tuple:
    return tuple(config[n] for n in names)


@pytest.fixture(scope="module")
def dedisp() -> SearchSpace:
    return SearchSpace(DEDISPERSION_PARAMS, DEDISPERSION_RESTRICTIONS)


# ----------------------------------------------------------------------------- dedispersion


def test_dedispersion_count_and_python_constraint_agree(dedisp: SearchSpace) -> None:
    assert dedisp.count() == len(dedisp) == 11_130
    problem = constraint.Problem()
    for name, dom in DEDISPERSION_PARAMS.items():
        problem.addVariable(name, dom)
    problem.addConstraint(lambda x, y: 32 <= x * y <= 1024, ["block_size_x", "block_size_y"])
    problem.addConstraint(lambda s, t: s > 1 or t == 0, ["tile_size_x", "tile_stride_x"])
    problem.addConstraint(lambda s, t: s > 1 or t == 0, ["tile_size_y", "tile_stride_y"])
    names = list(DEDISPERSION_PARAMS)
    theirs = {key(s, names) for s in problem.getSolutions()}
    ours = [key(c, names) for c in dedisp]
    assert len(ours) == len(set(ours)) == 11_130
    assert set(ours) == theirs
    assert [key(c, names) for c in dedisp.to_dicts()] == ours


def test_dedispersion_structure(dedisp: SearchSpace) -> None:
    groups = {frozenset(g) for g in dedisp.groups}
    assert frozenset({"block_size_x", "block_size_y"}) in groups
    assert frozenset({"tile_size_x", "tile_stride_x"}) in groups
    assert frozenset({"block_size_z"}) in groups
    assert sorted(dedisp.order) == sorted(DEDISPERSION_PARAMS)
    dag = dedisp.dag
    rank = {n: i for i, n in enumerate(dedisp.order)}
    assert all(rank[a] < rank[b] for a, b in dag.edges)
    assert math.prod(dedisp.group_sizes()) == 11_130
    text = dedisp.describe()
    for needle in ("11,130", "22,272", "user:", "32 <= block_size_x * block_size_y <= 1024"):
        assert needle in text
    from rich.console import Console

    from mapper.space_view import space_table

    console = Console(width=200, record=True)
    console.print(space_table(dedisp))
    out = console.export_text()
    assert "11,130" in out and "tile_stride_y" in out


def test_index_roundtrip_and_negative_indices(dedisp: SearchSpace) -> None:
    for i in [0, 1, 5000, 11_129]:
        assert dedisp.index_of(dedisp[i]) == i
    assert dedisp[-1] == dedisp[11_129]
    with pytest.raises(IndexError, match="out of range"):
        dedisp[11_130]
    with pytest.raises(IndexError):
        dedisp[-11_131]


# ----------------------------------------------------------------------------- hypothesis

NAMES = ["a", "b", "c", "d", "e"]
CMP = ["<", "<=", ">", ">=", "==", "!="]


def numbers(names: list[str]) -> st.SearchStrategy[str]:
    leaf = st.one_of(st.sampled_from(names), st.integers(-3, 6).map(str))

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "//", "%"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            st.tuples(st.sampled_from(["min", "max"]), inner, inner).map(
                lambda t: f"{t[0]}({t[1]}, {t[2]})"
            ),
            inner.map(lambda x: f"abs({x})"),
            inner.map(lambda x: f"-{x}"),
            st.tuples(st.sampled_from(names), st.integers(0, 3)).map(lambda t: f"{t[0]} ** {t[1]}"),
        )

    return st.recursive(leaf, extend, max_leaves=4)


def predicates(names: list[str]) -> st.SearchStrategy[str]:
    num = numbers(names)
    cmp = st.one_of(
        st.tuples(num, st.sampled_from(CMP), num).map(" ".join),
        st.tuples(num, st.sampled_from(CMP), num, st.sampled_from(CMP), num).map(" ".join),
    )
    return st.recursive(
        cmp,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            inner.map(lambda p: f"not ({p})"),
        ),
        max_leaves=3,
    )


@st.composite
def small_spaces(draw: st.DrawFn) -> tuple[dict, list[str]]:
    n = draw(st.integers(2, 5))
    names = NAMES[:n]
    value = st.one_of(st.integers(-4, 9), st.sampled_from([0.5, 1.5, -2.5]))
    params = {nm: draw(st.lists(value, min_size=1, max_size=4, unique=True)) for nm in names}
    restrictions = draw(st.lists(predicates(names), min_size=0, max_size=3))
    return params, restrictions


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_spaces(), st.integers(1, 64))
def test_random_spaces_equal_brute_force(case: tuple[dict, list[str]], chunk: int) -> None:
    params, restrictions = case
    names = list(params)
    space = SearchSpace(params, restrictions, chunk_rows=chunk)
    valid, invalid = [], []
    for values in itertools.product(*params.values()):
        cfg = dict(zip(names, values, strict=True))
        (valid if all(holds(r, cfg) for r in restrictions) else invalid).append(cfg)
    assert space.count() == len(valid)
    ours = [key(c, names) for c in space]
    assert sorted(map(repr, ours)) == sorted(repr(key(c, names)) for c in valid)
    for i, cfg in enumerate(space):
        assert space[i] == cfg
        assert space.index_of(cfg) == i
    assert all(cfg in space for cfg in valid)
    assert not any(cfg in space for cfg in invalid)
    # each restriction is checked once all its parameters are bound, within one group
    for r in space.restrictions:
        assert any(set(r.params) <= set(g) for g in space.groups) or not r.params
    # the scalar and vectorised compiled forms agree with each other everywhere
    for r in space.restrictions:
        if not r.params:
            continue
        cols = list(zip(*(key(c, r.params) for c in valid + invalid), strict=True))
        arrays = [
            np.array(c, dtype=float if any(isinstance(x, float) for x in c) else np.int64)
            for c in cols
        ]
        assert list(r.vector(*arrays)) == [bool(r.scalar(*row)) for row in zip(*cols, strict=True)]


# ----------------------------------------------------------------------------- sampling


def chi2_critical(p: float, df: int) -> float:
    """Upper-p quantile of chi-square(df) by the Wilson-Hilferty approximation:
    (X/df)^(1/3) is approximately normal with mean 1 - 2/(9 df) and variance 2/(9 df)."""
    z = NormalDist().inv_cdf(1 - p)
    v = 2 / (9 * df)
    return df * (1 - v + z * math.sqrt(v)) ** 3


def chi2_statistic(counts: Counter, cells: list, n: int) -> float:
    expected = n / len(cells)
    assert set(counts) <= set(cells)
    return sum((counts.get(c, 0) - expected) ** 2 / expected for c in cells)


UNEVEN = ({"a": [1, 2, 3, 4, 5], "b": list(range(1, 11)), "c": [0, 1]}, ["b <= a * a"])


def test_wilson_hilferty_is_accurate() -> None:
    # tabulated chi-square quantiles at p = 0.001
    for df, exact in [(10, 29.588), (30, 59.703), (100, 149.449)]:
        assert abs(chi2_critical(0.001, df) - exact) / exact < 0.01


def test_sample_is_uniform_chi_square() -> None:
    space = SearchSpace(*UNEVEN)
    cells = [key(c, "abc") for c in space]
    assert len(cells) == 2 * (1 + 4 + 9 + 10 + 10)
    n = 200 * len(cells)
    draws = space.sample(n, seed=12345, replace=True)
    stat = chi2_statistic(Counter(key(c, "abc") for c in draws), cells, n)
    assert stat < chi2_critical(0.001, len(cells) - 1), stat


def test_naive_path_sampler_fails_the_same_test() -> None:
    """A sampler that picks each parameter uniformly among values that still have a
    completion is not uniform on this space; the test above must be able to reject it."""
    space = SearchSpace(*UNEVEN)
    cells = [key(c, "abc") for c in space]
    rng = random.Random(12345)
    n = 200 * len(cells)
    draws = []
    for _ in range(n):
        prefix: tuple = ()
        for depth in range(3):
            options = sorted({c[depth] for c in cells if c[:depth] == prefix})
            prefix += (rng.choice(options),)
        draws.append(prefix)
    stat = chi2_statistic(Counter(draws), cells, n)
    assert stat > chi2_critical(0.001, len(cells) - 1)


def test_sample_without_replacement(dedisp: SearchSpace) -> None:
    names = list(DEDISPERSION_PARAMS)
    some = dedisp.sample(500, seed=3)
    assert len({key(c, names) for c in some}) == 500
    assert all(c in dedisp for c in some)
    assert dedisp.sample(500, seed=3) == some
    small = SearchSpace(*UNEVEN)
    assert {key(c, "abc") for c in small.sample(small.count(), seed=1)} == {
        key(c, "abc") for c in small
    }
    with pytest.raises(SpaceError, match="cannot draw 69 distinct"):
        small.sample(69)


@pytest.mark.parametrize("method", ["permutation", "feistel"])
def test_iter_random_is_a_reproducible_permutation(dedisp: SearchSpace, method: str) -> None:
    names = list(DEDISPERSION_PARAMS)
    first = [key(c, names) for c in dedisp.iter_random(seed=7, method=method)]
    assert len(first) == len(set(first)) == dedisp.count()
    assert set(first) == {key(c, names) for c in dedisp}
    assert first == [key(c, names) for c in dedisp.iter_random(seed=7, method=method)]
    other = [key(c, names) for c in itertools.islice(dedisp.iter_random(8, method=method), 50)]
    assert other != first[:50]
    assert first[:50] != [key(c, names) for c in dedisp.to_dicts(50)]


def test_huge_space_is_never_materialised() -> None:
    params = {f"p{i}": [0, 1, 2] for i in range(70)}
    space = SearchSpace(params, ["p0 + p1 >= 1", "p2 != p3"])
    expected = 8 * 6 * 3**66
    assert space.count() == expected > 2**63
    i = expected - 12345
    assert space.index_of(space[i]) == i
    assert space[-1] == space[expected - 1]
    draws = space.sample(20, seed=5)
    assert all(c in space for c in draws) and len({tuple(c.values()) for c in draws}) == 20
    walk = list(itertools.islice(space.iter_random(seed=1), 20))
    assert len({tuple(c.values()) for c in walk}) == 20 and all(c in space for c in walk)
    assert space.group_sizes().count(3) == 66


# ----------------------------------------------------------------------------- semantics


def test_short_circuit_and_division_by_zero() -> None:
    space = SearchSpace({"a": [0, 1, 2, 3, 4], "b": [0, 1, 2]}, ["b == 0 or a % b == 0"])
    assert {(c["a"], c["b"]) for c in space} == {(a, 0) for a in range(5)} | {
        (a, 1) for a in range(5)
    } | {(0, 2), (2, 2), (4, 2)}
    # a raising restriction is false, also under `not`
    space = SearchSpace({"a": [0, 1, 2], "b": [0, 1, 2]}, ["not (a // b > 0)"])
    assert {(c["a"], c["b"]) for c in space} == {(0, 1), (0, 2), (1, 2)}


def test_callables_match_strings() -> None:
    params = {"x": [1, 2, 3, 4, 6, 8], "y": [1, 2, 3, 4], "z": [0, 1]}

    def fits(x, y):
        return x % y == 0

    by_string = SearchSpace(params, ["x % y == 0", "z <= y - 1"])
    by_callables = SearchSpace(params, [fits, (lambda a, b: b <= a - 1, ["y", "z"])])
    assert list(by_string) == list(by_callables)
    assert not by_callables.restrictions[0].vectorised
    assert "fits" in by_callables.restrictions[0].source


def test_origins_and_restriction_objects() -> None:
    params = {"N": [64, 96, 128], "s0": [1, 2, 4, 8, 16]}
    r = parse_restriction("N % s0 == 0", ["N", "s0"], origin="split at node 12 needs N % s0 == 0")
    assert isinstance(r, Restriction) and r.params == ("N", "s0")
    assert r({"N": 96, "s0": 16}) is True and "split at node 12" in str(r)
    space = SearchSpace(params, [r, "s0 <= 8"], origins={1: "hardware"})
    assert space.count() == 3 * 4
    text = space.describe()
    assert "split at node 12 needs N % s0 == 0:" in text and "hardware:" in text
    with pytest.raises(SpaceError, match="origins key 5"):
        SearchSpace(params, ["s0 <= 8"], origins={5: "x"})


def test_chunking_gives_identical_tables() -> None:
    params = {"a": list(range(1, 21)), "b": list(range(1, 21)), "c": list(range(1, 21))}
    rs = ["a % b == 0", "(a + b + c) % 3 == 0", "c <= a"]
    big = SearchSpace(params, rs)
    tiny = SearchSpace(params, rs, chunk_rows=7)
    assert big.count() == tiny.count() > 0
    assert list(big) == list(tiny)


def test_save_load_cache(tmp_path, dedisp: SearchSpace) -> None:
    path = tmp_path / "space.npz"
    dedisp.save(path)
    loaded = SearchSpace.load(path, DEDISPERSION_PARAMS, DEDISPERSION_RESTRICTIONS)
    assert loaded.count() == 11_130 and loaded[777] == dedisp[777]
    with pytest.raises(SpaceError, match="stale"):
        SearchSpace.load(path, DEDISPERSION_PARAMS, DEDISPERSION_RESTRICTIONS[:2])
    other = tmp_path / "other.npz"
    built = SearchSpace.cached(other, DEDISPERSION_PARAMS, DEDISPERSION_RESTRICTIONS[:2])
    again = SearchSpace.cached(other, DEDISPERSION_PARAMS, DEDISPERSION_RESTRICTIONS[:2])
    assert built.count() == again.count() > 11_130


# ----------------------------------------------------------------------------- bad inputs


def test_error_empty_domain() -> None:
    with pytest.raises(EmptyParameterDomainError, match="'b' has an empty domain"):
        SearchSpace({"a": [1], "b": []})


def test_error_unknown_name_suggests() -> None:
    with pytest.raises(UnknownNameError) as e:
        SearchSpace(DEDISPERSION_PARAMS, ["blok_size_x * block_size_y <= 1024"])
    assert "'blok_size_x'" in str(e.value) and "did you mean 'block_size_x'" in str(e.value)
    with pytest.raises(UnknownNameError, match="'q'"):
        SearchSpace({"a": [1]}, [lambda q: q > 1])


@pytest.mark.parametrize("bad", ["a + b", "a", "a and b > 1", "min(a, b)"])
def test_error_not_a_predicate(bad: str) -> None:
    with pytest.raises(NotAPredicateError, match="not a"):
        SearchSpace({"a": [1, 2], "b": [1, 2]}, [bad])


@pytest.mark.parametrize(
    ("bad", "column", "words"),
    [
        ("a > > 1", 5, "invalid syntax"),
        ("a <", 4, "incomplete"),
        ("a.b > 1", 1, "Attribute"),
        ("foo(a) > 1", 1, "unsupported function 'foo'"),
        ("a > 1 if b else 2", 1, "IfExp"),
        ("(a > 1) * 2 > 1", 2, "truth value, not a number"),
    ],
)
def test_error_syntax_with_column(bad: str, column: int, words: str) -> None:
    with pytest.raises(RestrictionSyntaxError) as e:
        SearchSpace({"a": [1, 2], "b": [1, 2]}, [bad])
    assert f"column {column}" in str(e.value) and words in str(e.value)


def test_empty_space_is_explained() -> None:
    space = SearchSpace({"a": [1, 2, 3], "b": [1, 2, 3], "c": [5]}, ["a < b", "b < 3", "a + b > 4"])
    assert space.count() == 0 and not space and list(space) == [] and space.to_dicts() == []
    why = space.explain_empty()
    assert "'a + b > 4'" in why and "empty" in why
    for action in (
        space.require_nonempty,
        lambda: space[0],
        lambda: space.sample(1),
        lambda: space.iter_random(0),
    ):
        with pytest.raises(EmptySpaceError, match="a \\+ b > 4"):
            action()
    always = SearchSpace({"a": [1]}, ["1 > 2"])
    assert always.count() == 0 and "always false" in always.explain_empty()


def test_error_invalid_configuration(dedisp: SearchSpace) -> None:
    cfg = dict(dedisp[0], block_size_x=1, block_size_y=40, tile_size_x=1, tile_stride_x=1)
    assert cfg not in dedisp
    with pytest.raises(SpaceError) as e:
        dedisp.index_of(cfg)
    assert "tile_size_x > 1 or tile_stride_x == 0" in str(e.value)
    with pytest.raises(UnknownNameError, match="did you mean 'block_size_x'"):
        dedisp.index_of(dict(dedisp[0], block_size_xx=1))
    with pytest.raises(SpaceError, match="not in its domain"):
        dedisp.index_of(dict(dedisp[0], block_size_x=3))
    assert {"block_size_x": 1} not in dedisp and 5 not in dedisp
    with pytest.raises(SpaceError, match="twice"):
        SearchSpace({"a": [1, 2, 1]})


def test_typed_predicates_and_strings_are_the_same_restrictions() -> None:
    """A predicate built as data (the mapping rules' language, ``constraints.expr``) and the
    user's string parsed are the same object, and give the same space; the built one keeps
    its origin and prints as its Python text."""
    from constraints.expr import Cmp, Param
    from constraints.predicates import parse_predicate

    x, y = Param("x"), Param("y")
    built = x * y <= 64
    assert parse_predicate("x * y <= 64", ["x", "y"]) == built
    assert built.to_python() == "x * y <= 64"
    params = {"x": range(1, 20), "y": range(1, 20)}
    typed = SearchSpace(params, [built], origins={0: "split at node 3"})
    text = SearchSpace(params, ["x * y <= 64"])
    assert typed.to_dicts() == text.to_dicts() and typed.count() == text.count()
    (r,) = typed.restrictions
    assert r.predicate == built and r.origin == "split at node 3" and r.source == "x * y <= 64"
    assert "x * y <= 64" in typed.describe()
    with pytest.raises(UnknownNameError, match="'y'"):
        SearchSpace({"x": [1]}, [built])
    with pytest.raises(NotAPredicateError):
        SearchSpace(params, [x + 1])
    with pytest.raises(TypeError):
        Cmp("==", Cmp("<", x, 1), 1)  # a truth value is not a term


def test_a_constant_never_hides_an_error() -> None:
    """Python raises for ``a // b`` at b == 0, so ``a // b > 1 or 1 < 2`` is false there (a
    raising restriction is false): folding ``or True`` must not make it true, in the scalar
    form, the vectorised form and the count."""
    source = "a // b > 1 or 1 < 2"
    space = SearchSpace({"a": [0, 1, 2, 3], "b": [0, 1, 2]}, [source])
    expected = {(a, b) for a in range(4) for b in range(3) if holds(source, {"a": a, "b": b})}
    assert expected == {(a, b) for a in range(4) for b in (1, 2)}
    assert {(c["a"], c["b"]) for c in space} == expected and space.count() == len(expected)
    (r,) = space.restrictions
    assert r({"a": 1, "b": 0}) is False and r({"a": 1, "b": 1}) is True
    # where nothing before it can raise, the constant decides
    assert SearchSpace({"a": [0, 1], "b": [0, 1]}, ["a + b > 1 or 1 < 2"]).count() == 4
