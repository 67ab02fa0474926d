"""Terminal views of a tuning search space (``rich``; ``constraints`` has no display code)."""

from __future__ import annotations

from rich.table import Table

from constraints.space import SearchSpace, format_domain

__all__ = ["space_table"]


def space_table(space: SearchSpace) -> Table:
    """A ``rich.table.Table`` of ``space``: one row per parameter in dependency order (group,
    domain, restrictions checked there); restrictions by origin and the exact count in the
    caption. The text form is :meth:`SearchSpace.describe`."""
    rs = space.restrictions
    sizes = space.group_sizes()
    count = space.count()
    table = Table(
        title=f"Search space: {count:,} valid of {space.cartesian_size():,}",
        caption="\n".join(
            f"{origin}: " + "; ".join(f"[{i}] {rs[i].source}" for i in ids)
            for origin, ids in space.by_origin().items()
        )
        + f"\ncount = {' x '.join(f'{s:,}' for s in sizes) or '1'} = {count:,}",
    )
    for col in ("group", "#", "parameter", "domain", "checks here"):
        table.add_column(col)
    domains = space.params
    k = 0
    for g, (names, checks) in enumerate(zip(space.groups, space.checks, strict=True)):
        for j, n in enumerate(names):
            table.add_row(
                f"{g} ({sizes[g]:,} rows)" if j == 0 else "",
                str(k),
                n,
                format_domain(domains[n]),
                ", ".join(f"[{i}] {rs[i].source}" for i in checks[j]),
                end_section=j == len(names) - 1,
            )
            k += 1
    return table
