import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

# PoCL needs a writable kernel cache, else it shows zero devices.
_cache = tempfile.mkdtemp(prefix="pocl-cache-")
os.environ.setdefault("POCL_CACHE_DIR", _cache)
os.environ.setdefault("XDG_CACHE_HOME", _cache)
