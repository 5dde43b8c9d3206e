"""The named numpy functions tracing computes itself (``np.where``, ``astype``, ``clip``,
``var``...), and the list of supported functions."""

from __future__ import annotations

import math
import operator
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import reductions
from ..dtypes import check_dtype
from ..errors import (
    UnsupportedOperationError,
)
from ..graph import Node
from ..ops import OPS
from ..registry import REGISTRY, Kind, discarding_imaginary
from .nodes import elementwise


def _method(name: str, value: Any, target: Any = None) -> Tracer:
    node = _node(value)
    op = OPS[name]
    if name == "astype":
        dtype = check_dtype(np.dtype(target), "astype target")
        return Tracer(elementwise(op, [node], loop=((dtype,), dtype), scalar=node.scalar),
                      owned=True)
    loop = op.loop_dtypes([node.dtype])
    # a Python number's own ``.real`` and ``.imag`` are Python numbers: weak, as it is
    weak = node.weak and name in ("real", "imag")
    return Tracer(elementwise(op, [node], loop=loop, scalar=node.scalar, weak=weak))


# ------------------------------------------------------------------ numpy functions


def astype(value: Any, dtype: Any, casting: str = "unsafe") -> Tracer:
    node = _node(value)
    target = np.dtype(dtype)
    if not np.can_cast(node.dtype, target, casting=casting):  # type: ignore[arg-type]
        raise TypeError(
            f"Cannot cast array data from {node.dtype} to {target} according to the rule "
            f"'{casting}'"
        )
    if not target.isnative:  # kernels compute in native byte order
        if node.scalar and node.ndim == 0:  # a numpy scalar is native whatever was asked
            return astype(value, target.newbyteorder("="), casting)
        return record_call(np.ndarray.astype, "astype", (value, target), {})  # numpy's array
    if node.dtype.kind == "c" and target.kind not in "cb":  # (to bool: silent, as numpy)
        cast = record_call(discarding_imaginary, "astype", (value, target), {})
        if node.scalar and node.ndim == 0:  # a numpy scalar's astype gives one
            return fresh_copy(cast.node, scalar=True)
        return cast
    return _method("astype", value, target)


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None and y is None:
        return record_call(np.nonzero, "nonzero", (condition,), {})
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    nodes = [_node(condition), _node(x), _node(y)]
    return Tracer(elementwise(OPS["where"], nodes, scalar=False), owned=True)


def clip(a: Any, a_min: Any = np._NoValue, a_max: Any = np._NoValue, out: Any = None,
         **kwargs: Any) -> Any:
    # numpy's rules for its bounds: both positional, or neither (then min=/max=, or none)
    low, high = kwargs.pop("min", np._NoValue), kwargs.pop("max", np._NoValue)
    if a_min is np._NoValue and a_max is np._NoValue:
        a_min = None if low is np._NoValue else low
        a_max = None if high is np._NoValue else high
    elif a_min is np._NoValue or a_max is np._NoValue:
        missing = "a_min" if a_min is np._NoValue else "a_max"
        raise TypeError(f"clip() missing 1 required positional argument: '{missing}'")
    elif low is not np._NoValue or high is not np._NoValue:
        raise ValueError("Passing `min` or `max` keyword argument when `a_min` and `a_max` "
                         "are provided is forbidden.")
    if kwargs:
        raise UnsupportedOperationError("np.clip with extra keywords",
                                        "call np.clip(a, a_min, a_max) and use its result.")
    if out is not None:  # into an array the function made, as a ufunc's out=
        clipping = OPS["clip"].reference  # np.clip's ufunc
        assert isinstance(clipping, np.ufunc)
        # (the bounds take part in the casting check: np.clip(ints, 0.5, 1.5, out=ints)
        # raises numpy's casting error)
        bounds = tuple(a if bound is None else bound for bound in (a_min, a_max))
        return _store(clipping, (a, *bounds), clip(a, a_min, a_max), out)
    if _node(a).weak:  # numpy makes a Python number a (strong) array first
        a = astype(a, _node(a).dtype)
    dtype = _node(a).dtype
    if dtype.kind in "iu":
        if any(isinstance(bound, Tracer) and bound.node.weak and bound.node.dtype.kind in "iu"
               for bound in (a_min, a_max)):
            # a Python int argument as a bound: whether it bounds anything (below) depends
            # on its value, so numpy's call, which makes it static (one compile per value)
            return record_call(np.clip, "clip", (a, a_min, a_max), {})
        # numpy's: a Python int bound beyond the integer dtype's range on its own side
        # bounds nothing (rather than being out of bounds for the dtype)
        info = np.iinfo(dtype)
        if type(a_min) is int and a_min <= info.min:
            a_min = None
        if type(a_max) is int and a_max >= info.max:
            a_max = None
    if a_min is None and a_max is None:
        return apply_ufunc(np.positive, (a,), {})
    if a_min is None:
        return apply_ufunc(np.minimum, (a, a_max), {})
    if a_max is None:
        return apply_ufunc(np.maximum, (a, a_min), {})
    nodes = [_node(a), _node(a_min), _node(a_max)]
    return Tracer(elementwise(OPS["clip"], nodes), owned=True)


def power_of_ten(n: int) -> float:
    """10.0 ** n as numpy's round computes it: exact up to 1e8, then 1e9 multiplied by ten
    (rounding at each step past 1e22, and +inf past the largest float, not an error)."""
    if n < 9:
        return float(10**n)
    value = 1e9
    for _ in range(n - 9):
        value *= 10.0
        if value == math.inf:  # (it stays infinite)
            break
    return value


def round_(a: Any, decimals: int = 0, out: Any = None) -> Any:
    """numpy's round: rint for decimals=0, else scale, rint and unscale like numpy."""
    if out is not None:
        raise UnsupportedOperationError("np.round(..., out=...)", "use the returned value.")
    decimals = operator.index(decimals)  # numpy's TypeError for a float
    if not -(2**31) <= decimals < 2**31:  # numpy's OverflowError: decimals is a C int
        np.round(np.zeros(1), decimals)
    node = _node(a)
    if node.dtype.kind == "b":
        if decimals != 0:  # numpy scales into a bool array: its casting error, raised here
            np.round(np.zeros(1, dtype=bool), decimals)
        return apply_ufunc(np.rint, (a,), {})  # bool is not an integer here: float16
    if node.dtype.kind in "iu":
        if decimals >= 0:
            return _unchanged(a)
        # numpy divides into a float64 array, rounds half to even there, multiplies back
        # and casts to the integer dtype (np.round(-5, -1) is 0, np.round(-15, -1) -20).
        factor = np.float64(power_of_ten(-decimals))
        scaled = apply_ufunc(np.true_divide, (astype(a, np.float64), factor), {})
        rounded = apply_ufunc(np.multiply, (apply_ufunc(np.rint, (scaled,), {}), factor), {})
        return astype(rounded, node.dtype)
    if decimals == 0:
        return apply_ufunc(np.rint, (a,), {})
    if node.dtype.kind == "c":  # numpy rounds the two parts apart: its own call
        return record_call(np.round, "round", (a, decimals), {})
    # numpy's factor, a Python float: weak (a float32 array scales in float32, its
    # conversion overflowing to inf with numpy's warning) and not correctly rounded
    factor = power_of_ten(abs(decimals))
    if decimals > 0:
        scaled = apply_ufunc(np.multiply, (a, factor), {})
        return apply_ufunc(np.true_divide, (apply_ufunc(np.rint, (scaled,), {}), factor), {})
    scaled = apply_ufunc(np.true_divide, (a, factor), {})
    return apply_ufunc(np.multiply, (apply_ufunc(np.rint, (scaled,), {}), factor), {})


def _ufunc_alias(ufunc: np.ufunc) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return apply_ufunc(ufunc, args, kwargs)
    return call


def _real(value: Any) -> Any:
    if isinstance(value, Tracer) and value.node.dtype.kind != "c":
        return value  # numpy's real of a real array: the array itself
    result = _method("real", value)
    _share(value, result)  # numpy's real and imag are views of their operand
    return result


def _imag(value: Any) -> Any:
    result = _method("imag", value)
    _share(value, result)
    return result


def _nan_to_num(x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None,
                neginf: Any = None) -> Any:
    """``np.nan_to_num``; with ``copy=False`` numpy writes into ``x`` (an array the
    function made; an argument is refused as every write into one is) and returns it."""
    # (the options given only: dask's nan_to_num takes none of the others)
    options = {key: value for key, value, default in (
        ("nan", nan, 0.0), ("posinf", posinf, None), ("neginf", neginf, None))
        if value is not default and not (key == "nan" and type(value) is float
                                         and value == 0.0)}
    result = record_call(np.nan_to_num, "nan_to_num", (x,), options)
    if copy or not isinstance(x, Tracer):
        return result
    if _immutable(x.node):  # a number has no memory to write into
        raise ValueError("Unable to avoid copy while creating an array as requested.")
    x[...] = result
    return x


def _share(values: Any, result: Any) -> None:
    """Note that ``result`` (a tracer, or a container of them) may share memory with the
    tracers among ``values`` and their bases: none may be written while it is alive, and
    it is never written itself."""
    bases = list(dict.fromkeys(
        base for value in tracers_in(values) for base in (value, *value.bases)))
    for view in tracers_in(result):
        view.owned = False
        view.bases = (*view.bases, *bases)
        for base in bases:
            base.views.append(weakref.ref(view))


def fresh_copy(node: Node, scalar: bool) -> Tracer:
    """A new array holding ``node``'s values (a numpy scalar when ``scalar``)."""
    return Tracer(elementwise(OPS["astype"], [node], loop=((node.dtype,), node.dtype),
                              scalar=scalar), owned=True)


def _unchanged(value: Any) -> Tracer:
    """An integer value rounded (``np.round``, ``np.fix``): a copy, which is a numpy
    scalar for a 0-d value as numpy's rounding gives it (``np.copy`` keeps a 0-d array)."""
    node = _node(value)
    return fresh_copy(node, scalar=node.ndim == 0)


def memory_order(order: Any) -> str | None:
    """numpy's ``order=`` checked as numpy checks it: one of the letters C, F, A and K
    (either case; numpy's errors otherwise), in capitals, or None."""
    if order is None:
        return None
    if not isinstance(order, str):
        raise TypeError(f"order must be str, not {type(order).__name__}")
    if order.upper() not in ("C", "F", "A", "K"):
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    return order.upper()


def _copy(value: Any, order: str = "K", subok: bool = False) -> Any:
    node = _node(value)
    order = memory_order(order) or "K"
    if order in ("F", "A") and node.ndim > 1:  # numpy's layout: numpy's copy
        return record_call(np.copy, "copy", (value,), {"order": order})
    return fresh_copy(node, scalar=False)


def _size(shape: tuple[int, ...], axis: Any) -> int:
    """``np.size`` of an array of ``shape`` along ``axis`` (None: all, or a tuple)."""
    if axis is None:
        return math.prod(shape)
    return math.prod(shape[index] for index in axis) if isinstance(axis, tuple) else \
        shape[axis]


def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
        keepdims: bool = False, **kwargs: Any) -> Any:
    """numpy's ``var`` split into a mean, fusible elementwise work and a sum over the
    count, so both reductions can run inside kernels (see ``reductions``)."""
    node = _node(a)
    if out is not None or kwargs or not isinstance(ddof, (int, np.integer)) or \
            node.dtype.kind not in "biufc":
        return record_call(np.var, "var", (a,), dict(axis=axis, dtype=dtype, out=out,
                                                     ddof=ddof, keepdims=keepdims, **kwargs))
    if dtype is None and node.dtype.kind in "biu":
        dtype = np.dtype("f8")
    value = Tracer(node)
    mean = record_call(reductions.mean_of, "mean_of", (value,),
                       {"axis": axis, "dtype": dtype, "keepdims": True})
    deviation = value - mean
    if deviation.dtype.kind == "c":
        squares = np.square(deviation.real) + np.square(deviation.imag)
    else:
        squares = np.square(deviation)
    return record_call(reductions.sum_over_count, "sum_over_count", (squares,),
                       {"axis": axis, "dtype": dtype, "keepdims": keepdims, "ddof": int(ddof)})


def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
        keepdims: bool = False, **kwargs: Any) -> Any:
    """``sqrt(var)``, as numpy computes it."""
    if out is not None or kwargs or (dtype is not None and np.dtype(dtype).kind in "biu"):
        # (an integer dtype: numpy casts the root back into it, or refuses to)
        return record_call(np.std, "std", (a,), dict(axis=axis, dtype=dtype, out=out,
                                                     ddof=ddof, keepdims=keepdims, **kwargs))
    return np.sqrt(var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))


def _dtype_or_value(value: Any) -> Any:
    """What ``np.result_type`` and friends need of a traced value: its dtype (or, for a
    Python scalar argument, a Python scalar of its type, which numpy treats as weak)."""
    if not isinstance(value, Tracer):
        return value
    return value.node.dtype.type(0).item() if value.node.weak else value.node.dtype


FUNCTIONS: dict[Any, Callable[..., Any]] = {
    np.iscomplexobj: lambda x: _node(x).dtype.kind == "c",
    np.isrealobj: lambda x: _node(x).dtype.kind != "c",
    np.ndim: lambda a: _node(a).ndim,
    # (from the sizes, not the attributes: a Python number has none, numpy's own
    # functions take its shape and size all the same)
    np.shape: lambda a: a._sizes("np.shape of a traced array") if isinstance(a, Tracer)
    else np.shape(a),
    np.size: lambda a, axis=None: _size(a._sizes("np.size of a traced array"), axis)
    if isinstance(a, Tracer) else np.size(a, axis),
    np.result_type: lambda *values: np.result_type(*(_dtype_or_value(v) for v in values)),
    # (of the dtypes only: an empty array of each, a Python number as the number)
    np.common_type: lambda *arrays: np.common_type(*(
        value if not isinstance(value, Tracer) else value.node.dtype.type(0).item()
        if value.node.weak else np.empty(0, value.node.dtype) for value in arrays)),
    np.var: var,
    np.std: std,
    np.where: where,
    np.clip: clip,
    np.round: round_,
    np.around: round_,
    np.real: _real,
    np.imag: _imag,
    np.copy: _copy,
    np.nan_to_num: _nan_to_num,
    np.fix: lambda x, out=None: apply_ufunc(np.trunc, (x,), {} if out is None else {"out": out})
    if _node(x).dtype.kind in "fc" or out is not None else _unchanged(x),
}


def supported_functions() -> list[str]:
    """The numpy functions numfuse knows by name (besides the ufuncs), as ``np.<name>``;
    any other numpy function that dispatches on its arguments runs as a numpy call learnt
    from stand-ins (see ``record_call``), but for the refused ones (``registry``)."""
    listed = {f"np.{record.name}" for record in REGISTRY.values()
              if record.kind in (Kind.CALL, Kind.DATA_DEPENDENT)
              and not record.name.startswith("ndarray.")}
    return sorted(listed | {f"np.{getattr(func, '__name__', func)}" for func in FUNCTIONS})


# Imported last: these modules and this one use each other's functions at call time.
from .probes import record_call  # noqa: E402
from .tracer import Tracer, _immutable, tracers_in  # noqa: E402
from .ufuncs import _node, _store, apply_ufunc  # noqa: E402
