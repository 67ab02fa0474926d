"""Words of OpenCL C that cannot name a user function or one of its parameters: the C
keywords, OpenCL's address-space and access qualifiers, and its scalar and vector types.

The IR's user functions are emitted into OpenCL C unchanged, so a name from this set
would parse here and then fail to compile (or silently mean something else)."""

from __future__ import annotations

_C_KEYWORDS = """auto break case char const continue default do double else enum extern float for
goto if inline int long register restrict return short signed sizeof static struct switch
typedef union unsigned void volatile while bool""".split()

_OPENCL_WORDS = """kernel __kernel global __global local __local private __private constant
__constant read_only __read_only write_only __write_only read_write __read_write half uchar
ushort uint ulong size_t ptrdiff_t intptr_t uintptr_t barrier image2d_t image3d_t sampler_t
event_t""".split()

_VECTOR_BASES = "char uchar short ushort int uint long ulong float double half".split()

OPENCL_RESERVED: frozenset[str] = frozenset(
    _C_KEYWORDS + _OPENCL_WORDS
    + [f"{b}{n}" for b in _VECTOR_BASES for n in (2, 3, 4, 8, 16)]
)
