"""numpy's attributes replaced while a function is traced (``np.asarray``, array creation,
``np.random``, ``np.vectorize``; Python's ``random`` and ``time`` too), and telling the
user's own code from library code."""

from __future__ import annotations

import contextlib
import contextvars
import dis
import functools
import inspect
import os
import random
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..errors import (
    ConcretizationError,
    StaticArgumentError,
    UnsupportedOperationError,
    raised_while_tracing,
)
from ..graph import (
    CONST,
    ELEMENTWISE,
    Node,
    broadcast_shapes,
)
from .nodes import _advice_for, const_node

# ------------------------------------------------------- np.asarray and friends on tracers
#
# ``np.asarray(x)`` does not dispatch to ``__array_function__``; it asks for ``__array__``,
# which a traced value cannot give.  While a function is traced, these numpy attributes are
# wrappers that handle traced values and hand everything else to numpy unchanged, so code
# starting with ``x = np.asarray(x, dtype=float)`` traces.  (A name imported with
# ``from numpy import asarray`` is not wrapped.)

_CONVERSIONS = {name: getattr(np, name) for name in (
    "array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray",
    "asarray_chkfinite", "require")}
# Array creation: in the traced function's own code these give constants that behave as
# traced values (owned, so they may be written; indexable by traced values); np.empty gives
# zeros so that a constant never holds arbitrary bytes.
_CREATIONS = {name: getattr(np, name) for name in (
    "zeros", "ones", "empty", "full", "eye", "identity", "arange", "linspace", "logspace",
    "geomspace", "tri", "zeros_like", "ones_like", "empty_like", "full_like")}
# Functions whose data (first argument) may be a list or tuple of traced values
# (``np.mean([a, b], axis=0)``): numpy's dispatch looks for traced values in the arguments,
# not in a list, and converting the list asks each for ``__array__``.  While a function is
# traced they make such a list an array first (``np.array([a, b])``, a numpy call).
_LIST_DATA = {name: getattr(np, name) for name in (
    "sum", "prod", "mean", "std", "var", "max", "min", "amax", "amin", "ptp", "median",
    "percentile", "quantile", "any", "all", "argmax", "argmin", "cumsum", "cumprod",
    "sort", "argsort", "diff", "nansum", "nanprod", "nanmean", "nanstd", "nanvar",
    "nanmax", "nanmin", "nanmedian", "nanargmax", "nanargmin", "nanpercentile",
    "nanquantile", "transpose", "reshape", "ravel", "squeeze", "round", "around", "clip",
    "flip", "roll", "trace", "cov", "corrcoef", "count_nonzero", "average", "lexsort",
    "unique", "partition", "argpartition", "nonzero", "flatnonzero", "argwhere", "isclose",
    "allclose", "dot", "vdot", "inner", "outer", "cross", "interp", "searchsorted",
    "polyval", "convolve", "correlate", "digitize", "bincount", "histogram", "trapezoid")
    if hasattr(np, name)}
_LIST_DATA_LINALG = {"norm": np.linalg.norm}
_WRAPPED = {**_CONVERSIONS, **_CREATIONS, **_LIST_DATA}
_conversion_lock = threading.Lock()
_conversion_depth = 0
# The globals of the function being traced: calls from its module's code make constants.
_user_globals: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "numfuse_user_globals", default=None)


@contextlib.contextmanager
def _converting_tracers() -> Iterator[None]:
    global _conversion_depth
    with _conversion_lock:
        if _conversion_depth == 0:
            for name, original in _CONVERSIONS.items():
                setattr(np, name, _converter(name, original))
            for name, original in _CREATIONS.items():
                setattr(np, name, _creator(name, original))
            for name, original in _LIST_DATA.items():
                setattr(np, name, _list_taker(original))
            for name, original in _LIST_DATA_LINALG.items():
                setattr(np.linalg, name, _list_taker(original))
            for name, original in _RANDOM.items():
                setattr(np.random, name, _random_draw(name, original))
            for module, functions in _PYTHON_READINGS:
                for name, original in functions.items():
                    setattr(module, name, _python_reading(module.__name__, name, original))
            for module, name, original in _POLYNOMIAL_VALUES:
                setattr(module, name, _tensor_values(original))
            np.vectorize.__call__ = _vectorized_call  # type: ignore[method-assign]
            np.isscalar = _isscalar  # type: ignore[assignment]
            np.iterable = _iterable  # type: ignore[assignment]
            np.broadcast = _broadcast  # type: ignore[misc,assignment]
            np.r_, np.c_ = _ROWS, _COLUMNS  # type: ignore[misc,assignment]
        _conversion_depth += 1
    try:
        yield
    finally:
        with _conversion_lock:
            _conversion_depth -= 1
            if _conversion_depth == 0:
                _restore_numpy()


# np.random's functions drawing from the global generator: the traced function's own code
# calling one would draw once, while tracing, and return those numbers at every call.
_RANDOM = {name: getattr(np.random, name) for name in dir(np.random)
           if not name.startswith("_") and name not in ("seed", "get_state", "set_state")
           and isinstance(getattr(getattr(np.random, name), "__self__", None),
                          np.random.RandomState)}
# A generator made without a seed draws other numbers at every call of the function too.
_RANDOM["default_rng"] = np.random.default_rng


# Python's own random numbers and clocks: read once, while tracing, they would be the same
# at every call (names imported from the modules, ``from random import random``, are not
# replaced).
_PYTHON_READINGS = (
    (random, {name: getattr(random, name) for name in dir(random)
              if not name.startswith("_") and name not in ("seed", "getstate", "setstate")
              and getattr(getattr(random, name), "__self__", None) is getattr(
                  random, "_inst", None)}),
    (time, {name: getattr(time, name) for name in (
        "time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns",
        "process_time", "process_time_ns", "thread_time", "thread_time_ns")
        if hasattr(time, name)}),
)

# numpy.polynomial's evaluations test ``isinstance(x, np.ndarray)`` before giving each
# column of 2-d coefficients its own polynomial (``tensor=True``): true of the array a
# traced value stands for, false of the traced value itself.
_POLYNOMIAL_VALUES = tuple(
    (module, name, getattr(module, name)) for module, name in (
        (np.polynomial.polynomial, "polyval"), (np.polynomial.chebyshev, "chebval"),
        (np.polynomial.legendre, "legval"), (np.polynomial.hermite, "hermval"),
        (np.polynomial.hermite_e, "hermeval"), (np.polynomial.laguerre, "lagval")))

_VECTORIZE_CALL = np.vectorize.__call__
_ISSCALAR = np.isscalar
_ITERABLE = np.iterable
_BROADCAST = np.broadcast
_R, _C = np.r_, np.c_


def _restore_numpy() -> None:
    """numpy's own attributes again, in place of the wrappers of ``_converting_tracers``."""
    for name, original in _WRAPPED.items():
        setattr(np, name, original)
    for name, original in _LIST_DATA_LINALG.items():
        setattr(np.linalg, name, original)
    for name, original in _RANDOM.items():
        setattr(np.random, name, original)
    for module, functions in _PYTHON_READINGS:
        for name, original in functions.items():
            setattr(module, name, original)
    for module, name, original in _POLYNOMIAL_VALUES:
        setattr(module, name, original)
    np.vectorize.__call__ = _VECTORIZE_CALL  # type: ignore[method-assign]
    np.isscalar = _ISSCALAR
    np.iterable = _ITERABLE
    np.broadcast = _BROADCAST  # type: ignore[misc]
    np.r_, np.c_ = _R, _C  # type: ignore[misc]


def _after_fork_in_child() -> None:
    """A child forked while another thread traced (or was replacing numpy's attributes):
    numpy's own attributes again (the tracing thread is not there to restore them)."""
    global _conversion_depth, _conversion_lock
    _restore_numpy()
    _conversion_depth, _conversion_lock = 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _isscalar(element: Any) -> bool:
    """``np.isscalar``: a traced numpy scalar or Python number is one, an array is not."""
    if isinstance(element, Tracer):
        return element.node.ndim == 0 and (element.node.scalar or element.node.weak)
    return _ISSCALAR(element)


def _iterable(y: Any) -> bool:
    """``np.iterable``: an array of one dimension or more is iterable (its length need not
    be known: numpy's own test, ``iter(y)``, asked for it and took the error for "not
    iterable"), a 0-d array, a numpy scalar or a Python number is not."""
    if isinstance(y, Tracer):
        return y.node.ndim > 0
    return bool(_ITERABLE(y))


def _tensor_values(original: Callable[..., Any]) -> Callable[..., Any]:
    """numpy.polynomial's ``polyval`` & co. taking a traced array ``x`` for the array it
    stands for (numpy's ``isinstance(x, np.ndarray)``): 2-d coefficients reshaped as numpy
    reshapes them for an array ``x`` (``tensor=True``), then evaluated with ``tensor=False``."""
    @functools.wraps(original)
    def values(x: Any, c: Any, tensor: bool = True) -> Any:
        if tensor and isinstance(x, Tracer) and not x.node.scalar and not x.node.weak:
            if not isinstance(c, Tracer):
                c = np.array(c, ndmin=1, copy=None)
            if c.ndim:
                return original(x, c.reshape(c.shape + (1,) * x.ndim), tensor=False)
        return original(x, c, tensor)
    return values


class _TracedBroadcast:
    """``np.broadcast(...)`` of traced values: its shape and counts, which tracing knows;
    its iterators would hand out values, which it does not."""

    __slots__ = ("numiter", "shape")

    def __init__(self, shape: tuple[int, ...], numiter: int) -> None:
        self.shape, self.numiter = shape, numiter

    @property
    def ndim(self) -> int:
        return len(self.shape)

    nd = ndim

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def index(self) -> int:
        return 0

    def reset(self) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        raise UnsupportedOperationError(
            "iterating over np.broadcast(...) of traced values",
            "its elements are not known while the function is traced; use "
            "np.broadcast_arrays(...) for the broadcast arrays.")

    iters = property(__iter__)


class _Concatenator:
    """``np.r_[...]`` and ``np.c_[...]`` (``columns``) of traced values: numpy's joining of
    the items (numbers made 1-d, weak in the result's dtype; for ``np.c_``, 1-d items made
    columns) as ``np.concatenate``; slices and string directives need numpy's own."""

    __slots__ = ("columns", "original")

    def __init__(self, original: Any, columns: bool) -> None:
        self.original, self.columns = original, columns

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        if not has_tracer(items):
            return self.original[key]
        if any(isinstance(item, (slice, str)) for item in items):
            raise UnsupportedOperationError(
                f"np.{'c_' if self.columns else 'r_'}[...] of traced values with slices or "
                "string directives",
                "join the values with np.concatenate, np.stack or np.column_stack.")
        dtype = np.result_type(*items)
        parts = []
        for item in items:
            # (a number made an array of the result's dtype: numpy's OverflowError for an
            # int out of its range, a traced Python number's at each call)
            if isinstance(item, Tracer):
                part = np.atleast_1d(np.asarray(item, dtype=dtype) if item.node.weak
                                     else item)
            else:
                part = np.array(item, dtype=dtype, ndmin=1)
            if self.columns:
                part = part[:, np.newaxis] if np.ndim(part) == 1 else part
            parts.append(part)
        return np.concatenate(parts, axis=-1 if self.columns else 0, dtype=dtype)


_ROWS, _COLUMNS = _Concatenator(_R, False), _Concatenator(_C, True)


def _broadcast(*args: Any) -> Any:
    """``np.broadcast``: of traced values, an object with the broadcast ``shape``, ``ndim``,
    ``size`` and ``numiter``."""
    if not has_tracer(args):
        return _BROADCAST(*args)
    shapes = [value._sizes("np.broadcast of a traced array") if isinstance(value, Tracer)
              else value.shape if isinstance(value, (_TracedBroadcast, _BROADCAST))
              else np.shape(value) for value in args]
    count = sum(value.numiter if isinstance(value, (_TracedBroadcast, _BROADCAST)) else 1
                for value in args)
    return _TracedBroadcast(np.broadcast_shapes(*shapes), count)


def _vectorized_call(self: np.vectorize, *args: Any, **kwargs: Any) -> Any:
    """``np.vectorize(f)(x)`` on traced values: ``f`` applied to the whole arrays where
    that is numpy's result (``_vectorized_whole``), else numpy's vectorize called when the
    function runs."""
    if not has_tracer((args, tuple(kwargs.values()))):
        return _VECTORIZE_CALL(self, *args, **kwargs)
    if self.signature is None and not self.excluded and not kwargs:
        whole = _vectorized_whole(self, args)
        if whole is not None:
            return whole
    return record_call(_VECTORIZE_CALL, "vectorize", (self, *args), kwargs, unlisted=True)


# Operations on Python floats that raise (ZeroDivisionError, OverflowError), give another
# type (a complex power of a negative number) or another value (``~`` of a bool) where
# numpy's operation on the array does not.
_PYTHON_DIFFERS = frozenset({
    "power", "float_power", "square", "reciprocal", "floor_divide", "remainder", "fmod",
    "divmod", "invert", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
    "right_shift"})


def _vectorized_whole(self: np.vectorize, args: tuple[Any, ...]) -> Any:
    """``f`` applied to the whole arrays, or None where that may differ from numpy's
    per-element calls: numpy calls ``f`` on Python numbers (of float64 arrays only are
    they the arrays' values: ints are unbounded, a float32 element is computed in float64,
    Python's complex product rounds otherwise than numpy's loop), so ``f`` must do
    elementwise work only, without Python control flow on its element, that Python's
    numbers do as numpy's do (no division by what may be 0, no power: Python raises), and
    its results must be floats (an int ``otypes`` makes numpy raise for a NaN).  Like
    numpy, the operands are arrays first (Python numbers become strong), and the results
    are arrays of the broadcast shape (``otypes`` cast them)."""
    operands: list[Any] = [
        np.asanyarray(value) if isinstance(value, Tracer)
        else Tracer(const_node(np.asanyarray(value)), owned=True) for value in args]
    if any(operand.node.dtype not in _PYTHON_FLOATS for operand in operands) or any(
            np.dtype(otype).kind not in "fc" for otype in self.otypes or ()):
        return None  # (numpy's cast of a float NaN to an int otype raises)
    if _asks_types(getattr(self.pyfunc, "__code__", None)):
        return None  # isinstance(v, float): numpy's elements are Python numbers
    sources = {operand.node for operand in operands}
    noted = raised_while_tracing.get()
    before = len(noted) if noted is not None else 0
    try:
        results = self.pyfunc(*operands)
    except Exception:  # it branches on its element (v if v > 0 else -v), or does what
        # only a Python float can (round(v, 1), v.is_integer()): numpy's vectorize runs it
        if noted is not None:
            del noted[before:]
        return None
    items = list(results) if isinstance(results, tuple) else [results]
    target = broadcast_shapes(*(operand.node.shape for operand in operands))
    done = []
    for position, item in enumerate(items):
        if not isinstance(item, Tracer) or not _elementwise_from(item.node, sources):
            if isinstance(item, Tracer) or not np.isscalar(item):
                return None  # more than elementwise work (v * v.sum())
            item = Tracer(const_node(np.asarray(item)), owned=True)
        elif not _as_python_computes(item.node, sources):
            return None
        if self.otypes:
            item = item.astype(np.dtype(self.otypes[position]))
        if item.node.shape != target:
            item = np.broadcast_to(item, np.broadcast_shapes(
                *(np.shape(operand) for operand in operands))).copy()
        done.append(np.asarray(item) if item.node.ndim == 0 else item)
    return tuple(done) if isinstance(results, tuple) else done[0]


_PYTHON_FLOATS = (np.dtype(np.float64),)


def _as_python_computes(node: Node, sources: set[Node]) -> bool:
    """Whether the elementwise work computing ``node`` from ``sources`` gives, on Python
    floats, what numpy's loops give on the arrays (see ``_PYTHON_DIFFERS``; a division
    only by a constant other than 0; nothing in a float narrower than float64, which a
    Python float beside it would not widen: ``a * np.float32(3.1)`` is float32 there;
    nothing complex: Python's complex product, quotient and ``abs`` round otherwise than
    numpy's loops)."""
    return all(item.op not in _PYTHON_DIFFERS and (
        item.op != "true_divide" or (item.inputs[1].kind == CONST and bool(
            np.all(np.asarray(item.inputs[1].value.value) != 0)))) and
        not any(_narrow(value) or value.dtype.kind == "c" for value in (item, *item.inputs))
        for item in _work_between(node, sources))


# Names whose use tells a function's element is asked for its Python type.
_TYPE_QUESTIONS = frozenset({"isinstance", "type", "issubclass"})


def _asks_types(code: Any) -> bool:
    """Whether the code object ``code`` (or one nested in it) names ``isinstance`` or
    ``type``: given a Python float by numpy's vectorize, and a traced array by the
    whole-array path, such a function may take another branch."""
    if not isinstance(code, types.CodeType):
        return False
    return bool(_TYPE_QUESTIONS.intersection(code.co_names)) or any(
        _asks_types(constant) for constant in code.co_consts)


def _narrow(node: Node) -> bool:
    """A strong float or complex value narrower than float64 (float32, float16,
    complex64)."""
    return not node.weak and node.dtype.kind in "fc" and \
        node.dtype.itemsize < (16 if node.dtype.kind == "c" else 8)


def _elementwise_from(node: Node, sources: set[Node]) -> bool:
    """Whether ``node`` is computed from ``sources`` by elementwise work and constants only."""
    return all(item.kind == ELEMENTWISE for item in _work_between(node, sources))


def _work_between(node: Node, sources: set[Node]) -> Iterator[Node]:
    """The nodes computing ``node`` from ``sources`` and constants (``node`` first),
    walked back as far as elementwise work goes (a node of another kind is the last
    given on its path)."""
    seen: set[Node] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if item in seen or item in sources or item.kind == CONST:
            continue
        seen.add(item)
        yield item
        if item.kind == ELEMENTWISE:
            stack.extend(item.inputs)


def _random_draw(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def draw(*args: Any, **kwargs: Any) -> Any:
        seed = args[0] if args else kwargs.get("seed")
        if _from_user_code(name) and (name != "default_rng" or seed is None):
            raise UnsupportedOperationError(
                f"np.random.{name} inside a traced function",
                "numfuse traces the function once, so the numbers drawn then would come back "
                "at every call; draw them outside and pass them as an argument.")
        return original(*args, **kwargs)

    return functools.wraps(original)(draw)


def _python_reading(module: str, name: str, original: Callable[..., Any]
                    ) -> Callable[..., Any]:
    def read(*args: Any, **kwargs: Any) -> Any:
        if _from_user_code(name):
            what = "numbers drawn" if module == "random" else "clock read"
            raise UnsupportedOperationError(
                f"{module}.{name}() inside a traced function",
                f"numfuse traces the function once, so the {what} then would come back "
                "at every call: numpy runs this function as written; to fuse it, call "
                f"{module}.{name}() outside and pass the value as an argument.")
        return original(*args, **kwargs)

    return functools.wraps(original)(read)


def _converter(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def convert(*args: Any, **kwargs: Any) -> Any:
        obj = args[0] if args else None
        if isinstance(obj, _Flat):  # np.array(x.flat): x's items, flattened
            obj = obj.array.ravel()
            args = (obj, *args[1:])
        if isinstance(obj, Tracer) and name in ("asarray_chkfinite", "require"):
            return _checked_array(name, original, obj, *args[1:], **kwargs)
        if isinstance(obj, Tracer):
            return _as_array(name, original, obj, args[1:], kwargs)
        if isinstance(obj, (tuple, list)) and has_tracer(obj):  # np.array([x, y])
            if _constants_only(args, kwargs):
                return _eager(original, args, kwargs)
            return record_call(original, name, args, kwargs)
        result = original(*args, **kwargs)
        return _wrapped(result, []) if _from_user_code(name) else result

    return functools.wraps(original)(convert)


class _ListTaker:
    """``original`` (see ``_LIST_DATA``), each of its arguments that is a list or tuple
    holding traced values made an array first (data: ``np.clip(x, [lo, 0.0], hi)``,
    ``np.lexsort([a, b])``).  It compares and hashes as ``original``, so that a
    dict keyed by numpy's functions finds it (``is`` still tells them apart)."""

    def __init__(self, original: Callable[..., Any]) -> None:
        self.original = original
        functools.update_wrapper(self, original)  # type: ignore[arg-type]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if any(map(_traced_list, args)) or any(map(_traced_list, kwargs.values())):
            args = tuple(map(_traced_array, args))
            kwargs = {name: _traced_array(value) for name, value in kwargs.items()}
        return self.original(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return other is self or other is self.original or (
            isinstance(other, _ListTaker) and other.original is self.original)

    def __hash__(self) -> int:
        return hash(self.original)

    def __repr__(self) -> str:
        return repr(self.original)


def _traced_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and has_tracer(value)


def _traced_array(value: Any) -> Any:
    """A list or tuple holding traced values as a traced array (``np.array``), else
    ``value``."""
    return _converter("array", _CONVERSIONS["array"])(value) if _traced_list(value) \
        else value


def _list_taker(original: Callable[..., Any]) -> Callable[..., Any]:
    return _ListTaker(original)


# The parameters of the creation functions that are data, which may be traced (a fill
# value, the prototype of ``zeros_like``, the ends of ``linspace``); every other one (a
# size, a shape, ``arange``'s numbers, ``eye``'s diagonal) is needed as a Python value.
_DATA_PARAMETERS = {
    "full": ("fill_value",), "full_like": ("a", "fill_value"), "zeros_like": ("a",),
    "ones_like": ("a",), "empty_like": ("prototype",), "linspace": ("start", "stop"),
    "logspace": ("start", "stop", "base"), "geomspace": ("start", "stop"),
}
_CREATION_SIGNATURES = {name: inspect.signature(function)
                        for name, function in _CREATIONS.items()}


def _check_sizes(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise what a traced size or shape given to ``np.<name>`` calls for: the
    ``StaticArgumentError`` naming the scalar arguments it comes from (``jit`` then passes
    them as Python values, compiling once per value), else a ``ConcretizationError``.
    numpy itself would turn the error of ``operator.index`` into its own TypeError."""
    try:
        bound = _CREATION_SIGNATURES[name].bind(*args, **kwargs)
    except TypeError:  # numpy's own error, raised by the call
        return
    for parameter, value in bound.arguments.items():
        if parameter in _DATA_PARAMETERS.get(name, ()):
            continue
        for tracer in tracers_in(value):
            if tracer.node.kind == CONST:  # its value is known
                continue
            operation = f"np.{name}({parameter}=...) given a traced value"
            arguments = _scalar_arguments(tracer.node)
            if arguments:
                raise StaticArgumentError(operation, _advice_for(operation), arguments)
            raise ConcretizationError(operation, (
                f"the {parameter} of an array numfuse makes must be known when it traces "
                "the function: pass it as a Python int argument or list it in "
                "static_argnums (numfuse compiles once per value), or take it from an "
                "argument's shape (x.shape[0], len(x)); for a "
                "size that depends on the values, select with a mask (x[mask]) or keep the "
                "full size and use np.where."))


def _creator(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    zeros: Callable[..., Any] = _CREATIONS.get(
        {"empty": "zeros", "empty_like": "zeros_like"}.get(name, name), original)

    def create(*args: Any, **kwargs: Any) -> Any:
        if has_tracer((args, tuple(kwargs.values()))):
            _check_sizes(name, args, kwargs)
        if name in ("full", "full_like") and has_tracer((args, tuple(kwargs.values()))):
            if _constants_only(args, kwargs):
                return _eager(original, args, kwargs)
            return record_call(original, name, args, kwargs)  # a traced fill value
        if not _from_user_code(name):
            return original(*args, **kwargs)
        made = zeros(*args, **kwargs)
        if isinstance(made, np.ndarray) and made.nbytes >= _MADE_AT_EACH_CALL and \
                name in _FILLED and made.dtype.kind in "biufc":
            # a large array of one value: made at each call, as numpy does, not kept as a
            # constant of the program (copied at each call when written into)
            return record_call(original, name, args, kwargs)
        return _wrapped(made, [])

    return functools.wraps(original)(create)


# Arrays of one value at least this large (bytes) are made by numpy at each call.
_MADE_AT_EACH_CALL = 1 << 16
_FILLED = frozenset({"zeros", "ones", "empty", "full"})


def _own_globals(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """The globals of the module ``fn`` was written in, whose calls of ``np.zeros`` & co.
    make constants; None for numpy's and numfuse's own functions (``jit(np.sinc)``), whose
    internal calls must get numpy's arrays."""
    function = inspect.unwrap(fn)
    module = getattr(function, "__module__", None) or ""
    if module.split(".")[0] in ("numpy", "numfuse"):
        return None
    return getattr(function, "__globals__", None)


def _from_user_code(name: str) -> bool:
    """Whether the numpy function ``name`` being wrapped was called by the traced
    function's module (not by numpy or numfuse internals, nor by another thread) itself:
    compiled code it calls (``rng.random(4)`` runs Cython that calls ``np.empty``) makes no
    Python frame, so the statement running in the caller's frame must name ``name``."""
    user = _user_globals.get()
    if user is None:
        return False
    frame = sys._getframe(2)
    return frame.f_globals is user and name in _names_before(frame.f_code, frame.f_lasti)


@functools.lru_cache(maxsize=4096)
def _names_before(code: types.CodeType, offset: int) -> frozenset[str]:
    """The names the call running at ``offset`` of ``code`` loads up to there: those of
    the instructions within its source span (``np.ones(2 if flag else 3)``, whose
    conditional jumps inside), or, without source positions, those of its statement."""
    before = [item for item in dis.get_instructions(code) if item.offset <= offset]
    # (positions: Python 3.11 on; the offset may be a cache entry's, after the call's)
    span = getattr(before[-1], "positions", None) if before else None
    if span is not None and None not in (span.lineno, span.end_lineno, span.col_offset,
                                         span.end_col_offset):
        start, end = (span.lineno, span.col_offset), (span.end_lineno, span.end_col_offset)
        return frozenset(
            item.argval for item in before
            if item.opname.startswith("LOAD_") and isinstance(item.argval, str)
            and (where := getattr(item, "positions", None)) is not None
            and where.lineno is not None
            and start <= (where.lineno, where.col_offset or 0)
            and (where.end_lineno or where.lineno, where.end_col_offset or 0) <= end)
    names: set[str] = set()
    for instruction in reversed(before):
        if instruction.offset < offset and instruction.opname.startswith(_STATEMENT_ENDS):
            break
        if instruction.opname.startswith("LOAD_") and isinstance(instruction.argval, str):
            names.add(instruction.argval)
    return frozenset(names)


_STATEMENT_ENDS = ("STORE_", "POP_TOP", "RETURN_", "JUMP", "POP_JUMP")


# Imported last: these modules and this one use each other's functions at call time.
from .constants import _as_array, _checked_array, _constants_only, _eager, _wrapped  # noqa: E402
from .probes import record_call  # noqa: E402
from .tracer import Tracer, _Flat, _scalar_arguments, has_tracer, tracers_in  # noqa: E402
