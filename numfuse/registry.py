"""The numpy functions numfuse knows by name: one record per function, with every fact
about it.

Tracing reads a record to decide what a call becomes (``kind``): a numpy call whose result
shape follows from its inputs' shapes, one whose result size depends on the values, a
write into a copy of its first argument, or a refusal.  ``fresh`` says its result never
shares memory with an operand (so it may be written in place); ``method`` that the
ndarray method of the same name is traced as this function; ``reduces`` names the ufunc
whose ``reduce`` it is (a reduction a kernel can compute in its loop); ``reduction`` that
it reduces or accumulates along axes (what ``explain()`` calls a reduction boundary).
Any other numpy function that dispatches on its arguments runs as a numpy call learnt
from stand-ins.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from typing import Any

import numpy as np


class Kind(enum.Enum):
    CALL = "a numpy call whose result shape follows from its inputs' shapes"
    DATA_DEPENDENT = "a numpy call whose result size depends on the values"
    WRITER = "a write into its first argument, traced as a write into a copy"
    REFUSED = "refused"


@dataclasses.dataclass(frozen=True)
class NumpyFunction:
    name: str  # under ``np`` (``linalg.norm``), or ``ndarray.<method>``
    function: Any
    kind: Kind
    fresh: bool = False
    method: bool = False
    reduces: str | None = None
    reduction: bool = False
    refused: str | None = None  # why, for a refused function


# ------------------------------------------------------------------ the facts, by name

_CALLS = (
    "sum", "prod", "mean", "min", "max", "amin", "amax", "any", "all", "std", "var",
    "argmin", "argmax", "cumsum", "cumprod", "nansum", "nanprod", "nanmean", "nanmin",
    "nanmax", "nanstd", "nanvar", "median", "percentile", "quantile", "average", "ptp",
    "dot", "vdot", "inner", "outer", "tensordot", "einsum", "kron", "cross", "trace",
    "reshape", "ravel", "transpose", "swapaxes", "moveaxis", "expand_dims", "squeeze",
    "broadcast_to", "atleast_1d", "atleast_2d", "atleast_3d", "concatenate", "stack",
    "hstack", "vstack", "dstack", "column_stack", "zeros_like", "ones_like", "full_like",
    "empty_like", "flip", "fliplr", "flipud", "roll", "rot90", "tile", "repeat", "sort",
    "diff", "diagonal", "diag", "triu", "tril", "take", "pad", "nan_to_num", "interp",
    "linalg.norm", "linalg.det", "linalg.inv", "linalg.solve", "linalg.pinv",
    "linalg.matrix_power", "matrix_transpose", "isclose", "sinc", "angle",
    "i0", "convolve", "correlate", "searchsorted", "digitize", "cov", "corrcoef", "argsort",
    "partition", "nanargmax", "nanargmin", "nancumsum", "nancumprod", "nanmedian",
    "nanpercentile", "nanquantile", "cumulative_sum", "cumulative_prod", "unwrap", "trapezoid",
    "polyval", "select", "fft.fft", "fft.ifft", "fft.rfft", "fft.irfft", "fft.fft2",
    "fft.ifft2", "fft.fftn", "fft.ifftn", "fft.fftshift", "fft.ifftshift", "append",
    "insert", "delete", "resize", "rollaxis", "block", "take_along_axis", "count_nonzero",
    "isin", "ediff1d", "piecewise", "apply_along_axis", "linalg.cholesky",
    "linalg.eigvalsh", "linalg.matrix_rank", "linalg.cond", "argpartition", "lexsort",
    "sort_complex", "vander", "packbits", "unpackbits", "allclose", "array_equal",
    "array_equiv", "linalg.tensorsolve", "linalg.multi_dot", "linalg.vector_norm",
    "linalg.matrix_norm", "linspace", "logspace", "geomspace",
    # several results, traced as one call per item
    "meshgrid", "broadcast_arrays", "split", "array_split", "hsplit", "vsplit", "dsplit",
    "gradient", "histogram", "histogram2d", "linalg.eigh", "linalg.qr", "linalg.svd",
    "linalg.slogdet", "linalg.lstsq",
)
# An axis of these results changes size with the data: free at any size, 0 and 1
# included, and the runtime takes the size each call returns.
_DATA_DEPENDENT = (
    "nonzero", "flatnonzero", "argwhere", "unique", "unique_values", "unique_counts",
    "unique_inverse", "unique_all", "compress", "extract", "trim_zeros", "bincount",
    "union1d", "intersect1d", "setdiff1d", "setxor1d",
)
_WRITERS = ("copyto", "put", "putmask", "place", "fill_diagonal", "put_along_axis")
_REFUSED = {
    **dict.fromkeys(("save", "savez", "savez_compressed", "savetxt"),
                    "it writes a file, which a traced function does once, while tracing"),
    **dict.fromkeys(("shares_memory", "may_share_memory"),
                    "a traced value has no memory to compare until it runs"),
}
# Results that never share memory with an operand (every data-dependent call's but
# trim_zeros', which slices).
_FRESH = frozenset((
    "sum", "prod", "mean", "std", "var", "min", "max", "amin", "amax", "any", "all",
    "cumsum", "cumprod", "argmin", "argmax", "nansum", "nanprod", "nanmean", "nanmin",
    "nanmax", "nanstd", "nanvar", "median", "percentile", "quantile", "average", "ptp", "dot",
    "vdot", "inner", "outer", "tensordot", "kron", "cross", "concatenate", "stack", "hstack",
    "vstack", "dstack", "column_stack", "zeros_like", "ones_like", "full_like", "empty_like",
    "roll", "tile", "repeat", "sort", "diff", "pad", "interp", "linalg.norm", "linalg.det",
    "linalg.inv", "linalg.solve", "linalg.pinv", "isclose", "sinc", "angle", "i0",
    "convolve", "correlate", "searchsorted", "digitize", "cov", "corrcoef", "argsort",
    "nanargmax", "nanargmin", "nancumsum", "nancumprod", "nanmedian", "nanpercentile",
    "nanquantile", "cumulative_sum", "cumulative_prod", "trapezoid", "polyval", "append",
    "insert", "delete", "matmul", "take_along_axis", "count_nonzero", "isin", "ediff1d",
    "piecewise", "apply_along_axis", "linalg.cholesky", "linalg.eigvalsh", "linalg.matrix_rank",
    "linalg.cond", "meshgrid", "gradient", "linalg.eigh",
    "linalg.qr", "linalg.svd", "linalg.slogdet", "linalg.lstsq", "linspace", "logspace",
    "geomspace", "triu", "tril", "take", "nan_to_num", "vander", "choose", "select", "resize",
    "sort_complex", "lexsort", "argpartition", "partition", "unwrap", "block",
    "linalg.multi_dot", "linalg.vector_norm", "linalg.matrix_norm", "linalg.tensorsolve",
    "fft.fft", "fft.ifft", "fft.rfft", "fft.irfft", "fft.fft2", "fft.ifft2", "fft.fftn",
    "fft.ifftn", "fft.fftshift", "fft.ifftshift", "zeros", "ones", "empty", "full",
    *(name for name in _DATA_DEPENDENT if name != "trim_zeros"),
))
# ndarray methods traced as calls of the numpy function of the same name.
_METHODS = frozenset((
    "sum", "prod", "mean", "min", "max", "any", "all", "std", "var", "argmin", "argmax",
    "cumsum", "cumprod", "ravel", "swapaxes", "squeeze", "repeat", "dot", "trace",
    "diagonal", "take", "argsort", "argpartition", "choose", "searchsorted",
))
# ndarray methods writing into the array: traced as writes into a copy.
_WRITING_METHODS = ("sort", "fill", "partition", "put")
# The ufunc whose reduce each reduction is.
_REDUCES = {"sum": "add", "prod": "multiply", "mean": "add", "max": "maximum",
            "amax": "maximum", "min": "minimum", "amin": "minimum", "any": "logical_or",
            "all": "logical_and"}
_REDUCTIONS = frozenset((
    "sum", "prod", "mean", "std", "var", "min", "max", "amin", "amax", "argmin", "argmax",
    "all", "any", "nansum", "nanprod", "nanmean", "nanmin", "nanmax", "cumsum", "cumprod",
    "average", "median", "count_nonzero", "ptp",
))


def _lookup(name: str) -> Any:
    target: Any = np
    for part in name.split("."):
        target = getattr(target, part, None)
    return target


def _records() -> dict[Any, NumpyFunction]:
    records: dict[Any, NumpyFunction] = {}

    def add(name: str, kind: Kind, **facts: Any) -> None:
        function = _lookup(name)
        if function is not None:  # absent from this numpy version
            records[function] = NumpyFunction(
                name, function, kind, fresh=name in _FRESH, method=name in _METHODS,
                reduces=_REDUCES.get(name), reduction=name in _REDUCTIONS, **facts)

    for name in _CALLS:
        add(name, Kind.CALL)
    for name in _DATA_DEPENDENT:
        add(name, Kind.DATA_DEPENDENT)
    for name in _WRITERS:
        add(name, Kind.WRITER)
    for name, reason in _REFUSED.items():
        add(name, Kind.REFUSED, refused=reason)
    for name in _WRITING_METHODS:
        method = getattr(np.ndarray, name)
        records[method] = NumpyFunction(f"ndarray.{name}", method, Kind.WRITER, method=True)
    records[np.ndarray.byteswap] = NumpyFunction("ndarray.byteswap", np.ndarray.byteswap,
                                                 Kind.CALL, method=True)
    return records


REGISTRY: dict[Any, NumpyFunction] = _records()

def _methods() -> dict[str, NumpyFunction]:
    """What tracing looks up by attribute name on a traced array: x.sum() is np.sum's
    record; a method whose function is not listed (x.choose) runs as a numpy call."""
    methods = {record.name.removeprefix("ndarray."): record for record in REGISTRY.values()
               if record.method}
    for name in _METHODS - methods.keys():
        methods[name] = NumpyFunction(name, getattr(np, name), Kind.CALL, method=True)
    return {name: record for name, record in methods.items() if hasattr(np.ndarray, name)}


METHODS: dict[str, NumpyFunction] = _methods()

def discarding_imaginary(value: Any, dtype: Any) -> Any:
    """``value.astype(dtype)`` of complex values to a real ``dtype``, run by numpy at each
    call: numpy warns ``ComplexWarning`` as it casts (a fused cast would not)."""
    return value.astype(dtype)


# Functions whose results never share memory with an operand, ufuncs (np.matmul) included.
FRESH_FUNCTIONS: frozenset[Any] = frozenset(
    function for function in map(_lookup, _FRESH) if function is not None) | {
    discarding_imaginary, np.ndarray.byteswap}  # (byteswap in place: a write, see Tracer)


def fresh_result(function: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether ``function(*args, **kwargs)`` never shares memory with an operand: a
    function of ``FRESH_FUNCTIONS`` but for the options making it return views
    (``np.diff(a, n=0)`` is ``a``; ``np.meshgrid(..., copy=False)``)."""
    if function not in FRESH_FUNCTIONS:
        return False
    if function is _DIFF:
        n = args[1] if len(args) > 1 else kwargs.get("n", 1)
        return not (isinstance(n, (int, np.integer)) and n == 0)
    if function is _MESHGRID:
        return kwargs.get("copy", True) is not False
    return True


# (numpy's own functions: tracing replaces some of numpy's attributes)
_DIFF, _MESHGRID = np.diff, np.meshgrid


def lookup(function: Any) -> NumpyFunction | None:
    """The record of a numpy function (or ndarray method), if numfuse knows it."""
    try:
        return REGISTRY.get(function)
    except TypeError:  # an unhashable callable
        return None


def numpy_name(func: Any) -> str:
    """``func``'s name under ``np`` (``linalg.eig``, ``lib.stride_tricks.as_strided``)."""
    name = getattr(func, "__name__", repr(func))
    for prefix, namespace in (("", np), ("linalg.", np.linalg), ("fft.", np.fft),
                              ("lib.stride_tricks.", np.lib.stride_tricks)):
        if getattr(namespace, name, None) is func:
            return prefix + name
    module = getattr(func, "__module__", None) or ""
    return f"{module.removeprefix('numpy.')}.{name}" if module else name
