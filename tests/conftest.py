import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

# Where the environment sets PYTHONDONTWRITEBYTECODE (this project's machines do), every
# Python process of the suite (the xdist workers, each CLI run, each kernel worker) would
# compile the library and rewrite the tests' asserts from source again: the suite writes
# its bytecode caches (``__pycache__``, ignored by git) for itself and its children.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# PoCL needs a writable kernel cache, else it shows zero devices.
_cache = tempfile.mkdtemp(prefix="pocl-cache-")
os.environ.setdefault("POCL_CACHE_DIR", _cache)
os.environ.setdefault("XDG_CACHE_HOME", _cache)


def pytest_addoption(parser):
    parser.addoption("--perf", action="store_true", default=False,
                     help="also run the tests marked perf (wall-clock claims; idle machine)")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``perf`` assert on wall-clock time, which a loaded machine breaks: they
    run only with ``--perf`` (a speed claim belongs in a benchmark, not in CI)."""
    if config.getoption("--perf"):
        return
    import pytest

    skip = pytest.mark.skip(reason="a wall-clock claim: run with --perf on an idle machine")
    for item in items:
        if "perf" in item.keywords:
            item.add_marker(skip)
