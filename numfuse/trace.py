"""Tracing: run the user's function once on ``Tracer`` values and record a ``Graph``.

Tracers intercept Python operators, numpy ufuncs (``__array_ufunc__``) and the numpy
functions numfuse supports (``__array_function__``).  Python code runs once: loops unroll
and helper functions inline.  Whatever does not involve a tracer is computed by numpy at
trace time, so constant subexpressions are exact numpy values.

Constants: arrays, numpy scalars, lists and Python numbers the function uses become
constants of the graph, *snapshotted when the function is traced*.  A closed-over array
that is mutated afterwards keeps its traced value in the compiled function; pass it as an
argument to see changes.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import dis
import functools
import inspect
import itertools
import math
import operator
import os
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from . import reductions
from .calls import (
    TRACED,
    CallOutput,
    ElementwiseCall,
    NumpyCall,
    PythonComplexOperator,
    PythonNumber,
    Written,
    is_elementwise_call,
)
from .dtypes import KERNEL_DTYPES, ArgSpec, check_dtype, weak_python_type
from .errors import (
    ConcretizationError,
    SizeDependentError,
    StaticArgumentError,
    UnsupportedOperationError,
)
from .graph import (
    CONST,
    ELEMENTWISE,
    INPUT,
    NUMPY,
    Const,
    Graph,
    Node,
    Shape,
    broadcast_shapes,
    shape_text,
    toposort,
    tree_flatten,
)
from .ops import BY_UFUNC, MULTI_OUTPUT, OPS, DtypeOrWeak, OpDef, evaluate, template_for

_COMPARISONS = frozenset({"equal", "not_equal", "less", "less_equal", "greater",
                          "greater_equal"})


def input_node(index: int, spec: ArgSpec) -> Node:
    shape: Shape = spec.sizes if spec.sizes is not None else \
        tuple(1 if one else None for one in spec.ones)
    return Node("arg", INPUT, (), spec.dtype, shape, (("index", index),),
                weak=spec.kind == "weak" and spec.dtype.kind != "b",
                scalar=spec.kind != "array")


def const_node(value: Any) -> Node:
    """A graph constant for a Python number, numpy scalar, list or array."""
    weak = weak_python_type(value)
    if weak is not None:
        if weak is int and not -(2**63) <= value < 2**64:
            raise OverflowError(f"Python integer {value} is too large for any numpy dtype")
        dtype = np.dtype(bool) if weak is bool else np.asarray(weak(0)).dtype
        return Node("const", CONST, (), dtype, (), (("value", Const(weak(value))),),
                    weak=weak is not bool, scalar=True)
    if isinstance(value, np.generic):
        check_dtype(value.dtype, "constant")
        return Node("const", CONST, (), value.dtype, (), (("value", Const(value)),),
                    scalar=True)
    array = np.asarray(value)
    check_dtype(array.dtype, f"constant {type(value).__name__}")
    array = array.astype(array.dtype.newbyteorder("="), copy=False)
    return Node("const", CONST, (), array.dtype, array.shape, (("value", Const(array)),))


def _operand_type(node: Node) -> DtypeOrWeak:
    if node.weak:
        return {np.dtype(np.int64): int, np.dtype(np.float64): float,
                np.dtype(np.complex128): complex}.get(node.dtype, node.dtype)
    return node.dtype


def _sample(node: Node) -> Any:
    """A value numpy can use to check an operation: the constant itself, or a 0-d one."""
    if node.kind == CONST and node.ndim == 0:
        return node.param("value").value
    operand = _operand_type(node)
    if isinstance(operand, type):  # a weak Python scalar (bool nodes keep their dtype)
        return operand(1)
    return np.ones((), operand)


def _fits(value: int, dtype: np.dtype) -> bool:
    info = np.iinfo(dtype)
    return bool(info.min <= value <= info.max)


def _widen_comparison(op: OpDef, operands: Sequence[Node],
                      loop: tuple[np.dtype, ...]) -> tuple[np.dtype, ...]:
    """numpy compares an integer array with an out-of-range Python int exactly; widen the
    loop to 64 bits (mixed signed/unsigned loops are exact) so the constant fits."""
    if op.name not in _COMPARISONS:
        return loop
    widened = list(loop)
    for position, node in enumerate(operands):
        if not (node.weak and node.dtype.kind == "i") or loop[position].kind not in "iu":
            continue
        if node.kind == CONST:
            value = node.param("value").value
            if _fits(value, loop[position]):
                continue
            widened[position] = np.dtype(np.int64) if value < 2**63 else np.dtype(np.uint64)
        else:  # a Python int argument: its value is only known at call time
            widened[position] = np.dtype(np.int64)
        for other, dtype in enumerate(loop):
            if other != position:
                widened[other] = np.dtype(np.uint64 if dtype.kind == "u" else np.int64)
    return tuple(widened)


def elementwise(op: OpDef, operands: Sequence[Node], *, out_dtype: Any = None,
                loop: tuple[tuple[np.dtype, ...], np.dtype] | None = None,
                weak: bool = False, scalar: bool = True) -> Node:
    """Build one elementwise node with numpy's dtype resolution and broadcasting."""
    types = [_operand_type(node) for node in operands]
    if loop is None:
        if any(node.weak and node.kind == CONST for node in operands) or op.resolve is None:
            with np.errstate(all="ignore"):
                _check_with_numpy(op, operands, out_dtype)
        if out_dtype is not None:
            ufunc = op.reference
            assert isinstance(ufunc, np.ufunc)
            signature = (None,) * ufunc.nin + (np.dtype(out_dtype),) * ufunc.nout
            resolved = ufunc.resolve_dtypes(tuple(types) + (None,) * ufunc.nout,
                                            signature=signature)
            loop = (tuple(resolved[: len(operands)]), resolved[len(operands)])
        else:
            loop = op.loop_dtypes(types)
            if any(dtype.kind == "O" for dtype in (*loop[0], loop[1])):
                # Python ints among themselves resolve to object loops; use int64 like
                # numpy does once they are arrays.
                loop = op.loop_dtypes([node.dtype for node in operands])
    loop_in, out = loop
    loop_in = _widen_comparison(op, operands, loop_in)
    if op.name == "power" and _is_const(operands[1], 0.5) and loop_in[0].kind == "f":
        op = OPS["sqrt"]  # numpy's power loop takes sqrt for a scalar exponent of 0.5
        operands, loop_in = operands[:1], loop_in[:1]
    for dtype in (*loop_in, out):
        if dtype.kind == "O":
            raise UnsupportedOperationError(
                f"np.{op.name} on {', '.join(str(t) for t in types)} needs an object loop",
                "numfuse compiles numeric dtypes only; convert the operands with np.asarray.",
            )
    half = any(dtype not in KERNEL_DTYPES for dtype in (*loop_in, out)) or any(
        node.dtype not in KERNEL_DTYPES and not node.weak for node in operands)
    if not half and template_for(op, loop_in) is None:
        raise NoKernelCodeError(
            f"np.{op.name} on dtypes {', '.join(str(t) for t in loop_in)}",
            "numfuse has no kernel code for this dtype combination; cast the operands "
            "(e.g. .astype(np.float64)) or compute this part outside the jitted function.",
        )
    shape = broadcast_shapes(*(node.shape for node in operands))
    if operands and out_dtype is None and all(node.kind == CONST for node in operands):
        # constants only (np.arange(5) * 2): numpy's value now, as it would compute it
        value = evaluate(op.name, out, [node.param("value").value for node in operands])
        if weak:
            value = np.asarray(value).item()
        elif not scalar or shape:
            value = np.asarray(value)
        return Node("const", CONST, (), out, np.shape(value), (("value", Const(value)),),
                    weak=weak, scalar=scalar)
    if half:  # float16: numpy computes it (no kernel type), with the same loop dtypes
        call = NumpyCall(ElementwiseCall(op.name, op.reference, loop_in, out, scalar),
                         op.name, (TRACED,) * len(operands), {})
        return Node(op.name, NUMPY, tuple(operands), out, shape, (("call", call),),
                    weak=weak, scalar=scalar)
    params = (("loop", tuple(loop_in)),)
    return Node(op.name, ELEMENTWISE, tuple(operands), out, shape, params,
                weak=weak, scalar=scalar)


class NoKernelCodeError(UnsupportedOperationError):
    """An op table row has no scalar code for these loop dtypes."""


def _is_const(node: Node, value: float) -> bool:
    if node.kind != CONST or node.ndim != 0:
        return False
    constant = node.param("value").value
    return type(constant) is float and constant == value


def _check_with_numpy(op: OpDef, operands: Sequence[Node], out_dtype: Any) -> None:
    """Let numpy raise what it would raise (OverflowError for out-of-range Python ints,
    UFuncTypeError for missing loops, ValueError for negative integer powers)."""
    samples = [_sample(node) for node in operands]
    kwargs = {"dtype": out_dtype} if out_dtype is not None else {}
    op.reference(*samples, **kwargs)


# ------------------------------------------------------------------------------ Tracer


def _advice_for(operation: str) -> str:
    return (
        f"{operation} needs a concrete value, but inside a numfuse function values are "
        "traced, not computed. Use np.where(cond, a, b) instead of if/else on array values, "
        "or pass the value as a static (non-array) Python argument computed outside."
    )


class Tracer:
    """A traced value: records every operation applied to it into the graph."""

    __array_priority__ = 1000
    __slots__ = ("__weakref__", "bases", "node", "owned", "views")

    def __init__(self, node: Node, owned: bool = False) -> None:
        self.node = node
        # True when this tracer stands for a fresh array (not an argument, not a view).
        # It may be written in place while no view of it is alive (``writable``).
        self.owned = owned
        self.views: list[weakref.ref[Tracer]] = []  # values that may share its memory
        self.bases: tuple[Tracer, ...] = ()  # the arrays whose memory this one may share

    @property
    def writable(self) -> bool:
        """Whether a write into this array is numpy's write: it is fresh and no value
        that may share its memory is still alive (a temporary view, as in
        ``y[1:] = y[1:] - y[:-1]``, is gone by the time of the write)."""
        return self.owned and all(view() is None for view in self.views)

    # --- static facts --------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        return self.node.dtype

    @property
    def ndim(self) -> int:
        return self.node.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        return self._sizes("x.shape of a traced array")

    @property
    def size(self) -> int:
        return int(np.prod(self._sizes("x.size of a traced array")))

    def __len__(self) -> int:
        if not self.node.ndim:
            return _concrete("len() of a 0-d traced value")
        first = self.node.shape[0]
        return first if first is not None else self._sizes("len() of a traced array")[0]

    def _sizes(self, operation: str) -> tuple[int, ...]:
        """The concrete shape, or a ``SizeDependentError`` (which makes ``jit`` retry
        with one compilation per shape)."""
        shape = self.node.shape
        if all(size is not None for size in shape):
            return tuple(size for size in shape if size is not None)
        raise SizeDependentError(
            operation,
            "array sizes are not fixed when numfuse compiles (a new size does not "
            "recompile); use x.ndim, or broadcasting, instead of reading sizes.",
        )

    def __repr__(self) -> str:
        return f"Tracer<{self.node.type_str()}>"

    # --- conversions that need a value ---------------------------------------
    def __bool__(self) -> bool:
        return _concrete("bool() of a traced value (an `if`, `while`, `and`/`or` on arrays)",
                         self.node, bool)

    def __float__(self) -> float:
        return _concrete("float() of a traced value", self.node, float)

    def __int__(self) -> int:
        return _concrete("int() of a traced value", self.node, int)

    def __index__(self) -> int:
        return _concrete("using a traced value as an index", self.node, operator.index)

    def __complex__(self) -> complex:
        return _concrete("complex() of a traced value", self.node, complex)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self.node.kind == CONST:  # a constant made in the function (np.eye(3))
            return np.array(self.node.param("value").value, dtype=dtype, copy=copy is not False)
        operation = "np.asarray()/np.array() of a traced value"
        arguments = _scalar_arguments(self.node)
        if arguments:
            raise StaticArgumentError(operation, _advice_for(operation), arguments)
        raise ConcretizationError(operation, _advice_for(operation) + (
            " Storing a traced value into a numpy array (a[...] = x) converts it too: make "
            "the array from a traced value instead (np.zeros_like(x), np.empty_like(x)); "
            "indexing a numpy array with a traced value (table[i]) too: use "
            "np.take(table, i)."))

    def __iter__(self) -> Any:
        """``a, b = x``: one item per index of a first axis whose length is known when
        tracing (a free length makes ``jit`` compile per shape)."""
        if not self.node.ndim:
            return _concrete("iterating over a 0-d traced value", self.node)
        count = self.node.shape[0]
        if count is None:
            count = self._sizes("iterating over a traced array")[0]
        return iter([self[index] for index in range(count)])

    def __hash__(self) -> int:
        return id(self)

    def tolist(self) -> Any:
        return _concrete("x.tolist() of a traced value", self.node, lambda value: value.tolist())

    def item(self, *index: Any) -> Any:
        return _concrete("x.item() of a traced value", self.node,
                         lambda value: value.item(*index))

    # --- numpy protocols ------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if _constants_only(inputs, kwargs):
            return _eager(getattr(ufunc, method) if method != "__call__" else ufunc, inputs,
                          kwargs)
        if method in ("reduce", "accumulate", "reduceat", "outer"):
            return record_call(getattr(ufunc, method), f"{ufunc.__name__}.{method}",
                               inputs, kwargs)
        if method == "at" and isinstance(self, Tracer) and inputs and inputs[0] is self:
            self._write(ufunc.at, f"{ufunc.__name__}.at", inputs[1:], {})
            return None
        if method != "__call__":
            raise UnsupportedOperationError(
                f"np.{ufunc.__name__}.{method}",
                "it writes into its operand in place; build the result with np.where or "
                "compute it outside the jitted function.",
            )
        if ufunc in LINALG_UFUNCS:
            return record_call(ufunc, ufunc.__name__, inputs, kwargs)
        return apply_ufunc(ufunc, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if _constants_only(args, kwargs):
            return _eager(func, args, kwargs)
        handler = FUNCTIONS.get(func)
        if handler is not None:
            return handler(*args, **kwargs)
        if func in CALLS or func in DATA_DEPENDENT:
            return record_call(func, CALLS.get(func) or DATA_DEPENDENT[func], args, kwargs)
        name = numpy_name(func)
        if func in WRITERS:
            if not args or not isinstance(args[0], Tracer):
                _inplace(f"np.{name} into an array the function did not make")
            args[0]._write(func, name, args[1:], kwargs)
            return None
        if func in REFUSED:
            raise UnsupportedOperationError(
                f"np.{name} is not supported by numfuse",
                f"{REFUSED[func]}; compute this part outside the jitted function.")
        return record_call(func, name, args, kwargs, unlisted=True)

    # --- operators -------------------------------------------------------------
    def __add__(self, other: Any) -> Any:
        return _operator(np.add, self, other)

    def __radd__(self, other: Any) -> Any:
        return _operator(np.add, other, self)

    def __sub__(self, other: Any) -> Any:
        return _operator(np.subtract, self, other)

    def __rsub__(self, other: Any) -> Any:
        return _operator(np.subtract, other, self)

    def __mul__(self, other: Any) -> Any:
        return _operator(np.multiply, self, other)

    def __rmul__(self, other: Any) -> Any:
        return _operator(np.multiply, other, self)

    def __truediv__(self, other: Any) -> Any:
        return _operator(np.true_divide, self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _operator(np.true_divide, other, self)

    def __floordiv__(self, other: Any) -> Any:
        return _operator(np.floor_divide, self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return _operator(np.floor_divide, other, self)

    def __mod__(self, other: Any) -> Any:
        return _operator(np.remainder, self, other)

    def __rmod__(self, other: Any) -> Any:
        return _operator(np.remainder, other, self)

    def __divmod__(self, other: Any) -> Any:
        return (_operator(np.floor_divide, self, other), _operator(np.remainder, self, other))

    def __rdivmod__(self, other: Any) -> Any:
        return (_operator(np.floor_divide, other, self), _operator(np.remainder, other, self))

    def __pow__(self, other: Any) -> Any:
        fast = _fast_power(self, other)
        return fast if fast is not None else _operator(np.power, self, other)

    def __rpow__(self, other: Any) -> Any:
        return _operator(np.power, other, self)

    def __and__(self, other: Any) -> Any:
        return _operator(np.bitwise_and, self, other)

    def __rand__(self, other: Any) -> Any:
        return _operator(np.bitwise_and, other, self)

    def __or__(self, other: Any) -> Any:
        return _operator(np.bitwise_or, self, other)

    def __ror__(self, other: Any) -> Any:
        return _operator(np.bitwise_or, other, self)

    def __xor__(self, other: Any) -> Any:
        return _operator(np.bitwise_xor, self, other)

    def __rxor__(self, other: Any) -> Any:
        return _operator(np.bitwise_xor, other, self)

    def __lshift__(self, other: Any) -> Any:
        return _operator(np.left_shift, self, other)

    def __rlshift__(self, other: Any) -> Any:
        return _operator(np.left_shift, other, self)

    def __rshift__(self, other: Any) -> Any:
        return _operator(np.right_shift, self, other)

    def __rrshift__(self, other: Any) -> Any:
        return _operator(np.right_shift, other, self)

    def __lt__(self, other: Any) -> Any:
        return _operator(np.less, self, other)

    def __le__(self, other: Any) -> Any:
        return _operator(np.less_equal, self, other)

    def __gt__(self, other: Any) -> Any:
        return _operator(np.greater, self, other)

    def __ge__(self, other: Any) -> Any:
        return _operator(np.greater_equal, self, other)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return _operator(np.equal, self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return _operator(np.not_equal, self, other)

    def __neg__(self) -> Any:
        return _operator(np.negative, self)

    def __pos__(self) -> Any:
        return _operator(np.positive, self)

    def __abs__(self) -> Any:
        return _operator(np.absolute, self)

    def __invert__(self) -> Any:
        return _operator(np.invert, self)

    def __setitem__(self, key: Any, value: Any) -> None:
        if _immutable(self.node):
            raise TypeError(f"'{_scalar_type_name(self.node)}' object does not support item "
                            "assignment")
        if not self.writable:
            _inplace("item assignment (x[...] = v)")
        if _constants_only((self, key, value), {}):
            _eager(operator.setitem, (self, key, value), {})
            return
        self.node = assign_item(self.node, key, value)

    def _write(self, fn: Callable[..., Any], name: str, operands: Sequence[Any],
               kwargs: dict[str, Any]) -> None:
        """``fn(self, *operands, **kwargs)`` writing into this array (``np.add.at``,
        ``np.put``, ``np.copyto``...): numpy applies it to a copy at run time."""
        if not self.writable:
            _inplace(f"np.{name}")
        written = record_call(Written(fn), name, (self, *operands), kwargs)
        if written.node.dtype != self.node.dtype or written.node.ndim != self.node.ndim:
            raise UnsupportedOperationError(  # a function that is not a write after all
                f"np.{name} changes the dtype or the dimensions of the array it writes",
                "compute it outside the jitted function.")
        self.node = written.node

    def __getitem__(self, key: Any) -> Any:
        return record_call(operator.getitem, "getitem", (self, key), {})

    def __matmul__(self, other: Any) -> Any:
        return record_call(np.matmul, "matmul", (self, other), {})

    def __rmatmul__(self, other: Any) -> Any:
        return record_call(np.matmul, "matmul", (other, self), {})

    @property
    def T(self) -> Any:
        return record_call(np.transpose, "transpose", (self,), {})

    @property
    def mT(self) -> Any:
        return record_call(np.matrix_transpose, "matrix_transpose", (self,), {})

    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        target = shape[0] if len(shape) == 1 else shape
        return record_call(np.reshape, "reshape", (self, target), kwargs)

    def transpose(self, *axes: Any) -> Any:
        arguments = (self,) if not axes else (self, axes[0] if len(axes) == 1 else axes)
        return record_call(np.transpose, "transpose", arguments, {})

    def flatten(self, order: str = "C") -> Any:
        return _copy(record_call(np.ravel, "ravel", (self,), {"order": order}))

    def compress(self, condition: Any, axis: int | None = None) -> Any:
        return np.compress(condition, self, axis=axis)

    @property
    def flat(self) -> _Flat:
        return _Flat(self)

    @property
    def itemsize(self) -> int:
        return self.node.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.node.dtype.itemsize

    def nonzero(self) -> Any:
        return record_call(np.nonzero, "nonzero", (self,), {})

    def view(self, dtype: Any = None) -> Any:
        """``x.view(dtype)``: a view reinterpreting the bytes (numpy runs it)."""
        return record_call(np.ndarray.view, "view", (self,) if dtype is None else (self, dtype),
                           {})

    def __getattr__(self, name: str) -> Any:
        function = METHODS.get(name)
        if name in WRITING_METHODS:  # x.sort(), x.fill(0): written into a copy
            return lambda *args, **kwargs: self._write(
                WRITING_METHODS[name], f"ndarray.{name}", args, kwargs)
        if self.node.kind == CONST and not name.startswith("__") and \
                hasattr(np.ndarray, name):  # a constant has every ndarray attribute
            attribute = getattr(np.ndarray, name)
            if not callable(attribute):
                return getattr(self.node.param("value").value, name)
            return lambda *args, **kwargs: _eager(attribute, (self, *args), kwargs)
        if function is None or name.startswith("__"):
            raise AttributeError(
                f"traced arrays have no attribute {name!r}; numfuse supports the array "
                f"methods {', '.join(sorted(METHODS))} and the numpy functions in the README"
            )

        def method(*args: Any, **kwargs: Any) -> Any:
            if function in FUNCTIONS:
                return FUNCTIONS[function](self, *args, **kwargs)
            return record_call(function, name, (self, *args), kwargs)

        return method

    # --- array methods ----------------------------------------------------------
    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe",
               subok: bool = True, copy: bool = True) -> Tracer:
        return astype(self, dtype, casting=casting)

    @property
    def real(self) -> Tracer:
        return _method("real", self)

    @property
    def imag(self) -> Tracer:
        return _method("imag", self)

    def conj(self) -> Any:
        return apply_ufunc(np.conjugate, (self,), {})

    conjugate = conj

    def clip(self, min: Any = None, max: Any = None, **kwargs: Any) -> Any:
        return clip(self, min, max, **kwargs)

    def round(self, decimals: int = 0) -> Any:
        return round_(self, decimals)

    def copy(self, order: str = "K") -> Any:
        # ndarray.copy keeps a 0-d array an array; a numpy scalar's copy is a scalar
        node = self.node
        return Tracer(elementwise(OPS["astype"], [node], loop=((node.dtype,), node.dtype),
                                  scalar=node.scalar), owned=True)

    def __round__(self, ndigits: int | None = None) -> Any:
        # numpy arrays have no __round__; a numpy scalar rounds to a Python int without
        # ndigits, to a numpy scalar with them
        if self.node.ndim != 0 or not (self.node.scalar or self.node.weak):
            raise TypeError("type numpy.ndarray doesn't define __round__ method")
        if ndigits is None:
            return _concrete("round() of a traced value", self.node, lambda value: round(value))
        return round_(self, ndigits)


class _Flat:
    """``x.flat``: indexing it indexes ``x.ravel()``; writing through it is refused."""

    __slots__ = ("array",)

    def __init__(self, array: Tracer) -> None:
        self.array = array

    def __getitem__(self, key: Any) -> Any:
        return self.array.ravel()[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        _inplace("x.flat[...] = v (write x.ravel() into a new array instead)")

    def __len__(self) -> int:
        return self.array.size


def _concrete(operation: str, node: Node | None = None,
              convert: Callable[[Any], Any] | None = None) -> Any:
    """``convert`` of a constant's value; for anything else a ``ConcretizationError`` (a
    ``StaticArgumentError`` naming the scalar arguments the value comes from, if any)."""
    if node is not None and node.kind == CONST and convert is not None:
        return convert(np.asarray(node.param("value").value))
    arguments = _scalar_arguments(node) if node is not None else ()
    if arguments:
        raise StaticArgumentError(operation, _advice_for(operation), arguments)
    raise ConcretizationError(operation, _advice_for(operation))


def _scalar_arguments(node: Node) -> tuple[int, ...]:
    """The arguments ``node`` is computed from when they are all scalars (Python or numpy
    numbers, whose values could be passed as constants), else ``()``."""
    found = []
    for item in toposort([node]):
        if item.kind == INPUT:
            if item.ndim or not item.scalar:
                return ()
            found.append(item.param("index"))
    return tuple(found)


def _inplace(operation: str) -> Any:
    raise UnsupportedOperationError(
        f"in-place {operation} on an argument or a view of one",
        "numfuse never writes into its arguments or into arrays that share their memory "
        "with another value; write `x = x + 1` instead of `x += 1`, or copy first "
        "(`x = x.copy()`).",
    )


def _immutable(node: Node) -> bool:
    """A numpy scalar or a Python number: ``+=`` rebinds, item assignment fails."""
    return node.weak or (node.scalar and node.ndim == 0)


def _scalar_type_name(node: Node) -> str:
    """``float`` for a Python number, ``numpy.float64`` for a numpy scalar."""
    if node.weak:
        return type(node.dtype.type(0).item()).__name__
    return f"numpy.{node.dtype.type.__name__}"


def _in_place(ufunc: np.ufunc, forward: Callable[[Any, Any], Any],
              symbol: str) -> Callable[..., Any]:
    """``x op= y``: numpy computes ``x op y`` into ``x`` (casting same_kind to x's dtype,
    never changing its shape); numpy scalars and Python numbers just rebind."""

    def method(self: Tracer, other: Any) -> Any:
        result = forward(self, other)
        if _immutable(self.node):
            return result
        if not self.writable:
            return _inplace(symbol)
        return _store(ufunc, (self, other), result, self)

    return method


def _store(ufunc: np.ufunc, operands: Sequence[Any], result: Any, out: Any,
           mask: Any = True) -> Tracer:
    """``ufunc(*operands, out=out)`` given ``result = ufunc(*operands)``: ``out``, a fresh
    traced array, takes the result cast (same_kind) to its dtype, keeping its shape."""
    if isinstance(out, Tracer):
        if not out.writable or _immutable(out.node):
            return _inplace(f"np.{ufunc.__name__}(..., out=x) or an augmented assignment")
        target_dtype, target_shape = out.node.dtype, out.node.shape
    elif isinstance(out, np.ndarray):
        raise UnsupportedOperationError(
            f"np.{ufunc.__name__}(..., out=<numpy array>) or `+=` into a numpy array",
            "numfuse cannot write into an array it does not trace; make the array from a "
            "traced value (np.zeros_like(x), np.empty_like(x), x.copy()) or return the value.",
        )
    else:
        raise TypeError(f"return arrays must be of ArrayType, not {type(out).__name__}")
    node = _node(result)
    if not _fits_into(node.shape, tuple(target_shape)):
        raise ValueError(
            f"non-broadcastable output operand with shape {shape_text(target_shape)} "
            f"doesn't match the broadcast shape {shape_text(node.shape)}")
    if node.dtype != target_dtype and ufunc.nout == 1:
        with np.errstate(all="ignore"):  # numpy's own casting error, if any
            probe = np.zeros((), target_dtype)
            ufunc(*(_sample(_node(operand)) for operand in operands), out=probe)
    elif not np.can_cast(node.dtype, target_dtype, "same_kind"):
        raise TypeError(f"Cannot cast ufunc '{ufunc.__name__}' output from {node.dtype!r} to "
                        f"{np.dtype(target_dtype)!r} with casting rule 'same_kind'")
    stored = elementwise(OPS["astype"], [node], loop=((target_dtype,), target_dtype),
                         scalar=False)
    if mask is not True:
        # LLVM would simplify ``where(m, f(where(m, x, q)), out)`` to ``where(m, f(x), out)``
        # and compute f on the masked-off elements.  An array constant reaches the kernel as
        # an argument, so ``m ^ zeros`` is a condition from which LLVM cannot infer ``m``.
        ndim = max(_node(mask).ndim, len(target_shape))
        opaque = np.zeros((1,) * ndim, bool) if ndim else np.False_
        keep = apply_ufunc(np.logical_xor, (mask, opaque), {})
        stored = elementwise(OPS["where"], [_node(keep), stored, _node(out)], scalar=False)
    out.node = stored
    return out


def _fits_into(shape: Shape, target: Shape) -> bool:
    """Whether a result of ``shape`` can be stored into an array of ``target``'s shape
    (a free size matches any size but 1, which is always known when tracing)."""
    return len(shape) == len(target) and all(
        size == goal or (None in (size, goal) and 1 not in (size, goal))
        for size, goal in zip(shape, target, strict=True))


def assign_item(target: Node, key: Any, value: Any) -> Node:
    """``x[key] = value`` on a fresh array: ``where(mask, value, x)`` for a traced boolean
    mask of x's shape and a scalar value of a kind x holds; otherwise numpy assigns into a
    copy at run time (its casting, broadcasting and errors)."""
    if isinstance(key, Tracer) and key.node.dtype == bool and key.node.shape == target.shape \
            and _fills_exactly(_node(value), target.dtype):
        filled = elementwise(OPS["astype"], [_node(value)],
                             loop=((_node(value).dtype,), target.dtype))
        return elementwise(OPS["where"], [key.node, filled, target], scalar=False)
    nodes = [target]
    static = (TRACED, _strip(key, nodes), _strip(value, nodes))
    call = NumpyCall(Written(operator.setitem), "setitem", static, {})
    return Node("setitem", NUMPY, tuple(nodes), target.dtype, target.shape,
                (("call", call),), scalar=False)


def _fills_exactly(value: Node, dtype: np.dtype) -> bool:
    """Whether storing the 0-d ``value`` into an array of ``dtype`` is a plain cast
    (no out-of-range Python int, no NaN into an integer...)."""
    if value.ndim != 0:
        return False
    if value.kind == CONST and value.weak:
        constant = value.param("value").value
        if isinstance(constant, bool) or (dtype.kind in "fc" and isinstance(constant, int)):
            return dtype.kind != "b" or isinstance(constant, bool)
        if isinstance(constant, int):
            return dtype.kind in "iu" and _fits(constant, dtype)
        return dtype.kind in "fc" and (dtype.itemsize >= 8 or not math.isfinite(constant)
                                       or abs(constant) <= float(np.finfo(dtype).max))
    return bool(np.can_cast(value.dtype, dtype, "safe"))


def _node(value: Any) -> Node:
    return value.node if isinstance(value, Tracer) else const_node(value)


def _fast_power(base: Tracer, exponent: Any) -> Tracer | None:
    """``ndarray ** scalar`` takes numpy's operator fast paths (square, sqrt, reciprocal)."""
    node = base.node
    if (node.scalar and node.ndim == 0) or node.dtype.kind not in "fc":
        return None
    ufunc: np.ufunc
    if type(exponent) is int and exponent in (-1, 2):
        ufunc = np.reciprocal if exponent == -1 else np.square
    elif type(exponent) is float and exponent == 0.5:
        ufunc = np.sqrt
    else:
        return None
    return apply_ufunc(ufunc, (base,), {})


# Operators a Python complex computes itself when a numpy float64 scalar (a subclass of
# Python float) is on its right: numpy is never asked.
_PYTHON_COMPLEX: dict[np.ufunc, Callable[[Any, Any], Any]] = {
    np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
    np.true_divide: operator.truediv, np.power: operator.pow, np.equal: operator.eq,
    np.not_equal: operator.ne,
}


def _operator(ufunc: np.ufunc, *operands: Any) -> Any:
    """A Python operator: like the ufunc, but Python-scalar-only results stay weak."""
    if _constants_only(operands, {}):
        return _eager(ufunc, operands, {})
    nodes = [_node(operand) for operand in operands]
    left, right = nodes[0], nodes[-1]
    if ufunc in _PYTHON_COMPLEX and left.weak and left.dtype.kind == "c" and \
            not right.weak and right.scalar and right.ndim == 0 and right.dtype == np.float64:
        result = record_call(PythonComplexOperator(_PYTHON_COMPLEX[ufunc]),
                             f"complex.{ufunc.__name__}", operands, {})
        result.node = dataclasses.replace(result.node, weak=True)
        return result
    row = BY_UFUNC[ufunc]
    if ufunc in _ORDERINGS and len(nodes) == 2 and _complex_scalar_math(row, nodes):
        return _lexicographic(ufunc, nodes, row.loop_dtypes(
            [_operand_type(node) for node in nodes])[0][0])
    weak = all(node.weak for node in nodes)
    return Tracer(elementwise(row, nodes, weak=weak), owned=True)


_ORDERINGS = (np.less, np.less_equal, np.greater, np.greater_equal)


def _complex_scalar_math(row: OpDef, nodes: Sequence[Node]) -> bool:
    """Whether numpy compares these operands with its complex scalar math: numpy scalars
    or Python numbers (not 0-d arrays), one a complex numpy scalar of the loop's dtype."""
    if any(node.ndim or not (node.scalar or node.weak) for node in nodes) or \
            all(node.weak for node in nodes):
        return False
    loop = row.loop_dtypes([_operand_type(node) for node in nodes])[0][0]
    return loop.kind == "c" and any(not node.weak and node.dtype == loop for node in nodes)


def _lexicographic(ufunc: np.ufunc, nodes: Sequence[Node], loop: np.dtype) -> Tracer:
    """numpy's complex scalar comparison: the real parts, then the imaginary parts on a
    tie, with no NaN test (``np.complex64(3+nanj) > 0`` is True, as an array it is
    False)."""
    first, second = (Tracer(node) for node in nodes)
    if ufunc in (np.greater, np.greater_equal):
        first, second = second, first
    first, second = astype(first, loop), astype(second, loop)
    tie = np.less if ufunc in (np.less, np.greater) else np.less_equal
    return (first.real < second.real) | ((first.real == second.real) &
                                         tie(first.imag, second.imag))


def apply_ufunc(ufunc: np.ufunc, inputs: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """``ufunc(*inputs, **kwargs)``, including ``out=`` (see ``_store``) and ``where=`` with
    ``out=`` (the masked-off elements keep ``out``'s values and raise no warnings)."""
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    where = kwargs.pop("where", True)
    outs = out if isinstance(out, tuple) else (out,) * ufunc.nout
    if where is not True:
        if any(target is None for target in outs):
            raise UnsupportedOperationError(
                f"np.{ufunc.__name__}(..., where=...) without out=",
                "numpy leaves the masked-off elements uninitialised; pass out= (for example "
                "out=np.zeros_like(x)) or use np.where(mask, value, other).",
            )
        inputs = _quiet_where(ufunc, inputs, where)
    results = _compute_ufunc(ufunc, inputs, kwargs)
    if all(target is None for target in outs):
        return results
    listed = (results,) if ufunc.nout == 1 else tuple(results)
    stored = tuple(result if target is None else _store(ufunc, inputs, result, target, where)
                   for result, target in zip(listed, outs, strict=True))
    return stored[0] if ufunc.nout == 1 else stored


def _quiet_where(ufunc: np.ufunc, inputs: Sequence[Any], mask: Any) -> list[Any]:
    """The operands with masked-off elements replaced by a value on which ``ufunc`` raises
    no floating-point error, as numpy never computes those elements."""
    arrays = [operand for operand in inputs if isinstance(operand, (Tracer, np.ndarray))]
    dtypes = [_node(operand).dtype for operand in arrays]
    for candidate in (1, 2, 0, 3):
        quiet = [dtype.type(candidate) for dtype in dtypes]
        samples = iter(quiet)
        try:
            with np.errstate(all="raise"), warnings.catch_warnings():
                warnings.simplefilter("error")
                ufunc(*(next(samples) if isinstance(operand, (Tracer, np.ndarray)) else operand
                        for operand in inputs))
        except Exception:
            continue
        break
    replacements = iter(quiet)
    return [where(mask, operand, next(replacements))
            if isinstance(operand, (Tracer, np.ndarray)) else operand for operand in inputs]


def _compute_ufunc(ufunc: np.ufunc, inputs: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    if (ufunc not in BY_UFUNC and ufunc not in MULTI_OUTPUT) or \
            kwargs.get("casting", "same_kind") != "same_kind":
        # numpy casts the operands as the casting rule allows: a numpy call
        return record_call(ufunc, ufunc.__name__, inputs, kwargs)
    out_dtype = kwargs.pop("dtype", None)
    signature = kwargs.pop("signature", None)
    if signature is not None and out_dtype is None:
        out_dtype = signature[-1] if isinstance(signature, tuple) else None
    kwargs.pop("casting", None)
    if kwargs:
        raise UnsupportedOperationError(
            f"np.{ufunc.__name__}(..., {', '.join(kwargs)}=...)",
            "numfuse supports the dtype=, out= and where= keywords of ufuncs.",
        )
    nodes = [_node(value) for value in inputs]
    if ufunc in MULTI_OUTPUT:
        return tuple(Tracer(elementwise(OPS[name], nodes, out_dtype=out_dtype), owned=True)
                     for name in MULTI_OUTPUT[ufunc])
    try:
        return Tracer(elementwise(BY_UFUNC[ufunc], nodes, out_dtype=out_dtype), owned=True)
    except NoKernelCodeError:
        # no kernel code for these dtypes: numpy runs the ufunc as a call
        return record_call(ufunc, ufunc.__name__, inputs,
                           {} if out_dtype is None else {"dtype": out_dtype})


def _method(name: str, value: Any, target: Any = None) -> Tracer:
    node = _node(value)
    op = OPS[name]
    if name == "astype":
        dtype = check_dtype(np.dtype(target), "astype target")
        return Tracer(elementwise(op, [node], loop=((dtype,), dtype), scalar=node.scalar),
                      owned=True)
    loop = op.loop_dtypes([node.dtype])
    return Tracer(elementwise(op, [node], loop=loop, scalar=node.scalar))


# ------------------------------------------------------------------ numpy functions


def astype(value: Any, dtype: Any, casting: str = "unsafe") -> Tracer:
    node = _node(value)
    target = np.dtype(dtype)
    if not np.can_cast(node.dtype, target, casting=casting):  # type: ignore[arg-type]
        raise TypeError(
            f"Cannot cast array data from {node.dtype} to {target} according to the rule "
            f"'{casting}'"
        )
    return _method("astype", value, target)


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None and y is None:
        return record_call(np.nonzero, "nonzero", (condition,), {})
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    nodes = [_node(condition), _node(x), _node(y)]
    return Tracer(elementwise(OPS["where"], nodes, scalar=False), owned=True)


def clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None,
         **kwargs: Any) -> Any:
    a_min = kwargs.pop("min", a_min)
    a_max = kwargs.pop("max", a_max)
    if out is not None or kwargs:
        raise UnsupportedOperationError("np.clip with out= or extra keywords",
                                        "call np.clip(a, a_min, a_max) and use its result.")
    if a_min is None and a_max is None:
        return apply_ufunc(np.positive, (a,), {})
    if a_min is None:
        return apply_ufunc(np.minimum, (a, a_max), {})
    if a_max is None:
        return apply_ufunc(np.maximum, (a, a_min), {})
    nodes = [_node(a), _node(a_min), _node(a_max)]
    return Tracer(elementwise(OPS["clip"], nodes), owned=True)


def round_(a: Any, decimals: int = 0, out: Any = None) -> Any:
    """numpy's round: rint for decimals=0, else scale, rint and unscale like numpy."""
    if out is not None:
        raise UnsupportedOperationError("np.round(..., out=...)", "use the returned value.")
    node = _node(a)
    if node.dtype.kind in "biu":
        if decimals >= 0:
            return _copy(a)
        scale = 10 ** (-decimals)
        return apply_ufunc(np.multiply, (apply_ufunc(np.floor_divide, (a, scale), {}), scale), {})
    if decimals == 0:
        return apply_ufunc(np.rint, (a,), {})
    factor = node.dtype.type(10.0 ** abs(decimals)) if node.dtype.kind == "f" else \
        np.float64(10.0 ** abs(decimals))
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
    result = _method("real", value)
    _share(value, result)  # numpy's real and imag are views of their operand
    return result


def _imag(value: Any) -> Any:
    result = _method("imag", value)
    _share(value, result)
    return result


def _share(values: Any, result: Any) -> None:
    """Note that ``result`` (a tracer, or a container of them) may share memory with the
    tracers among ``values`` and their bases: none may be written while it is alive, and
    it is never written itself."""
    bases = list(dict.fromkeys(
        base for value in _tracers_in(values) for base in (value, *value.bases)))
    for view in _tracers_in(result):
        view.owned = False
        view.bases = (*view.bases, *bases)
        for base in bases:
            base.views.append(weakref.ref(view))


def _copy(value: Any, order: str = "K", subok: bool = False) -> Any:
    node = _node(value)
    return Tracer(elementwise(OPS["astype"], [node], loop=((node.dtype,), node.dtype),
                              scalar=False), owned=True)


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
    if out is not None or kwargs:
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
    np.shape: lambda a: a.shape if isinstance(a, Tracer) else np.shape(a),
    np.size: lambda a, axis=None: (a.size if axis is None else a.shape[axis])
    if isinstance(a, Tracer) else np.size(a, axis),
    np.result_type: lambda *values: np.result_type(*(_dtype_or_value(v) for v in values)),
    np.var: var,
    np.std: std,
    np.where: where,
    np.clip: clip,
    np.round: round_,
    np.around: round_,
    np.real: _real,
    np.imag: _imag,
    np.copy: _copy,
    np.fix: lambda x, out=None: apply_ufunc(np.trunc, (x,), {}) if _node(x).dtype.kind in "fc"
    else _copy(x),
}


def supported_functions() -> list[str]:
    """The numpy functions numfuse knows by name (besides the ufuncs), as ``np.<name>``;
    any other numpy function that dispatches on its arguments runs as a numpy call learnt
    from stand-ins (see ``record_call``), but for those in ``REFUSED``."""
    return sorted({f"np.{name}" for name in (*CALLS.values(), *DATA_DEPENDENT.values())} |
                  {f"np.{getattr(func, '__name__', func)}" for func in FUNCTIONS})


# ------------------------------------------------------- non-fusible numpy operations

# numpy itself gives a call's result dtype and shape: the call runs on zero-stride stand-ins
# twice, once with the sizes of the arguments being traced and once with every free size
# doubled.  A result dimension that differs between the runs depends on the inputs' sizes
# and stays free; one that agrees is fixed.  If the doubled run fails (the call fixes a
# size, as reshape(3, 8) does), the first run alone decides.
_examples: contextvars.ContextVar[dict[Node, tuple[int, ...]] | None] = contextvars.ContextVar(
    "numfuse_example_shapes", default=None)
_DEFAULT_SIZE = 6


def _example_shape(node: Node) -> tuple[int, ...]:
    """The concrete shape ``node`` has for the arguments being traced."""
    memo = _examples.get()
    if memo is None:
        memo = {}
    for item in toposort([node]):
        if item in memo:
            continue
        if _acts_elementwise(item):
            try:
                memo[item] = np.broadcast_shapes(*(memo[source] for source in item.inputs))
            except ValueError:  # a data-dependent size meets an argument's: take the latter
                memo[item] = _known_broadcast(item, [memo[source] for source in item.inputs])
        else:
            memo[item] = tuple(_DEFAULT_SIZE if size is None else size for size in item.shape)
    return memo[node]


def _acts_elementwise(node: Node) -> bool:
    """An elementwise node, or elementwise work numpy computes (float16): its sizes are
    the broadcast of its operands'."""
    return node.kind == ELEMENTWISE or is_elementwise_call(node)


def _known_broadcast(node: Node, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """The broadcast of ``node``'s operand shapes where a data-dependent axis (whose
    example size is arbitrary) gives way to the size of an axis that is not."""
    result = []
    for axis in range(-node.ndim, 0):
        known: set[int] = set()
        guessed: set[int] = set()
        for source, shape in zip(node.inputs, shapes, strict=True):
            if -axis > len(shape) or shape[axis] == 1:
                continue
            moving = source.ndim + axis in _moving_axes(source)
            (guessed if moving else known).add(shape[axis])
        sizes = known or guessed
        if len(sizes) > 1:
            raise ValueError(f"operands could not be broadcast together with shapes "
                             f"{' '.join(str(shape) for shape in shapes)}")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


LINALG_UFUNCS = frozenset(
    ufunc for ufunc in (np.matmul, getattr(np, "vecdot", None), getattr(np, "matvec", None),
                        getattr(np, "vecmat", None)) if ufunc is not None
)


def _has_tracer(item: Any) -> bool:
    if isinstance(item, Tracer):
        return True
    if isinstance(item, (tuple, list)):
        return any(_has_tracer(part) for part in item)
    return False


def _strip(item: Any, nodes: list[Node]) -> Any:
    """Replace tracers by ``TRACED`` (collecting their nodes), keep everything else."""
    if isinstance(item, Tracer):
        nodes.append(item.node)
        return TRACED
    if isinstance(item, (tuple, list)) and _has_tracer(item):
        return type(item)(_strip(part, nodes) for part in item)
    return item


def _probe(node: Node, scale: int, varied: bool) -> Any:
    """A stand-in for ``node``, its free sizes multiplied by ``scale``: zero-stride zeros,
    or (``varied``) seeded values in [0.5, 1.5) for calls that reject zeros (``inv``),
    stacks of square matrices made symmetric positive definite (``cholesky``)."""
    if node.kind == CONST:
        return node.param("value").value
    if node.weak:
        return node.dtype.type(1).item()
    example = _example_shape(node)
    shape = tuple(size * scale if free is None else size
                  for size, free in zip(example, node.shape, strict=True))
    if varied:
        values = np.random.default_rng(0).random(shape) + 0.5
        if len(shape) >= 2 and shape[-1] == shape[-2]:
            values = values + np.swapaxes(values, -1, -2) + np.eye(shape[-1]) * 2 * shape[-1]
        stand_in = values.astype(node.dtype) if node.dtype.kind != "b" else values > 1
    else:
        stand_in = np.broadcast_to(np.zeros((), node.dtype), shape)
    return stand_in[()] if node.scalar and not shape else stand_in


def _filled(node: Node, fill: str, seed: int) -> Any:
    """A stand-in for ``node`` holding ``fill`` data: ``ones``, ``distinct`` values (none
    shared with another operand) or seeded ``random`` values (small integers, normal
    floats, a mix of True and False)."""
    if node.kind == CONST:
        return _probe(node, 1, varied=False)
    if node.weak:  # a Python number: 1 or 0 (True or False as a mask)
        return node.dtype.type(fill == "ones").item()
    shape = _example_shape(node)
    if fill == "ones":
        return np.ones(shape, node.dtype)
    if fill == "distinct":
        count = int(np.prod(shape))
        return (np.arange(count) % 2 == 1 if node.dtype.kind == "b" else
                np.arange(seed * count, (seed + 1) * count)).astype(node.dtype).reshape(shape)
    rng = np.random.default_rng(seed)
    if node.dtype.kind == "b":
        return rng.random(shape) < 0.5
    if node.dtype.kind in "iu":
        return rng.integers(0, 4, shape).astype(node.dtype)
    values = rng.standard_normal(shape) * 3
    if node.dtype.kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(node.dtype)


def _run_on_data(call: NumpyCall, nodes: Sequence[Node]) -> list[Any]:
    """What ``call`` returns on stand-ins holding other data than the zero probes (all
    ones, distinct values, random values): its sizes may depend on them."""
    results = []
    for fill in ("ones", "distinct", "random"):
        try:
            results.append(call.invoke([_filled(node, fill, seed)
                                        for seed, node in enumerate(nodes)]))
        except Exception:  # numpy rejects these values; the other stand-ins decide
            continue
    return results


def _moving_axes(node: Node) -> frozenset[int]:
    """The axes of ``node`` whose size depends on the values: those of a data-dependent
    call (its ``moving`` param) and, through elementwise work, of its operands."""
    found: dict[Node, frozenset[int]] = {}
    stack = [node]
    while stack:
        item = stack[-1]
        pending = [source for source in item.inputs if source not in found] \
            if _acts_elementwise(item) else []
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        if _acts_elementwise(item):
            found[item] = frozenset(axis + item.ndim - source.ndim for source in item.inputs
                                    for axis in found[source])
        else:
            found[item] = item.param("moving", frozenset())
    return found[node]


def _run_resized(call: NumpyCall, nodes: Sequence[Node]) -> list[Any]:
    """What ``call`` returns when the data-dependent sizes of its operands are 0 to 3
    instead of the examples' (``x[mask][:3]`` has a size that moves with them), filled
    with zeros and with ones, the other operands with zeros and with ones (``n[m]`` for a
    data-dependent ``n`` and a mask ``m`` of one element)."""
    results = []
    for size, (fill, others) in itertools.product((0, 1, 2, 3), ((0, 0), (1, 0), (1, 1))):
        stand_ins = []
        for node in nodes:
            moving = _moving_axes(node)
            if node.kind == CONST or node.weak or (not moving and others == 0):
                stand_ins.append(_probe(node, 1, varied=False))
                continue
            shape = tuple(size if axis in moving else example
                          for axis, example in enumerate(_example_shape(node)))
            value = np.broadcast_to(np.asarray(fill if moving else others, node.dtype), shape)
            stand_ins.append(value[()] if node.scalar and not shape else value)
        try:
            results.append(call.invoke(stand_ins))
        except Exception:  # numpy rejects these sizes; the other stand-ins decide
            continue
    return results


def _run_probe(call: NumpyCall, nodes: Sequence[Node], scale: int) -> Any:
    try:
        return call.invoke([_probe(node, scale, varied=False) for node in nodes])
    except Exception as error:
        try:
            return call.invoke([_probe(node, scale, varied=True) for node in nodes])
        except Exception:
            raise error from None


def record_call(fn: Callable[..., Any], name: str, args: Sequence[Any],
                kwargs: dict[str, Any], unlisted: bool = False) -> Any:
    """Record a non-fusible numpy call; numpy itself gives its result dtype and shape.

    An ``unlisted`` function (one numfuse knows nothing about) also runs on stand-ins
    holding other data, so that sizes depending on the values are found, and its result is
    taken to be a possible view of its operands."""
    nodes: list[Node] = []
    static_args = tuple(_strip(item, nodes) for item in args)
    static_kwargs = {key: _strip(item, nodes) for key, item in kwargs.items()}
    if "out" in static_kwargs and static_kwargs["out"] is not None:
        raise UnsupportedOperationError(
            f"np.{name}(..., out=...) inside a traced function",
            "numfuse allocates results itself; return the value instead of writing into out=.",
        )
    if nodes and all(node.kind == CONST for node in nodes):
        return _eager(fn, args, kwargs)
    if not isinstance(fn, (np.ufunc, PythonComplexOperator, Written)) \
            and fn not in _SCALAR_DATA:
        # a scalar argument as axis=, n=, q=...: the value may decide the result's shape
        # (the first argument is the data: np.sum(s), np.stack([s, t]) stay traced; what
        # a write stores is data too)
        options = nodes[len(list(_tracers_in(args[0]))) if args else 0:]
        arguments = sorted({index for node in options for index in _scalar_arguments(node)})
        if arguments:
            raise StaticArgumentError(f"np.{name} with a scalar argument",
                                      _advice_for(f"np.{name} with a scalar argument"),
                                      tuple(arguments))
    call = NumpyCall(fn, name, static_args, static_kwargs)
    quiet = _quiet_libraries() if unlisted or name.startswith(("linalg.", "poly")) \
        else contextlib.nullcontext()
    with np.errstate(all="ignore"), warnings.catch_warnings(), quiet:
        warnings.simplefilter("ignore")
        moves = any(_moving_axes(node) for node in nodes)
        masked = fn is operator.getitem and any(node.dtype.kind == "b" for node in nodes[1:])
        variants = _run_on_data(call, nodes) if fn in DATA_DEPENDENT or masked or unlisted \
            else []
        variants += _run_resized(call, nodes) if moves else []
        try:
            first = _run_probe(call, nodes, 1)
        except Exception as error:
            if not variants:
                if unlisted:
                    _failed_on_stand_ins(name, error)
                raise
            first = variants[0]  # works for some values or sizes only (x[mask] of 1)
        try:
            second = _run_probe(call, nodes, 2)
        except Exception:
            second = first
    if _is_python_number(first):  # np.allclose: a Python bool, weak in later arithmetic
        tracer = _call_tracer(NumpyCall(PythonNumber(fn), name, static_args, static_kwargs),
                              nodes, np.asarray(first), np.asarray(second), True)
        tracer.node = dataclasses.replace(tracer.node, weak=True)
        return tracer
    fresh = fn in FRESH_CALLS or isinstance(fn, (np.ufunc, Written)) or (
        fn is operator.getitem and _advanced_index(static_args[1]))
    if isinstance(first, (tuple, list)) and isinstance(second, (tuple, list)) \
            and len(first) != len(second):
        raise SizeDependentError(  # np.unstack, np.split into pieces of a given size
            f"np.{name} returns as many values as an argument's size",
            "numfuse compiles such functions once per argument shape.")
    if isinstance(first, (tuple, list)) and first and len(first) == len(second):
        # several results (np.linalg.eigh, np.meshgrid, np.frexp): one call per item
        parts = [_call_tracer(NumpyCall(CallOutput(fn, index), f"{name}[{index}]",
                                        static_args, static_kwargs), nodes, item,
                              second[index], fresh,
                              [variant[index] for variant in variants])
                 for index, item in enumerate(first)]
        if not fresh:
            _share((args, tuple(kwargs.values())), parts)
        return type(first)(*parts) if hasattr(first, "_fields") else type(first)(parts)
    tracer = _call_tracer(call, nodes, first, second, fresh, variants)
    if not tracer.owned:
        _share((args, tuple(kwargs.values())), tracer)
    return tracer


_quiet_lock = threading.Lock()
_quiet_state: list[Any] = [0, None]  # how many threads are inside; the saved descriptors


@contextlib.contextmanager
def _quiet_libraries() -> Iterator[None]:
    """Silence what C and Fortran libraries print while numpy runs on stand-ins (LAPACK
    reports "On entry to DLASCL parameter number 4 had an illegal value" for the NaNs
    ``np.polyfit`` makes of zeros).  The first thread in redirects the descriptors and the
    last one out restores them; only calls that may reach LAPACK (unlisted functions,
    ``linalg``, polynomials) are silenced, as other threads' output is lost meanwhile."""
    with _quiet_lock:
        if _quiet_state[0] == 0:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
                saved = [os.dup(1), os.dup(2)]
                with open(os.devnull, "wb") as sink:
                    os.dup2(sink.fileno(), 1)
                    os.dup2(sink.fileno(), 2)
                _quiet_state[1] = saved
            except (OSError, ValueError, AttributeError):  # no descriptors to redirect
                _quiet_state[1] = None
        _quiet_state[0] += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_state[0] -= 1
            if _quiet_state[0] == 0 and _quiet_state[1] is not None:
                for fd, copy in zip((1, 2), _quiet_state[1], strict=True):
                    os.dup2(copy, fd)
                    os.close(copy)
                _quiet_state[1] = None


def _failed_on_stand_ins(name: str, error: Exception) -> Any:
    raise UnsupportedOperationError(
        f"np.{name} failed on stand-in arrays ({type(error).__name__}: {error})",
        "numfuse learns the result of a numpy function it does not list by running it on "
        "stand-ins of the arguments' dtypes and shapes; if the arguments are right, compute "
        "this call outside the jitted function.") from error


def _is_python_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic)


# Calls that take a traced scalar as data (an index, a fill value), not as a parameter.
_SCALAR_DATA = frozenset({operator.getitem, np.full, np.full_like})


def _call_tracer(call: NumpyCall, nodes: Sequence[Node], first: Any, second: Any,
                 fresh: bool, variants: Sequence[Any] = ()) -> Tracer:
    """The node of ``call``, whose probes returned ``first`` and ``second`` (and, for a
    call whose sizes depend on the values, ``variants`` on other data)."""
    name = call.name
    if isinstance(call.fn, CallOutput):  # CallOutput turns a Python number into a scalar
        first, second = np.asarray(first)[()], np.asarray(second)[()]
    if any(np.ndim(variant) != np.ndim(first) or np.asarray(variant).dtype !=
           np.asarray(first).dtype for variant in variants):
        raise UnsupportedOperationError(
            f"np.{name} with these arguments",
            "the number of dimensions or the dtype of its result depends on the values, "
            "which numfuse cannot trace; compute it outside the jitted function.",
        )
    moving = {axis for variant in variants
              for axis, (size, other) in enumerate(zip(np.shape(first), np.shape(variant),
                                                       strict=True))
              if size != other}
    if not isinstance(first, (np.ndarray, np.generic)) or np.ndim(first) != np.ndim(second):
        raise UnsupportedOperationError(
            f"np.{name} returns {type(first).__name__}",
            "numfuse traces numpy functions that return arrays; compute this part outside "
            "the jitted function.",
        )
    dtype = np.asarray(first).dtype
    if dtype.kind not in "biufc":
        raise UnsupportedOperationError(
            f"np.{name} returns dtype {dtype}",
            "numfuse handles bool, integer, float and complex results; cast the input.",
        )
    shape = tuple(a if a == b and axis not in moving else None
                  for axis, (a, b) in enumerate(zip(np.shape(first), np.shape(second),
                                                    strict=True)))
    if any(size is None and example == 1 and axis not in moving
           for axis, (size, example) in enumerate(zip(shape, np.shape(first), strict=True))):
        # A free size is never 1 (broadcasting relies on it): compile per shape instead.
        raise SizeDependentError(
            f"np.{name} gives a size-1 axis for these argument sizes",
            "numfuse compiles such functions once per argument shape.")
    params: tuple[tuple[str, Any], ...] = (("call", call),)
    if moving:
        params += (("moving", frozenset(moving)),)
    reduction = reductions.recognise(call.fn, name, call.args, call.kwargs, nodes[0].ndim,
                                     dtype) if len(nodes) == 1 and \
        nodes[0].dtype in KERNEL_DTYPES and dtype in KERNEL_DTYPES else None
    if reduction is not None:
        params += (("reduction", reduction),)
    node = Node(name, NUMPY, tuple(nodes), dtype, shape, params,
                scalar=isinstance(first, np.generic))
    memo = _examples.get()
    if memo is not None:
        memo[node] = tuple(_DEFAULT_SIZE if axis in moving else size
                           for axis, size in enumerate(np.shape(first)))
    return Tracer(node, owned=fresh or reduction is not None or isinstance(first, np.generic))


def _advanced_index(key: Any) -> bool:
    """Whether indexing with ``key`` copies (numpy's advanced indexing)."""
    parts = key if isinstance(key, tuple) else (key,)
    return any(part is TRACED or isinstance(part, (list, np.ndarray)) for part in parts)


def _calls(*names: str) -> dict[Any, str]:
    found = {}
    for name in names:
        target: Any = np
        for part in name.split("."):
            target = getattr(target, part, None)
        if target is not None:
            found[target] = name
    return found


# numpy functions traced as non-fusible calls: each returns one array whose shape depends
# only on its inputs' shapes (never on their values).
CALLS: dict[Any, str] = _calls(
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

# numpy functions whose result sizes depend on the values (``np.nonzero``, ``np.unique``,
# and ``x[mask]``): an axis whose size changes with the data is free at any size, 0 and 1
# included, and the runtime takes the size each call returns.
DATA_DEPENDENT: dict[Any, str] = _calls(
    "nonzero", "flatnonzero", "argwhere", "unique", "unique_values", "unique_counts",
    "unique_inverse", "unique_all", "compress", "extract", "trim_zeros", "bincount",
    "union1d", "intersect1d", "setdiff1d", "setxor1d",
)

# numpy functions that write into their first argument: traced as writes into a copy,
# into arrays the function made (as ``x[key] = v`` is).
WRITERS: dict[Any, str] = _calls(
    "copyto", "put", "putmask", "place", "fill_diagonal", "put_along_axis")

# numpy functions numfuse refuses to run on stand-ins, and why.
REFUSED: dict[Any, str] = {
    **dict.fromkeys(_calls("save", "savez", "savez_compressed", "savetxt"),
                    "it writes a file, which a traced function does once, while tracing"),
    **dict.fromkeys(_calls("shares_memory", "may_share_memory"),
                    "a traced value has no memory to compare until it runs"),
}


def numpy_name(func: Any) -> str:
    """``func``'s name under ``np`` (``linalg.eig``, ``lib.stride_tricks.as_strided``)."""
    name = getattr(func, "__name__", repr(func))
    for prefix, namespace in (("", np), ("linalg.", np.linalg), ("fft.", np.fft),
                              ("lib.stride_tricks.", np.lib.stride_tricks)):
        if getattr(namespace, name, None) is func:
            return prefix + name
    module = getattr(func, "__module__", None) or ""
    return f"{module.removeprefix('numpy.')}.{name}" if module else name


# Calls whose result never shares memory with an operand (reductions count too): their
# operands and results may still be written in place.
FRESH_CALLS: frozenset[Any] = frozenset(_calls(
    "cumsum", "cumprod", "argmin", "argmax", "nansum", "nanprod", "nanmean", "nanmin", "nanmax",
    "nanstd", "nanvar", "median", "percentile", "quantile", "average", "ptp", "dot", "vdot",
    "inner", "outer", "tensordot", "kron", "cross", "concatenate", "stack", "hstack",
    "vstack", "dstack", "column_stack", "zeros_like", "ones_like", "full_like", "empty_like",
    "roll", "tile", "repeat", "sort", "diff", "pad", "interp", "linalg.norm", "linalg.det",
    "linalg.inv", "linalg.solve", "linalg.pinv", "isclose", "sinc", "angle", "i0",
    "convolve", "correlate", "searchsorted", "digitize", "cov", "corrcoef", "argsort",
    "nanargmax", "nanargmin", "nancumsum", "nancumprod", "nanmedian", "nanpercentile",
    "nanquantile", "cumulative_sum", "cumulative_prod", "trapezoid", "polyval", "append",
    "insert", "delete", "matmul", "take_along_axis", "count_nonzero", "isin", "ediff1d",
    "piecewise", "apply_along_axis", "linalg.cholesky", "linalg.eigvalsh", "linalg.matrix_rank",
    "linalg.cond", "meshgrid", "gradient", "histogram", "histogram2d", "linalg.eigh",
    "linalg.qr", "linalg.svd", "linalg.slogdet", "linalg.lstsq", "linspace", "logspace",
    "geomspace", *(
        name for name in DATA_DEPENDENT.values() if name != "trim_zeros"),
))

# Array methods traced as calls of these numpy functions.
METHODS: dict[str, Any] = {
    name: getattr(np, name) for name in (
        "sum", "prod", "mean", "min", "max", "any", "all", "std", "var", "argmin", "argmax",
        "cumsum", "cumprod", "ravel", "swapaxes", "squeeze", "repeat", "dot", "trace",
        "diagonal", "take", "argsort", "argpartition", "choose", "searchsorted",
    ) if hasattr(np.ndarray, name)
} | {"byteswap": np.ndarray.byteswap}

# Array methods writing into the array: traced as writes into a copy.
WRITING_METHODS: dict[str, Any] = {
    name: getattr(np.ndarray, name) for name in ("sort", "fill", "partition", "put")}


# ------------------------------------------------------------------------------ trace


def trace_graph(fn: Callable[..., Any], specs: Sequence[ArgSpec],
                static: dict[int, Any] | None = None,
                shapes: Sequence[tuple[int, ...]] | None = None) -> Graph:
    """Run ``fn`` once on tracers for ``specs`` and return the recorded graph.

    Arguments listed in ``static`` are passed through as concrete Python values.
    ``shapes`` are the example arguments' shapes, used to work out the result shapes of
    non-fusible numpy calls (the graph itself never depends on them).
    """
    static = static or {}
    inputs = tuple(input_node(index, spec) for index, spec in enumerate(specs))
    arguments = [static[index] if index in static else Tracer(node)
                 for index, node in enumerate(inputs)]
    examples: dict[Node, tuple[int, ...]] = {}
    if shapes is not None:
        examples.update((node, tuple(shape)) for node, shape in zip(inputs, shapes, strict=True)
                        if len(shape) == node.ndim)
    token = _examples.set(examples)
    user = _user_globals.set(_own_globals(fn))
    try:
        with np.errstate(all="ignore"), _converting_tracers():
            result = fn(*arguments)
    finally:
        _user_globals.reset(user)
        _examples.reset(token)
    leaves, treedef = tree_flatten(result)
    outputs = tuple(leaf.node if isinstance(leaf, Tracer) else _leaf_const(leaf)
                    for leaf in leaves)
    first_position = {id(leaf): position for position, leaf in reversed(list(enumerate(leaves)))}
    same_as = tuple(first_position[id(leaf)] for leaf in leaves)
    return Graph(inputs, outputs, treedef, same_as=same_as)


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
_WRAPPED = {**_CONVERSIONS, **_CREATIONS}
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
            for name, original in _RANDOM.items():
                setattr(np.random, name, _random_draw(name, original))
            np.vectorize.__call__ = _vectorized_call  # type: ignore[method-assign]
            np.isscalar = _isscalar  # type: ignore[assignment]
        _conversion_depth += 1
    try:
        yield
    finally:
        with _conversion_lock:
            _conversion_depth -= 1
            if _conversion_depth == 0:
                for name, original in _WRAPPED.items():
                    setattr(np, name, original)
                for name, original in _RANDOM.items():
                    setattr(np.random, name, original)
                np.vectorize.__call__ = _VECTORIZE_CALL  # type: ignore[method-assign]
                np.isscalar = _ISSCALAR


# np.random's functions drawing from the global generator: the traced function's own code
# calling one would draw once, while tracing, and return those numbers at every call.
_RANDOM = {name: getattr(np.random, name) for name in dir(np.random)
           if not name.startswith("_") and name not in ("seed", "get_state", "set_state")
           and isinstance(getattr(getattr(np.random, name), "__self__", None),
                          np.random.RandomState)}
# A generator made without a seed draws other numbers at every call of the function too.
_RANDOM["default_rng"] = np.random.default_rng


_VECTORIZE_CALL = np.vectorize.__call__
_ISSCALAR = np.isscalar


def _isscalar(element: Any) -> bool:
    """``np.isscalar``: a traced numpy scalar or Python number is one, an array is not."""
    if isinstance(element, Tracer):
        return element.node.ndim == 0 and (element.node.scalar or element.node.weak)
    return _ISSCALAR(element)


def _vectorized_call(self: np.vectorize, *args: Any, **kwargs: Any) -> Any:
    """``np.vectorize(f)(x)`` on traced values: ``f`` applied to the whole arrays, which is
    the same when everything ``f`` does is elementwise (checked: anything else raises).
    Like numpy, the operands are arrays first (Python numbers become strong), and the
    results are arrays of the broadcast shape (``otypes`` cast them)."""
    if not _has_tracer((args, tuple(kwargs.values()))):
        return _VECTORIZE_CALL(self, *args, **kwargs)
    if self.signature is not None or self.excluded or kwargs:
        raise UnsupportedOperationError(
            "np.vectorize with signature=, excluded= or keyword arguments on traced values",
            "numfuse applies a vectorized function to whole arrays only when it is called "
            "with positional arrays; compute this part outside the jitted function.")
    operands: list[Any] = [
        np.asanyarray(value) if isinstance(value, Tracer)
        else Tracer(const_node(np.asanyarray(value)), owned=True) for value in args]
    sources = {operand.node for operand in operands}
    results = self.pyfunc(*operands)
    items = list(results) if isinstance(results, tuple) else [results]
    target = broadcast_shapes(*(operand.node.shape for operand in operands))
    done = []
    for position, item in enumerate(items):
        if not isinstance(item, Tracer) or not _elementwise_from(item.node, sources):
            if isinstance(item, Tracer) or not np.isscalar(item):
                raise UnsupportedOperationError(
                    f"np.vectorize({getattr(self.pyfunc, '__name__', 'f')}) on traced values",
                    "the function does more than elementwise work on its arguments, so "
                    "applying it to whole arrays would differ from numpy's per-element calls; "
                    "compute this part outside the jitted function.")
            item = Tracer(const_node(np.asarray(item)), owned=True)
        if self.otypes:
            item = item.astype(np.dtype(self.otypes[position]))
        if item.node.shape != target:
            item = np.broadcast_to(item, np.broadcast_shapes(
                *(np.shape(operand) for operand in operands))).copy()
        done.append(np.asarray(item) if item.node.ndim == 0 else item)
    return tuple(done) if isinstance(results, tuple) else done[0]


def _elementwise_from(node: Node, sources: set[Node]) -> bool:
    """Whether ``node`` is computed from ``sources`` by elementwise work and constants only."""
    seen: set[Node] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if item in seen or item in sources or item.kind == CONST:
            continue
        seen.add(item)
        if item.kind != ELEMENTWISE:
            return False
        stack.extend(item.inputs)
    return True


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


def _converter(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def convert(*args: Any, **kwargs: Any) -> Any:
        obj = args[0] if args else None
        if isinstance(obj, Tracer) and name in ("asarray_chkfinite", "require"):
            return _checked_array(name, original, obj, *args[1:], **kwargs)
        if isinstance(obj, Tracer):
            return _as_array(name, original, obj, args[1:], kwargs)
        if isinstance(obj, (tuple, list)) and _has_tracer(obj):  # np.array([x, y])
            if _constants_only(args, kwargs):
                return _eager(original, args, kwargs)
            return record_call(original, name, args, kwargs)
        result = original(*args, **kwargs)
        return _wrapped(result, []) if _from_user_code(name) else result

    return functools.wraps(original)(convert)


def _creator(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    zeros: Callable[..., Any] = _CREATIONS.get(
        {"empty": "zeros", "empty_like": "zeros_like"}.get(name, name), original)

    def create(*args: Any, **kwargs: Any) -> Any:
        if name in ("full", "full_like") and _has_tracer((args, tuple(kwargs.values()))):
            if _constants_only(args, kwargs):
                return _eager(original, args, kwargs)
            return record_call(original, name, args, kwargs)  # a traced fill value
        if not _from_user_code(name):
            return original(*args, **kwargs)
        return _wrapped(zeros(*args, **kwargs), [])

    return functools.wraps(original)(create)


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
    """The names the statement running at ``offset`` of ``code`` loads up to there."""
    names: set[str] = set()
    for instruction in reversed([item for item in dis.get_instructions(code)
                                 if item.offset <= offset]):
        if instruction.offset < offset and instruction.opname.startswith(_STATEMENT_ENDS):
            break
        if instruction.opname.startswith("LOAD_") and isinstance(instruction.argval, str):
            names.add(instruction.argval)
    return frozenset(names)


_STATEMENT_ENDS = ("STORE_", "POP_TOP", "RETURN_", "JUMP", "POP_JUMP")


def _tracers_in(item: Any) -> Iterator[Tracer]:
    if isinstance(item, Tracer):
        yield item
    elif isinstance(item, (tuple, list)):
        for part in item:
            yield from _tracers_in(part)
    elif isinstance(item, dict):
        for part in item.values():
            yield from _tracers_in(part)


def _constants_only(args: Any, kwargs: dict[str, Any]) -> bool:
    """Whether the traced values among ``args`` and ``kwargs`` are all constants."""
    found = [*_tracers_in(args), *_tracers_in(kwargs)]
    return bool(found) and all(tracer.node.kind == CONST for tracer in found)


def _eager(fn: Callable[..., Any], args: Any, kwargs: dict[str, Any]) -> Any:
    """``fn`` on the values of constants, computed by numpy now as it would be without
    numfuse; a write into a constant (``a[0] = 1``, ``np.add.at(a, i, 1)``, ``a.fill(0)``)
    gives it the written value."""
    copies: list[tuple[Tracer, np.ndarray]] = []

    def unwrap(item: Any) -> Any:
        if isinstance(item, Tracer):
            value = item.node.param("value").value
            if not isinstance(value, np.ndarray):
                return value
            copies.append((item, value.copy()))
            return copies[-1][1]
        if isinstance(item, list) or (isinstance(item, tuple) and not hasattr(item, "_fields")):
            return type(item)(unwrap(part) for part in item)
        return item

    result = fn(*unwrap(tuple(args)), **{key: unwrap(value) for key, value in kwargs.items()})
    for tracer, copy in copies:
        if copy.tobytes() != tracer.node.param("value").value.tobytes():
            if not tracer.writable:
                _inplace("writing into a constant a view was taken of")
            tracer.node = const_node(copy)
    return _wrapped(result, copies)


def _wrapped(value: Any, copies: Sequence[tuple[Tracer, np.ndarray]]) -> Any:
    """numpy arrays in ``value`` as constant tracers (the tracer itself for an array written
    in place); a view of a constant makes both unwritable, as a write would have to reach
    the other."""
    for tracer, copy in copies:
        if value is copy:
            return tracer
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            return value
        shared = [tracer for tracer, copy in copies if np.may_share_memory(value, copy)]
        result = Tracer(const_node(value), owned=True)
        if shared:
            _share(shared, result)
        return result
    if isinstance(value, list) or (isinstance(value, tuple) and not hasattr(value, "_fields")):
        return type(value)(_wrapped(part, copies) for part in value)
    if isinstance(value, tuple):
        return type(value)(*(_wrapped(part, copies) for part in value))
    return value


def _as_array(name: str, original: Callable[..., Any], value: Tracer, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
    """``np.array(x)`` copies; ``np.asarray(x)`` is ``x`` itself (a numpy scalar or Python
    number becomes a 0-d array); a dtype casts.  Other options run numpy."""
    node = value.node
    options = dict(zip(("dtype",), args, strict=False)) | kwargs
    dtype = options.pop("dtype", None)
    copy = options.pop("copy", True if name == "array" else None)
    options.pop("order", None)  # the layout never changes a value
    if options.get("ndmin", 0) == 0 and options.get("subok", False) is False:
        options.pop("ndmin", None)
        options.pop("subok", None)
    if options or len(args) > 1 or (name in ("ascontiguousarray", "asfortranarray")
                                    and node.ndim == 0):
        return record_call(original, name, (value, *args), kwargs)
    target = node.dtype if dtype is None else check_dtype(np.dtype(dtype), f"np.{name} dtype")
    if copy is False and target != node.dtype:
        raise ValueError("Unable to avoid copy while creating an array as requested.")
    if copy or target != node.dtype or _immutable(node):
        return Tracer(elementwise(OPS["astype"], [node], loop=((node.dtype,), target),
                                  scalar=False), owned=True)
    return value


def _checked_array(name: str, original: Callable[..., Any], value: Tracer, dtype: Any = None,
                   order: Any = None, requirements: Any = None, *, like: Any = None) -> Any:
    """``np.asarray_chkfinite(x)`` (numpy checks the values when it runs) and
    ``np.require(x, dtype)`` (the layout requirements hold for every value numfuse makes;
    an argument is never written, whatever ``"W"`` asks)."""
    options = {} if dtype is None else {"dtype": dtype}
    converted = _as_array("asarray", _CONVERSIONS["asarray"], value, (), options)
    if name == "asarray_chkfinite" and converted.node.dtype.kind in "fc":
        return record_call(original, name, (converted,), {})
    return converted


def _leaf_const(value: Any) -> Node:
    """A returned value that does not depend on the arguments: returned as numpy gave it."""
    return Node("const", CONST, (), np.dtype(object), (), (("value", _Opaque(value)),))


class _Opaque:
    """A returned constant of any type, kept as is (copied on return if it is an array)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


for _name, _ufunc, _symbol in (
        ("add", np.add, "+="), ("sub", np.subtract, "-="), ("mul", np.multiply, "*="),
        ("truediv", np.true_divide, "/="), ("floordiv", np.floor_divide, "//="),
        ("mod", np.remainder, "%="), ("pow", np.power, "**="), ("and", np.bitwise_and, "&="),
        ("or", np.bitwise_or, "|="), ("xor", np.bitwise_xor, "^="),
        ("lshift", np.left_shift, "<<="), ("rshift", np.right_shift, ">>=")):
    setattr(Tracer, f"__i{_name}__",
            _in_place(_ufunc, getattr(Tracer, f"__{_name}__"), _symbol))
