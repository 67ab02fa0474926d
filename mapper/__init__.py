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
from mapper.encoding import CODES, MapCodes, code_name, parse_code, short_code
from mapper.errors import (
    ArgumentError,
    ConfigurationError,
    ContradictoryFixedError,
    DeviceUseError,
    InputError,
    InvalidMappingError,
    MapperError,
    MappingError,
    NoMapsError,
    SizeError,
)
from mapper.kernel import CompiledKernel, RunResult, Status
from mapper.nesting import MapNestingTree, label_maps

__all__ = [
    "Explanation", "MappingProblem", "check_mapping", "constraints_of", "count_mappings",
    "enumerate_mappings", "explain", "lower_mapping", "problem", "random_assignment_validity",
    "apply_mapping", "CODES", "MapCodes", "code_name", "parse_code", "short_code",
    "ContradictoryFixedError",
    "InvalidMappingError", "MapperError", "MappingError", "NoMapsError", "MapNestingTree",
    "label_maps", "CompiledKernel", "RunResult", "Status", "ConfigurationError", "DeviceUseError",
    "InputError", "SizeError", "ArgumentError",
]
