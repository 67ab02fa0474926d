"""Parallel mappings by constraint satisfaction: the public API."""

from mapper.api import (
    Explanation,
    MappingProblem,
    check_mapping,
    constraints_of,
    count_mappings,
    enumerate_mappings,
    explain,
    lower_mapping,
    problem,
    random_assignment_validity,
)
from mapper.apply import apply_mapping
from mapper.encoding import CODES, MapCodes, code_name, parse_code
from mapper.errors import (
    ContradictoryFixedError,
    InvalidMappingError,
    MapperError,
    MappingError,
    NoMapsError,
)
from mapper.nesting import MapNestingTree, label_maps

__all__ = [
    "Explanation", "MappingProblem", "check_mapping", "constraints_of", "count_mappings",
    "enumerate_mappings", "explain", "lower_mapping", "problem", "random_assignment_validity",
    "apply_mapping", "CODES", "MapCodes", "code_name", "parse_code", "ContradictoryFixedError",
    "InvalidMappingError", "MapperError", "MappingError", "NoMapsError", "MapNestingTree",
    "label_maps",
]
