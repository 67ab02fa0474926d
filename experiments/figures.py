"""The papers' figures and tables, regenerated from result stores alone (no device, no re-run).

    python -m experiments.figures [--stores results/] [--out docs/figures/]

A thin command line over ``mapper.explore.figures`` (its docstring lists what is drawn
from which store).
"""

from __future__ import annotations

import sys

from mapper.explore.figures import main

if __name__ == "__main__":
    sys.exit(main())
