"""``experiments/prior_recall.py``: the prior's rank of stored candidates (its tiny run is
in ``test_experiments_smoke``); here the store names it reads and its refusals."""

from __future__ import annotations

import pytest

from experiments.prior_recall import main, parse_store_name, spearman


def test_the_shape_and_the_variant_come_from_the_store_name():
    assert parse_store_name("d/search-shape0-48x27x27x128k5s1p2.kernels.sqlite") == (
        dict(C=48, H=27, W=27, M=128, K=5, S=1, P=2), "kernels")
    assert parse_store_name("search-24_26_28-512x14x14x512k3s1p1.sqlite")[1] == "window"
    with pytest.raises(ValueError, match="cannot tell the convolution's shape"):
        parse_store_name("results.sqlite")


def test_a_store_it_cannot_read_is_an_error_line_not_a_traceback(tmp_path, capsys):
    assert main([str(tmp_path / "conv.sqlite")]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "cannot tell the convolution's shape" in err
    with pytest.raises(SystemExit):
        main(["x.sqlite", "--private-weight", "half"])
    assert "--private-weight" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["x.sqlite", "--cache-intensity", "-1"])
    assert "--cache-intensity" in capsys.readouterr().err


def test_spearman_ranks_with_ties():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ties take their average rank: [0.5, 0.5, 2, 3] against [0, 1, 2, 3]
    assert spearman([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833)
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0
