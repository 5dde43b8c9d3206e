"""Non-fusible numpy operations, recorded as calls and replayed by the runtime.

A ``NumpyCall`` is the static part of one call such as ``np.sum(x, axis=1)`` or
``x.reshape(-1, 3)``: the numpy function and every argument that is not traced.  The
traced arrays are the node's inputs; ``invoke`` puts their run-time values back in place
and calls numpy, so these operations have numpy's semantics by construction.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import pytree

# A traced argument's position in the flattened (args, kwargs) of a call.
TRACED = object()


class NumpyCall:
    """``fn(*args, **kwargs)`` with traced leaves replaced by run-time values."""

    __slots__ = ("_key", "args", "fn", "invoke", "kwargs", "name")

    def __init__(self, fn: Callable[..., Any], name: str, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.fn = fn
        self.name = name
        self.args = args      # with TRACED where a traced value goes, in input order
        self.kwargs = kwargs
        self._key = (fn, name, _freeze(args), _freeze(kwargs))
        self.invoke = _invoker(fn, args, kwargs)
        """``invoke(values)``: the call with the run-time values of the traced arguments
        (in order) in place; new containers at each call."""

    @property
    def arguments(self) -> tuple[Any, ...]:
        """What identifies the call's arguments but its traced values (hashable)."""
        return self._key[2:]

    def __reduce__(self) -> tuple[Any, ...]:
        return NumpyCall, (self.fn, self.name, self.args, self.kwargs)  # (its builder: made)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NumpyCall) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return self.describe(["·"] * self.count())

    def describe(self, operands: Sequence[str]) -> str:
        """The call as text, with ``operands`` in place of the traced values."""
        supply = iter(operands)
        shown = [_show(item, supply) for item in self.args]
        shown += [f"{key}={_show(item, supply)}" for key, item in self.kwargs.items()]
        return f"{self.name}({', '.join(shown)})"

    def count(self) -> int:
        """The number of traced values the call takes."""
        return sum(leaf is TRACED for leaf in pytree.leaves((self.args, self.kwargs)))


class CallOutput:
    """Item ``index`` of what ``fn`` returns (``np.frexp(x)[1]``, ``np.linalg.eigh(a)[0]``),
    as a call returning one array; a Python number comes back as a numpy scalar.  A tuple
    ``index`` is a path into nested results (``np.histogramdd(s)[1][0]``: its edges are a
    list)."""

    __slots__ = ("fn", "index")

    def __init__(self, fn: Callable[..., Any], index: int | tuple[int, ...]) -> None:
        self.fn = fn
        self.index = index

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.item(self.fn(*args, **kwargs))

    def item(self, results: Any) -> Any:
        """This item of ``results``, what ``fn`` returned."""
        value = results
        for position in self.index if isinstance(self.index, tuple) else (self.index,):
            value = value[position]
        return value if isinstance(value, (np.ndarray, np.generic)) else np.asarray(value)[()]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CallOutput) and (self.fn, self.index) == (other.fn,
                                                                            other.index)

    def __hash__(self) -> int:
        return hash((self.fn, self.index))

    def __reduce__(self) -> tuple[Any, ...]:
        return CallOutput, (self.fn, self.index)


class _Wrapped:
    """A call wrapping the numpy or Python function ``fn``: equal, hashed and pickled by
    its class and ``fn`` (calls are compared for common-subexpression elimination)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.fn == other.fn  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.fn))

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.fn,)


class Apart(_Wrapped):
    """``fn(a, b, ...)``, a matrix product of operands the function computed apart, given
    apart: where they share memory (common-subexpression elimination made one array of
    two equal computations), ``b`` is copied, layout kept, as numpy had two arrays — so
    it multiplies them as numpy did (``x @ x.T`` of one array takes BLAS's symmetric
    product, whose last bits differ)."""

    __slots__ = ()

    def __call__(self, a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and \
                np.may_share_memory(a, b):
            b = b.copy(order="K")
        return self.fn(a, b, *args, **kwargs)


class PythonNumber(_Wrapped):
    """``fn`` returning a Python number (``np.allclose`` gives a bool), as a 0-d array."""

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        return np.asarray(self.fn(*args, **kwargs))


class PythonComplexOperator(_Wrapped):
    """``fn(left, right)`` for a Python complex ``left`` and a numpy float64 scalar
    ``right``: numpy float64 subclasses Python float, so Python's own complex arithmetic
    runs (``1j * np.float64(2)`` is a Python complex, ``1j / np.float64(0)`` raises
    ``ZeroDivisionError``).  The result comes back as a 0-d array."""

    __slots__ = ()

    def __call__(self, left: Any, right: Any) -> np.ndarray:
        return np.asarray(self.fn(complex(left), np.float64(right)))


class Written(_Wrapped):
    """``fn(x, ...)`` that writes into ``x`` (``x[key] = v``, ``np.add.at``, ``np.put``,
    ``np.copyto``, ``np.fill_diagonal``): applied to a copy of ``x``, which it returns, so
    the traced function's arrays are written as numpy would and arguments never are."""

    __slots__ = ()

    def __call__(self, array: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        result = np.array(array, copy=True, subok=False)
        self.fn(result, *args, **kwargs)
        return result


def setitem_scalar(array: np.ndarray, key: Any, value: Any) -> None:
    """``array[key] = value`` for a ``value`` that is a numpy scalar in the function as
    written and comes to the program as a 0-d array: given as the scalar, so numpy
    converts it as it would (a float64 one as a Python float: NaN or a value beyond an
    integer dtype raises, where a 0-d array would be cast)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    array[key] = value


def _cast(value: Any, dtype: np.dtype) -> np.ndarray:
    """``value`` as an array of ``dtype``, cast as numpy's ufunc casts it: a Python float
    (weak) converts warning of overflow only, never of underflow."""
    if type(value) in (float, complex):
        with np.errstate(under="ignore"):
            return np.asarray(value).astype(dtype, copy=False)
    return np.asarray(value).astype(dtype, copy=False)


class ElementwiseCall:
    """One elementwise operation that no kernel computes (float16 has no kernel type): the
    operands are cast to the loop dtypes numfuse resolved, as numpy's loop casts them, and
    numpy computes it (``reference`` is the op's numpy callable)."""

    __slots__ = ("loop", "name", "out", "reference", "scalar")

    def __init__(self, name: str, reference: Callable[..., Any], loop: Sequence[np.dtype],
                 out: np.dtype, scalar: bool) -> None:
        self.name = name
        self.reference = reference
        self.loop = tuple(loop)
        self.out = out
        self.scalar = scalar

    def __call__(self, *values: Any) -> Any:
        operands = [_cast(value, dtype) for value, dtype in zip(values, self.loop, strict=False)]
        if self.name == "astype":
            result = operands[0].astype(self.out, copy=True)
        else:
            result = np.array(self.reference(*operands), dtype=self.out,
                              copy=True if self.name in ("real", "imag") else None)
        return result[()] if self.scalar and result.ndim == 0 else result

    def _key(self) -> tuple[Any, ...]:
        return (self.name, self.loop, self.out, self.scalar)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ElementwiseCall) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[Any, ...]:
        return ElementwiseCall, (self.name, self.reference, self.loop, self.out, self.scalar)


def is_elementwise_call(node: Any) -> bool:
    """Whether graph node ``node`` is elementwise work numpy computes (an
    ``ElementwiseCall``: float16), whose sizes are the broadcast of its operands'."""
    return isinstance(getattr(node.call, "fn", None), ElementwiseCall)


def _show(item: Any, supply: Any) -> str:
    if item is TRACED:
        return str(next(supply))
    if isinstance(item, tuple):
        inner = ", ".join(_show(part, supply) for part in item)
        return f"({inner}{',' if len(item) == 1 else ''})"
    if isinstance(item, list):
        return "[" + ", ".join(_show(part, supply) for part in item) + "]"
    if isinstance(item, slice):
        parts = ["" if part is None else str(part) for part in (item.start, item.stop, item.step)]
        return ":".join(parts).rstrip(":") or ":"
    if item is Ellipsis:
        return "..."
    name = getattr(item, "__name__", None)
    return name if isinstance(name, str) else repr(item)


def _invoker(fn: Callable[..., Any], args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Callable[[Sequence[Any]], Any]:
    """``fn(*args, **kwargs)`` as one expression of the traced values, ``values``: the
    containers around them are made by the expression (a call of a few microseconds, such
    as ``np.concatenate([a, b])`` in a loop of small steps, was mostly their making)."""
    leaves, treedef = pytree.flatten((args, kwargs))
    if len(leaves) <= pytree.EXPRESSION_LEAVES:
        made = _expression_invoker(fn, leaves, treedef)
        if made is not None:
            return made
    slots = [position for position, leaf in enumerate(leaves) if leaf is TRACED]
    build = pytree.builder(treedef)

    def invoke(values: Sequence[Any]) -> Any:
        filled = list(leaves)
        for position, value in zip(slots, values, strict=True):
            filled[position] = value
        args, kwargs = build(filled)
        return fn(*args, **kwargs)
    return invoke


def _expression_invoker(fn: Callable[..., Any], leaves: list[Any],
                        treedef: Any) -> Callable[[Sequence[Any]], Any] | None:
    """The call as one compiled expression (None: beyond the parser's nesting)."""
    names: dict[str, Any] = {"_fn": fn}
    traced = itertools.count()

    def text(leaf: Any) -> str:
        if leaf is TRACED:
            return f"values[{next(traced)}]"
        name = f"_v{len(names)}"
        names[name] = leaf
        return name

    texts = (text(leaf) for leaf in leaves)
    _tuple, (args_def, kwargs_def) = treedef
    positional = pytree.expression(args_def, texts, names)
    keywords = pytree.expression(kwargs_def, texts, names)
    return pytree.compiled("values", f"_fn(*{positional}, **{keywords})", names)


def _freeze(item: Any) -> Any:
    """A hashable stand-in for a call's static arguments (for CSE)."""
    if item is TRACED:
        return ("<traced>",)
    if isinstance(item, (tuple, list)):
        return (type(item).__name__, tuple(_freeze(part) for part in item))
    if isinstance(item, dict):
        return ("dict", tuple((key, _freeze(value)) for key, value in item.items()))
    if isinstance(item, slice):
        return ("slice", item.start, item.stop, item.step)
    if isinstance(item, (np.ndarray, np.generic)):
        return ("array", str(item.dtype), item.shape, item.tobytes())
    try:
        hash(item)
    except TypeError:
        return ("repr", type(item).__name__, repr(item))
    return (type(item).__name__, item)
