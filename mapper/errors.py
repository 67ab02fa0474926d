"""Typed errors of the mapper (one class per failure kind)."""

from __future__ import annotations

from ir.errors import LiftmapError


class MapperError(LiftmapError):
    """Base of mapper errors."""


class NoMapsError(MapperError):
    """The expression has no map to parallelise."""


class MappingError(MapperError, ValueError):
    """A mapping names unknown maps, uses codes outside the encoding, or misses maps."""


class InvalidMappingError(MapperError):
    """A mapping violates constraints; ``violations`` lists the constraint instances."""

    def __init__(self, message: str, violations=()):
        super().__init__(message)
        self.violations = list(violations)


class ContradictoryFixedError(MapperError):
    """A fixed partial assignment admits no valid mapping; ``core`` explains why."""

    def __init__(self, message: str, core=()):
        super().__init__(message)
        self.core = list(core)
