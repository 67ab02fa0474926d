"""``explore`` takes its components and one typed ``ExploreOptions`` (issue 46): the flat
names land in their groups, an unknown or misplaced name is one clear error."""

from __future__ import annotations

import inspect

import pytest

from mapper.errors import ConfigurationError
from mapper.explore import ExploreOptions, explore, option_names
from mapper.explore.variants import explore_variants


def test_flat_names_land_in_their_groups():
    o = ExploreOptions.of(repeats=5, timeout_s=9.0, workers=2, fusion="free", retime=0,
                          retime_rounds=4, seed=3, count=True, known_best_s=0.5)
    assert (o.evaluation.repeats, o.evaluation.timeout_s, o.evaluation.known_best_s) == \
        (5, 9.0, 0.5)
    assert o.devices.workers == 2 and o.space.fusion == "free"
    assert (o.retiming.best, o.retiming.rounds, o.seed, o.count) == (0, 4, 3, True)
    # the rest keep their defaults; but() changes some and leaves the others
    assert o.evaluation.cut == ExploreOptions().evaluation.cut
    p = o.but(repeats=1)
    assert p.evaluation.repeats == 1 and p.evaluation.timeout_s == 9.0 and p.seed == 3
    assert o.evaluation.repeats == 5  # frozen: but() made a copy
    assert {"repeats", "workers", "fusion", "retime", "seed", "device", "ray"} <= \
        set(option_names())


def test_an_unknown_option_names_the_options():
    with pytest.raises(ConfigurationError, match="'repeat' is not an option.*repeats"):
        ExploreOptions.of(repeat=3)


def test_a_flat_option_given_to_explore_says_where_it_goes():
    with pytest.raises(ConfigurationError,
                       match=r"repeats is an option of the exploration.*"
                             r"options=ExploreOptions.of\(repeats=...\)"):
        explore("examples/cc22_listing3.lift", {"N": 64}, budget=1, repeats=3)
    with pytest.raises(ConfigurationError, match="options must be an ExploreOptions"):
        explore("examples/cc22_listing3.lift", {"N": 64}, budget=1,
                options={"repeats": 3})  # type: ignore[arg-type]


@pytest.mark.parametrize("fn", [explore, explore_variants])
def test_explore_takes_at_most_ten_parameters(fn):
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind is not inspect.Parameter.VAR_KEYWORD]
    assert len(params) <= 10, [p.name for p in params]


def test_a_status_is_its_text_everywhere():
    """``Status`` (the one status type of outcomes, records and run results) compares,
    hashes, prints, serialises and stores as its text; an unknown one is refused."""
    import json
    import sqlite3

    from codegen.errors import InvalidArgumentError
    from codegen.program import Outcome, Status
    from mapper.explore.record import Record

    o = Outcome("timeout", "slow")
    assert o.status is Status.TIMEOUT and o.status == "timeout"
    assert {Status.OK: 1}["ok"] == 1 and f"{Status.CRASH}" == "crash"
    assert repr({Status.OK: 3}) == "{'ok': 3}" and json.dumps([Status.OK]) == '["ok"]'
    con = sqlite3.connect(":memory:")
    con.execute("create table t (s text)")
    con.execute("insert into t values (?)", (Status.WRONG_RESULT,))
    assert con.execute("select s from t").fetchone() == ("wrong-result",)
    r = Record(key="k", run_id="r", strategy="solver", mapping={"A": 0}, status="ok")
    assert r.status is Status.OK
    with pytest.raises(InvalidArgumentError, match="unknown outcome status 'fine'.*crash"):
        Outcome("fine")
