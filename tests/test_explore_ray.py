"""The Ray evaluator gives the outcomes the local one gives (a local Ray cluster of two
actors; skipped with the reason where Ray is not installed or cannot start)."""

from __future__ import annotations

import pytest

from ir.programs import cc22_listing3
from mapper.explore import explore
from mapper.explore.store import ResultStore

pytestmark = [pytest.mark.slow, pytest.mark.opencl]


@pytest.fixture(scope="module")
def ray_pool():
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: liftmap[cluster]")
    from mapper.explore.ray_pool import RayPool, RayUnavailableError

    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as e:
        pytest.skip(f"a local Ray cluster could not start: {e}")
    try:
        with RayPool(devices=[None, None]) as pool:
            yield pool
    except RayUnavailableError as e:
        pytest.skip(str(e))
    finally:
        ray.shutdown()


def test_ray_and_local_evaluators_agree(tmp_path, ray_pool):
    assert ray_pool.size == 2
    program, sizes = cc22_listing3(), {"N": 1024}
    remote = explore(program, sizes, strategy="solver", budget=6, seed=3,
                     store=tmp_path / "ray.sqlite", pool=ray_pool)
    local = explore(program, sizes, strategy="solver", budget=6, seed=3,
                    store=tmp_path / "local.sqlite")
    assert remote.evaluated == local.evaluated == 6
    by_key = {r.key: r for r in local.records}
    assert {r.key for r in remote.records} == set(by_key)  # same device, same candidates
    for r in remote.records:
        assert r.status == by_key[r.key].status, r.short_mapping
    with ResultStore(tmp_path / "ray.sqlite", readonly=True) as st:
        assert len(st.records()) == 6  # written by the driver only
