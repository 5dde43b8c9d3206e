"""Reductions that a fusion region can compute as an epilogue of its loop.

A traced ``np.sum``/``prod``/``max``/``min``/``any``/``all``/``mean`` (also as methods,
``np.add.reduce`` and friends, and the two halves numfuse splits ``var``/``std`` into) is a
non-fusible numpy call like any other, with one addition: a ``Reduction`` describing it.
When its input is computed by a fusion region and the reduced axes include the region's
core (last non-unit) axis, the partitioner moves it into that region: the kernel folds
every element into an accumulator as it computes it, writes one partial result per core
row, and ``finish`` completes the reduction over the remaining axes with numpy.  When the
reduced axes are leading ones only (``x.sum(axis=0)``), the region accumulates it across
its rows instead (``partition.accumulation``): one accumulator per column, the rows added
in order, the division of ``mean``/``var`` done in the kernel as numpy does it
(``codegen.emit_passes``), numpy's errors and warnings for too few rows raised first
(``check_count``).  Otherwise the call is replayed by numpy, so every path has numpy's
result dtype and shape.

Float sums folded along a row are accumulated in blocks (see ``codegen``), not left to
right, so their rounding differs from numpy's pairwise summation by a few units in the last
place while staying as accurate; integer, bool, min/max results are exact whatever the
order.  A row long enough to be split over threads is always folded in fixed chunks, one
partial each, combined in chunk order (``threads``), so a fused reduction gives the same
bits on any thread count.  Sums accumulated across rows add them in numpy's own order:
the same bits.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import pytree
from .calls import TRACED
from .registry import REGISTRY

# Call name -> the ufunc whose reduce it is: the registry's reductions, the ufuncs' own
# ``reduce`` and the halves tracing splits ``np.var`` into.
_BY_NAME = {
    **{record.name: record.reduces for record in REGISTRY.values() if record.reduces},
    **{f"{ufunc}.reduce": ufunc for ufunc in (
        "add", "multiply", "maximum", "minimum", "logical_or", "logical_and")},
    "mean_of": "add", "sum_over_count": "add",
}
# How a completed sum is divided by the element count (see ``divide_by_count``).
_DIVIDE = {"mean": "mean", "mean_of": "quiet", "sum_over_count": "ddof"}
# Keyword arguments the fused form understands; anything else (initial=, where=, out=)
# keeps the call as a plain numpy call.
_UNDERSTOOD = frozenset({"axis", "dtype", "keepdims", "ddof"})


@dataclasses.dataclass(frozen=True)
class Reduction:
    """``ufunc.reduce`` over ``axes`` (of the input) into ``dtype``; when ``divide`` is
    set the total is then divided by the element count as ``np.mean`` (``"mean"``), the
    mean inside ``np.var`` (``"quiet"``) or ``np.var`` itself (``"ddof"``) do."""

    ufunc: str
    axes: tuple[int, ...]
    keepdims: bool
    dtype: np.dtype
    divide: str | None = None
    ddof: int = 0

    def identity(self) -> Any:
        """The accumulator's starting value (numpy's identity; ±inf/extremes for max/min)."""
        dtype = self.dtype
        if self.ufunc in ("add", "logical_or"):
            return False if dtype.kind == "b" else 0
        if self.ufunc in ("multiply", "logical_and"):
            return True if dtype.kind == "b" else 1
        high = self.ufunc == "minimum"
        if dtype.kind == "b":
            return high
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            return int(info.max if high else info.min)
        return np.inf if high else -np.inf

    def describe(self) -> str:
        extra = f", divide={self.divide}, ddof={self.ddof}" if self.divide else ""
        return f"{self.ufunc}.reduce(axes={self.axes}, keepdims={self.keepdims}{extra})"


def reduced_ufunc(name: str) -> str | None:
    """The ufunc whose ``reduce`` the numpy call ``name`` is ("add" for "sum"), or None."""
    return _BY_NAME.get(name)


def fusible_dtype(reduction: Reduction) -> bool:
    """Complex max/min order by (real, imag) with NaN rules: left to numpy."""
    return not (reduction.dtype.kind == "c" and reduction.ufunc in ("maximum", "minimum"))


def recognise(fn: Any, name: str, args: Sequence[Any], kwargs: dict[str, Any],
              ndim: int, result_dtype: np.dtype) -> Reduction | None:
    """The ``Reduction`` a traced call performs, or None if it is not a plain one.

    ``args``/``kwargs`` are the call's static arguments with ``TRACED`` for the traced
    array, which must be the first positional argument and the only traced value.
    """
    ufunc = _BY_NAME.get(name)
    if ufunc is None or not args or args[0] is not TRACED or ndim == 0:
        return None
    try:
        signature = inspect.signature(fn)
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    arguments = dict(bound.arguments)
    arguments.pop(next(iter(signature.parameters)))
    if arguments.pop("out", None) is not None:
        return None
    if "where" in arguments and arguments["where"] is True:  # (numpy's default, given)
        del arguments["where"]
    if any(key not in _UNDERSTOOD for key in arguments) \
            or pytree.any_leaf(lambda leaf: leaf is TRACED, arguments):
        return None
    default_axis = 0 if name.endswith(".reduce") else None
    axis = arguments.get("axis", default_axis)
    try:
        axes = _normalise(axis, ndim)
    except (TypeError, ValueError, np.exceptions.AxisError):
        return None
    accumulate = result_dtype
    if ufunc in ("logical_or", "logical_and"):
        accumulate = np.dtype(bool)
    return Reduction(ufunc, axes, bool(arguments.get("keepdims", False)), accumulate,
                     _DIVIDE.get(name), int(arguments.get("ddof", 0)))


def _normalise(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, tuple) else (axis,)
    axes = tuple(sorted(_axis(a, ndim) for a in items))
    if len(set(axes)) != len(axes):
        raise ValueError("duplicate axis")
    return axes


def _axis(axis: Any, ndim: int) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"axis {axis!r} is not an integer")
    value = int(axis)
    if not -ndim <= value < ndim:
        raise np.exceptions.AxisError(value, ndim)
    return value % ndim


# ------------------------------------------------------------------ numpy-level pieces
#
# ``np.var(a)`` is ``sum(square(a - mean(a, keepdims=True))) / max(count - ddof, 0)``.
# numfuse traces it as ``mean_of`` (the mean, without np.mean's own warning), fusible
# elementwise work, and ``sum_over_count``; run by numpy, the two give numpy's numbers.


def mean_of(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """The mean inside numpy's ``var``: ``sum(x) / count`` (warnings are var's)."""
    total = np.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)
    return divide_by_count(total, _count(np.shape(x), axis), "quiet", 0)


def sum_over_count(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False,
                   ddof: int = 0) -> Any:
    """The end of numpy's ``var``: ``sum(x) / max(count - ddof, 0)``."""
    total = np.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)
    return divide_by_count(total, _count(np.shape(x), axis), "ddof", ddof)


def _count(shape: tuple[int, ...], axis: Any) -> int:
    count = 1
    for axis_index in _normalise(axis, len(shape)):
        count *= shape[axis_index]
    return count


def divide_by_count(total: Any, count: int, divide: str, ddof: int) -> Any:
    """Divide a completed sum as ``np.mean``/``np.var`` do: by an ``intp`` count (so a
    float32 total is divided in float64 and rounded back), with their warnings."""
    if divide == "mean" and count == 0:
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=4)
    elif divide == "ddof" and ddof >= count:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=4)
    divisor = np.maximum(np.intp(count) - ddof, 0) if divide == "ddof" else np.intp(count)
    if isinstance(total, np.ndarray):
        return np.true_divide(total, divisor, out=total, casting="unsafe")
    if isinstance(total, np.generic) or not np.ndim(total):
        return total.dtype.type(total / divisor)
    return (total / divisor).astype(total.dtype)  # a dask array: kept lazy, as it is


def check_count(reduction: Reduction, count: int) -> None:
    """numpy's error (``max``/``min`` of nothing) or warning (``mean`` of nothing,
    ``var`` with ``ddof`` at least the count) for a reduction of ``count`` elements each,
    which a kernel then computes whole (``var``'s inner mean warns nothing)."""
    if count == 0 and reduction.ufunc in ("maximum", "minimum"):
        getattr(np, reduction.ufunc).reduce(np.empty(0, reduction.dtype))
    if reduction.divide == "mean" and count == 0:
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=5)
    elif reduction.divide == "ddof" and reduction.ddof >= count:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=5)


def finish(reduction: Reduction, partials: Any, remaining: tuple[int, ...], count: int,
           shape: tuple[int, ...]) -> Any:
    """Complete a fused reduction from the kernel's per-row ``partials``.

    ``remaining`` are the axes of ``partials`` still to reduce, ``count`` the number of
    input elements reduced into each result and ``shape`` numpy's result shape.
    """
    ufunc = getattr(np, reduction.ufunc)
    if count == 0 and reduction.ufunc in ("maximum", "minimum"):
        ufunc.reduce(np.empty(0, reduction.dtype))  # numpy's "no identity" ValueError
    total = ufunc.reduce(partials, axis=remaining, dtype=reduction.dtype) if remaining \
        else partials
    if shape:
        total = np.reshape(total, shape)
    elif isinstance(total, np.ndarray):
        total = total[()]
    if reduction.divide is not None:
        total = divide_by_count(total, count, reduction.divide, reduction.ddof)
    return total
