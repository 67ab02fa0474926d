"""CC'22 Fig. 6 data: throughput expectancy per number of evaluated candidates, for each
sequential-map fusion strategy, with the heuristic rules on and off.

For each VGG-16 layer (H and W divided by ``--scale``), each fusion strategy of the
library (``always``: perfectly nested sequential maps are fused or parallel, CC'22 rule 8;
``never``: no map is fused; ``free``: either) and each setting of the heuristic rules
(``mapper/rules.py``: rules that prune mappings that are correct but unlikely to be fast),
a data set of ``--candidates`` candidates drawn by the ``solver`` strategy (a uniformly
random valid mapping, then uniformly random tuning values), one data set after the other,
each in its own resumable store:

    results/fig6-<layer>-fusion-<always|never|free>-heuristics-<on|off>.sqlite

A setting whose valid mappings are exactly those of a setting collected before is skipped
with a note (``always`` with the heuristics off is ``free`` with them off: rule 8 is a
heuristic). With the heuristics off, the space holds the mappings only a heuristic
rejects, and so do the candidates' lowering checks. The logic is
``experiments.paper``; figures: ``python -m experiments.figures``.

    python -m experiments.fig_fusion --layers 19 --scale 8 --candidates 40
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.paper import collect_fig6, fig6_parser, parse_fig6_args, run_layers

    args = parse_fig6_args(argv, fig6_parser(description=__doc__.split("\n\n")[0]))
    return run_layers(args, collect_fig6)


if __name__ == "__main__":
    sys.exit(main())
