"""The ``Tracer``: a traced value standing in for an array while the function runs."""

from __future__ import annotations

import dataclasses
import dis
import functools
import itertools
import operator
import sys
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import pytree
from ..calls import (
    Written,
)
from ..errors import (
    ConcretizationError,
    SizeDependentError,
    StaticArgumentError,
    UnsupportedOperationError,
)
from ..graph import (
    CONST,
    INPUT,
    NUMPY,
    Node,
    toposort,
)
from ..ops import OpDef
from ..registry import METHODS, Kind, lookup, numpy_name
from .nodes import _advice_for, _sample, const_node, elementwise


class Tracer:
    """A traced value: records every operation applied to it into the graph."""

    __array_priority__ = 1000
    __slots__ = ("__weakref__", "bases", "item_types", "node", "origin", "owned",
                 "python_items", "sequence", "views")

    def __new__(cls, node: Node, *args: Any, **kwargs: Any) -> Tracer:
        # a Python number (weak, 0-d) has a Python number's attributes only
        if cls is Tracer and node.weak and node.ndim == 0:
            cls = _PYTHON_NUMBER_TRACERS.get(node.dtype.kind, Tracer)
        return object.__new__(cls)

    def __init__(self, node: Node, owned: bool = False, python_items: bool = False,
                 sequence: bool = False, item_types: tuple[str, ...] | None = None) -> None:
        self.node = node
        # an array numpy made of a list or tuple of Python numbers: an item taken out is
        # a Python number (weak), a row another such list
        self.python_items = python_items
        self.sequence = sequence  # a list or tuple argument (or a part of one): its operators
        self.item_types = item_types  # (see ``ArgSpec.types``)
        # True when this tracer stands for a fresh array (not an argument, not a view).
        # It may be written in place while no view of it is alive (``writable``).
        self.owned = owned
        self.views: list[weakref.ref[Tracer]] = []  # values that may share its memory
        self.bases: tuple[Tracer, ...] = ()  # the arrays whose memory this one may share
        # a view made by indexing another tracer: that tracer and the key (``write_through``)
        self.origin: tuple[Tracer, Any] | None = None

    @property
    def writable(self) -> bool:
        """Whether a write into this array is numpy's write: it is fresh and no value
        that may share its memory is still alive (a temporary view, as in
        ``y[1:] = y[1:] - y[:-1]``, is gone by the time of the write)."""
        return self.owned and all(view() is None for view in self.views)

    def writable_from(self, value: Any) -> bool:
        """Whether ``self[...] = value`` is numpy's write: ``writable``, but for ``value``
        itself when it is a temporary view of this array (``y[1:] = y[:-1]``: numpy reads
        the items before it writes, and nothing can read the view afterwards)."""
        if self.writable:
            return True
        return self.owned and isinstance(value, Tracer) and \
            all(view() is None or view() is value for view in self.views) and \
            not _named(value, sys._getframe(2))

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
        return first if first is not None else \
            self._sizes("len() of a traced array", axes=(0,))[0]

    def _sizes(self, operation: str, axes: Sequence[int] | None = None) -> tuple[int, ...]:
        """The concrete shape, or a ``SizeDependentError`` (which makes ``jit`` retry
        with one compilation per shape); a ``ConcretizationError`` saying what to do
        when one of the free ``axes`` (default: all) has a size that depends on the
        values, which no compilation fixes."""
        shape = self.node.shape
        if all(size is not None for size in shape):
            return tuple(size for size in shape if size is not None)
        free = {axis for axis, size in enumerate(shape) if size is None}
        if free & set(range(len(shape)) if axes is None else axes) & _moving_axes(self.node):
            _data_dependent_size(operation, self.node)
        raise SizeDependentError(
            operation,
            "array sizes are not fixed when numfuse compiles (a new size does not "
            "recompile); use x.ndim, or broadcasting, instead of reading sizes.",
        )

    def __repr__(self) -> str:
        # numfuse's own messages show the traced type; the function's text of a value
        # (repr(), f"{v!r}", a printed list) needs the value, as numpy's would show it
        if sys._getframe(1).f_globals.get("__name__", "").startswith("numfuse"):
            return f"Tracer<{self.node.type_str()}>"
        return self._text("repr() of a traced value", repr)

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
            return np.array(self.node.value.value, dtype=dtype, copy=copy is not False)
        operation = "np.asarray()/np.array() of a traced value"
        arguments = _scalar_arguments(self.node)
        if arguments:
            raise StaticArgumentError(operation, _advice_for(operation), arguments)
        raise ConcretizationError(operation, _advice_for(operation) + (
            " Storing a traced value into a numpy array (a[...] = x) converts it too: make "
            "the array from a traced value instead (np.zeros_like(x), np.empty_like(x)); "
            "indexing a numpy array with a traced value (table[i]) too: use "
            "np.take(table, i); so does a numpy array's method given a traced value "
            "(X.dot(w)): use np.dot(X, w) or X @ w; and a numpy scalar type called on a "
            "traced value (np.float32(x.sum())): use x.sum().astype(np.float32)."))

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
        # numfuse's own dicts and sets of traced values hash them by identity; the user's
        # code hashing one (``p in {1, 2}``, ``table.get(i)``) needs its value, as numpy
        # hashes a number by value (an array is unhashable)
        if sys._getframe(1).f_globals.get("__name__", "").startswith(("numfuse.", "numpy")):
            return id(self)
        if self.node.ndim and not self.node.weak:
            raise TypeError("unhashable type: 'numpy.ndarray'")
        return _concrete("hash() of a traced value (a set member, a dict key)", self.node,
                         lambda value: hash(value.item()))

    def __str__(self) -> str:
        # the text of a value (print(loss), f"scale={s}") needs it: a number argument
        # becomes static, anything else makes numpy run the function (each call prints)
        return self._text("str() of a traced value (print, an f-string)", str)

    def __format__(self, spec: str) -> str:
        return self._text("format() of a traced value (an f-string)",
                          lambda value: format(value, spec))

    def _text(self, operation: str, convert: Callable[[Any], str]) -> str:
        node = self.node
        if node.kind == CONST:
            value = node.value.value
            return convert(np.asarray(value)[()] if node.scalar else value)
        arguments = _scalar_arguments(node)
        if arguments:
            return _concrete(operation, node, lambda value: convert(value[()]))
        raise ConcretizationError(operation, (
            f"{operation} needs the value, but inside a numfuse function values are "
            "traced, not computed: numpy runs a jitted function that prints or formats "
            "one (as written, at every call). To fuse it, return the value and print or "
            "format it outside the jitted function."))

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
        if method == "at" and inputs and isinstance(inputs[0], Tracer):
            # (asked first may be another operand: a Python number argument's tracer,
            # a subclass, is asked before the array's)
            inputs[0]._write(ufunc.at, f"{ufunc.__name__}.at", inputs[1:], {})
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
        record = lookup(func)
        if record is not None and record.kind in (Kind.CALL, Kind.DATA_DEPENDENT):
            return record_call(func, record.name, args, kwargs)
        name = numpy_name(func)
        if record is not None and record.kind is Kind.WRITER:
            if not args or not isinstance(args[0], Tracer):
                _inplace(f"np.{name} into an array the function did not make")
            args[0]._write(func, name, args[1:], kwargs)
            return None
        if record is not None and record.kind is Kind.REFUSED:
            raise UnsupportedOperationError(
                f"np.{name} is not supported by numfuse",
                f"{record.refused}; compute this part outside the jitted function.")
        return record_call(func, name, args, kwargs, unlisted=True)

    @staticmethod
    def apply_op(op: OpDef, operands: Sequence[Any]) -> Tracer:
        """``op``, a row of the op table no numpy function names (``ops.Internal``),
        applied to ``operands`` (traced values, arrays or numbers): one elementwise node."""
        nodes = [operand.node if isinstance(operand, Tracer) else const_node(operand)
                 for operand in operands]
        return Tracer(elementwise(op, nodes), owned=True)

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
        if self._repeats(other):  # n * [0.0]: the sequence repeated, as Python does
            return operator.index(self) * other
        return _operator(np.multiply, self, other)

    def __rmul__(self, other: Any) -> Any:
        if self._repeats(other):
            return other * operator.index(self)
        return _operator(np.multiply, other, self)

    def _repeats(self, other: Any) -> bool:
        """Whether ``self * other`` repeats the list or tuple ``other``: an integer
        number does (a Python int, a numpy integer scalar), an array multiplies it."""
        node = self.node
        return isinstance(other, (list, tuple)) and node.ndim == 0 and \
            (node.weak or node.scalar) and node.dtype.kind in "iu"

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
        return together(_operator(np.floor_divide, self, other),
                        _operator(np.remainder, self, other))

    def __rdivmod__(self, other: Any) -> Any:
        return together(_operator(np.floor_divide, other, self),
                        _operator(np.remainder, other, self))

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
        if not self.writable_from(value):
            if self.write_through(key, value):
                return
            self.refuse_view_write("item assignment", "v[0] = w", "y[1] = w")
            self.refuse_write_under_view("item assignment", "y[1:] = v")
            _inplace("item assignment (x[...] = v)")
        if _constants_only((self, key, value), {}):
            _eager(operator.setitem, (self, key, value), {})
            return
        self.node = assign_item(self.node, key, value)

    def indexed_chain(self) -> list[Tracer] | None:
        """This view, the array it was indexed from, and so on up to an array the
        function made (``owned``); None when a link is no indexing or the last array is
        none the function made."""
        chain = [self]
        while not chain[-1].owned:
            origin = chain[-1].origin
            if origin is None:
                return None
            chain.append(origin[0])
        return chain

    def refuse_view_write(self, operation: str, write: str, through: str) -> None:
        """When this is a view of an array the function made that ``write_through``
        could not write (``operation``, as ``write`` into ``v = y[1:]``; written through
        the array itself, it is ``through``): raise why.  Return otherwise."""
        if self.owned or not any(base.owned for base in self.bases):
            return
        if self.indexed_chain() is not None:
            raise UnsupportedOperationError(
                f"{operation} into a view of an array the function made while another "
                f"view of that array is alive (u = y[:1]; v = y[1:]; {write})",
                f"numpy's other view would see the write; write through the array itself "
                f"({through}), or copy the other view first (`u = y[:1].copy()`).")
        raise UnsupportedOperationError(
            f"{operation} into a view of an array the function made, taken other than by "
            "indexing (y.T[0] = w)",
            "write through the array itself (y[:, 0] = w), or copy the view first.")

    def refuse_write_under_view(self, operation: str, write: str) -> None:
        """When this is an array the function made with a view of it alive (``operation``
        written as ``write``): raise why.  Return otherwise."""
        if self.owned:
            raise UnsupportedOperationError(
                f"{operation} into an array the function made while a view of it held in "
                f"a variable is alive (v = y[:-1] or v = y.real; {write})",
                "numpy's view would see the write; index the array itself "
                "(y[1:] = y[:-1]), copy the view (`v = y[:-1].copy()`), or `del v` first.")

    def write_through(self, key: Any, value: Any) -> bool:
        """``self[key] = value`` where this is a view, made by indexing, of an array the
        function made (``y[0][1] = v``; ``row = y[1]; row[0] = v``; views of views):
        written into that array and every view between, when nothing else that may
        share its memory is alive (but ``value`` itself, a temporary: numpy reads it
        before it writes).  False (nothing written) otherwise."""
        chain = self.indexed_chain()
        if chain is None or len(chain) == 1:  # (not a view: an array the function made)
            return False
        frame = sys._getframe(2)
        # (before Python 3.13 a frame's f_locals is a snapshot kept on the frame, which
        # ``_named`` made at an earlier write: read again, it drops the names deleted
        # since, and the views they held die)
        frame.f_locals  # noqa: B018
        for tracer in chain:
            for reference in tracer.views:
                alive = reference()
                if alive is not None and not any(alive is member for member in chain) \
                        and (alive is not value or _named(value, frame)):
                    return False
        self.node = assign_item(self.node, key, value)
        for written, base in itertools.pairwise(chain):
            assert written.origin is not None
            base.node = assign_item(base.node, written.origin[1], written)
        return True

    def _write(self, fn: Callable[..., Any], name: str, operands: Sequence[Any],
               kwargs: dict[str, Any]) -> None:
        """``fn(self, *operands, **kwargs)`` writing into this array (``np.add.at``,
        ``np.put``, ``np.copyto``...): numpy applies it to a copy at run time."""
        if _immutable(self.node):
            # a numpy scalar or a Python number: numpy raises its TypeError, or writes into
            # a copy (np.float64(3).fill(0) leaves 3.0)
            stand_ins = [np.zeros([1 if size is None else size for size in item.node.shape],
                                  item.node.dtype)
                         if isinstance(item, Tracer) else item for item in operands]
            sample = _sample(self.node)
            sample = sample[()] if isinstance(sample, np.ndarray) else sample
            method = isinstance(fn, types.MethodDescriptorType)  # (x.fill: the scalar's)
            (getattr(sample, fn.__name__) if method else functools.partial(fn, sample))(
                *stand_ins, **kwargs)
            return
        if not self.writable:
            _inplace(f"np.{name}")
        written = record_call(Written(fn), name, (self, *operands), kwargs)
        if written.node.dtype != self.node.dtype or written.node.ndim != self.node.ndim:
            raise UnsupportedOperationError(  # a function that is not a write after all
                f"np.{name} changes the dtype or the dimensions of the array it writes",
                "compute it outside the jitted function.")
        self.node = written.node

    def __getitem__(self, key: Any) -> Any:
        index = _list_index(key)
        if self.sequence and not index and not isinstance(key, slice):
            # a list or tuple argument is indexed as Python's are (l[None], l[0, 1] and
            # l[np.array([0, 2])] raise)
            raise TypeError(f"list indices must be integers or slices, not "
                            f"{type(key).__name__}")
        item = record_call(operator.getitem, "getitem", (self, key), {})
        if isinstance(item, Tracer) and not item.owned and \
                any(base is self for base in item.bases):
            item.origin = (self, key)
        if self.sequence and isinstance(item, Tracer) and (
                isinstance(key, slice) or (index and item.node.ndim)):
            item.sequence = True  # a list's slice, or an item that is a list, is a list
            item.python_items = self.python_items
        elif self.python_items and isinstance(item, Tracer) and index:
            if item.node.ndim:
                item.python_items = True
            else:
                if self.item_types is not None:
                    if isinstance(key, Tracer):
                        kinds = set(self.item_types)
                        if len(kinds) > 1:  # the item's type follows the index's value
                            _concrete("an item of a list of ints and floats at a traced "
                                      "index", key.node)
                        kind = kinds.pop()
                    else:
                        kind = self.item_types[key]
                    if kind == "int":
                        item = astype(item, np.int64)  # numpy's array of the list: float
                if item.node.dtype.kind != "b":  # (a Python bool is never weak)
                    item.node = dataclasses.replace(item.node, weak=True)
        return item

    def __imatmul__(self, other: Any) -> Any:
        # (without it Python would make ``c @= b`` a new array, ``c = c @ b``: no write
        # into c, nor numpy's checks of its shape and dtype)
        raise UnsupportedOperationError(
            "an in-place matrix product (c @= b)",
            "numpy writes the product into c, checking its shape and casting; write "
            "c[...] = c @ b, or c = c @ b for a new array.")

    def __matmul__(self, other: Any) -> Any:
        return record_call(np.matmul, "matmul", (self, other), {})

    def __rmatmul__(self, other: Any) -> Any:
        return record_call(np.matmul, "matmul", (other, self), {})

    # the array API's device and namespace, as numpy's arrays answer (array-API code such
    # as scipy's asks for them)
    @property
    def device(self) -> str:
        return "cpu"

    def to_device(self, device: Any, /, *, stream: Any = None) -> Tracer:
        np.empty(0).to_device(device, stream=stream)  # numpy's error for another device
        return self

    def __array_namespace__(self, *, api_version: Any = None) -> Any:
        return np.empty(0).__array_namespace__(api_version=api_version)

    @property
    def T(self) -> Any:
        return record_call(np.transpose, "transpose", (self,), {})

    @property
    def mT(self) -> Any:
        return record_call(np.matrix_transpose, "matrix_transpose", (self,), {})

    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        target = shape[0] if len(shape) == 1 else shape
        if isinstance(target, (int, np.integer)):
            target = (target,)  # (numpy's meaning; dask's reshape takes a tuple only)
        return record_call(np.reshape, "reshape", (self, target), kwargs)

    def transpose(self, *axes: Any) -> Any:
        arguments = (self,) if not axes else (self, axes[0] if len(axes) == 1 else axes)
        return record_call(np.transpose, "transpose", arguments, {})

    def flatten(self, order: str = "C") -> Any:
        # (order given only when not numpy's default: dask's ravel takes none)
        return _copy(record_call(np.ravel, "ravel", (self,),
                                 {} if order == "C" else {"order": order}))

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
        return record_call(_view, "view", (self,) if dtype is None else (self, dtype), {})

    def __getattr__(self, name: str) -> Any:
        if self.sequence and name in _SEQUENCE_METHODS:
            self._as_sequence(f"list.{name}")
        record = METHODS.get(name)
        function = None if record is None else record.function
        if record is not None and record.kind is Kind.WRITER:  # x.sort(): into a copy
            return lambda *args, **kwargs: self._write(record.function, record.name, args,
                                                       kwargs)

        def method(*args: Any, **kwargs: Any) -> Any:
            assert function is not None  # (given out only for a method numfuse knows)
            if function in FUNCTIONS:
                return FUNCTIONS[function](self, *args, **kwargs)
            return record_call(function, name, (self, *args), kwargs)

        if self.node.kind == CONST and not name.startswith("__") and \
                hasattr(np.ndarray, name):  # a constant has every ndarray attribute
            attribute = getattr(np.ndarray, name)
            if not callable(attribute):
                return getattr(self.node.value.value, name)

            def constant_method(*args: Any, **kwargs: Any) -> Any:
                if function is not None and has_tracer((args, kwargs)):
                    return method(*args, **kwargs)  # (a traced operand: traced as well)
                return _eager(attribute, (self, *args), kwargs)

            return constant_method
        if function is None or name.startswith("__"):
            raise AttributeError(
                f"traced arrays have no attribute {name!r}; numfuse supports the array "
                f"methods {', '.join(sorted(METHODS))} and the numpy functions in the README"
            )
        return method

    # --- array methods ----------------------------------------------------------
    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe",
               subok: bool = True, copy: bool = True) -> Tracer:
        order = memory_order(order) or "K"
        if order in ("F", "A") and self.node.ndim > 1:  # numpy's layout: numpy's copy
            return record_call(np.ndarray.astype, "astype", (self, dtype),
                               {"order": order, "casting": casting, "copy": copy})
        converted = astype(self, dtype, casting=casting)
        if not copy and order in ("K", "A") and converted.node.dtype == self.node.dtype \
                and not _immutable(self.node):
            return self  # numpy's: the array itself (a write then is a write into it)
        return converted

    @property
    def real(self) -> Tracer:
        result: Tracer = _real(self)  # (a view of this array, as np.real's)
        return result

    @property
    def imag(self) -> Tracer:
        result: Tracer = _imag(self)
        return result

    def byteswap(self, inplace: bool = False) -> Any:
        swapped = record_call(np.ndarray.byteswap if self.node.ndim else _byteswap,
                              "ndarray.byteswap", (self,), {})
        if not inplace:
            return swapped
        self[...] = swapped  # numpy swaps the bytes in place and returns the array
        return self

    def conj(self) -> Any:
        if self.node.dtype.kind != "c":  # numpy's method gives the array itself
            return self
        if self.node.weak:  # a Python complex's conjugate is a Python complex
            return _operator(np.conjugate, self)
        return apply_ufunc(np.conjugate, (self,), {})

    conjugate = conj

    def clip(self, min: Any = None, max: Any = None, **kwargs: Any) -> Any:
        return clip(self, min, max, **kwargs)  # (the method's bounds are both optional)

    def round(self, decimals: int = 0) -> Any:
        return round_(self, decimals)

    def _as_sequence(self, operation: str) -> None:
        """Raise for ``operation``, Python's on the list or tuple argument ``self`` (its
        items traced as an array): numpy runs the function."""
        raise ConcretizationError(
            f"{operation} of a list or tuple argument",
            "the list's own method (numpy would not see it): numpy runs this function as "
            "written; to fuse it, make the argument an array (np.asarray) first.")

    def __copy__(self) -> Any:  # copy.copy(x): an array's copy; a Python number is itself
        return self if self.node.weak else self.copy()

    def __deepcopy__(self, memo: Any) -> Any:
        return self.__copy__()

    def copy(self, order: str = "K") -> Any:
        if self.sequence:
            self._as_sequence("list.copy")
        order = memory_order(order) or "K"
        if order in ("F", "A") and self.node.ndim > 1:  # numpy's layout: numpy's copy
            return record_call(np.ndarray.copy, "ndarray.copy", (self,), {"order": order})
        # ndarray.copy keeps a 0-d array an array; a numpy scalar's copy is a scalar
        return fresh_copy(self.node, scalar=self.node.scalar)

    def __round__(self, ndigits: int | None = None) -> Any:
        # numpy arrays have no __round__; a numpy scalar rounds to a Python int without
        # ndigits, to a numpy scalar with them
        if self.node.ndim != 0 or not (self.node.scalar or self.node.weak):
            raise TypeError("type numpy.ndarray doesn't define __round__ method")
        if ndigits is None:
            return _concrete("round() of a traced value", self.node, lambda value: round(value))
        if self.node.weak:  # a Python number: Python's rounding (of its decimal value)
            return _concrete("round() of a Python number", self.node,
                             lambda value: round(value[()].item(), ndigits))
        return round_(self, ndigits)


def _python_number_tracer(python: type) -> type:
    """The traced values standing for Python numbers of type ``python``: the array
    attributes a ``python`` number lacks (``dtype``, ``sum``, ``astype``...) raise
    AttributeError, as on the number (``hasattr(s, "dtype")`` is False); numfuse's own
    (``node``) stay."""
    def lacks(name: str) -> bool:
        return not name.startswith("_") and hasattr(np.ndarray, name) and \
            not hasattr(python, name)

    def missing(self: Tracer) -> Any:  # (a property raising this, then __getattr__)
        raise AttributeError

    def attribute(self: Tracer, name: str) -> Any:
        if lacks(name):
            raise AttributeError(f"{python.__name__!r} object has no attribute {name!r}")
        return Tracer.__getattr__(self, name)

    lacking = {name: property(missing) for name in dir(Tracer) if lacks(name)}
    return type(f"Traced{python.__name__.title()}", (Tracer,),
                {"__slots__": (), "__getattr__": attribute, **lacking})


_PYTHON_NUMBER_TRACERS = {kind: _python_number_tracer(python) for kind, python in (
    ("b", bool), ("i", int), ("u", int), ("f", float), ("c", complex))}


# the methods of a list or tuple (``copy`` apart: an array has one too)
_SEQUENCE_METHODS = frozenset(name for kind in (list, tuple) for name in dir(kind)
                              if not name.startswith("_") and name != "copy")


def tracers_in(item: Any) -> list[Tracer]:
    """The tracers in ``item`` (a tracer, or a tuple, list or dict holding some)."""
    return [leaf for leaf in pytree.leaves(item) if isinstance(leaf, Tracer)]


def has_tracer(item: Any) -> bool:
    """Whether ``item`` is a tracer or a container holding one."""
    return pytree.any_leaf(lambda leaf: isinstance(leaf, Tracer), item)


class _Flat:
    """``x.flat``: indexing it indexes ``x.ravel()``; writing through it is refused."""

    __slots__ = ("array",)

    def __init__(self, array: Tracer) -> None:
        self.array = array

    def __getitem__(self, key: Any) -> Any:
        item = self.array.ravel()[key]
        # numpy's x.flat[a:b] is a copy, never a view of x
        return item.copy() if isinstance(item, Tracer) and not item.owned else item

    def __setitem__(self, key: Any, value: Any) -> None:
        _inplace("x.flat[...] = v (write x.ravel() into a new array instead)")

    def __iter__(self) -> Any:
        return iter(self.array.ravel())  # its length: the array's size (per shape)

    def __len__(self) -> int:
        return self.array.size


# ``x.view(dtype)`` and ``x.byteswap()`` (of a 0-d value) as numpy calls: the methods of
# the value (a numpy scalar's too: numpy's ``np.ndarray.view`` takes arrays only).
def _view(value: Any, *args: Any) -> Any:
    return value.view(*args)


def _byteswap(value: Any) -> Any:
    return value.byteswap()


def _list_index(key: Any) -> bool:
    """Whether ``key`` indexes a Python list as an int does: an int or numpy integer (not
    a bool), or a traced 0-d integer (an int argument, a computed index)."""
    if isinstance(key, Tracer):
        return key.node.ndim == 0 and key.node.dtype.kind in "iu"
    return isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_))


def _concrete(operation: str, node: Node | None = None,
              convert: Callable[[Any], Any] | None = None) -> Any:
    """``convert`` of a constant's value; for anything else a ``ConcretizationError`` (a
    ``StaticArgumentError`` naming the scalar arguments the value comes from, if any)."""
    if node is not None and node.kind == CONST and convert is not None:
        return convert(np.asarray(node.value.value))
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
            found.append(item.index)
    return tuple(found)


def _data_dependent_size(operation: str, node: Node) -> Any:
    """Raise the ``ConcretizationError`` for reading a size that depends on the values
    (``len(x[mask])``), naming where it comes from and how to count it instead."""
    origin = next((item for item in toposort([node]) if item.kind == NUMPY and item.moving),
                  node)
    name = origin.op.partition("[")[0]
    if name == "getitem" and any(source.dtype == bool for source in origin.inputs[1:]):
        source, count = "a boolean mask selection x[mask]", "np.count_nonzero(mask)"
    elif name in ("nonzero", "flatnonzero", "argwhere"):
        source, count = f"np.{name}(x)", "np.count_nonzero(x)"
    elif name in ("compress", "extract"):
        source, count = f"np.{name}(condition, x)", "np.count_nonzero(condition)"
    else:
        source, count = ("indexing" if name == "getitem" else f"np.{name}"), ""
    how = (f"{count} is that size as a traced value, usable in arithmetic"
           + (" (x[mask].sum() / np.count_nonzero(mask))" if "mask" in count else "")
           + "; " if count else "")
    raise ConcretizationError(
        f"{operation} whose size depends on the values (from {source})",
        "numfuse compiles one function for all values, so this size is only known when the "
        f"function runs and is no Python int: {how}reductions over the values (.sum(), "
        ".mean(), .max()) need no size. For Python control flow on the size, compute it "
        "outside the jitted function.")


def _inplace(operation: str) -> Any:
    raise UnsupportedOperationError(
        f"in-place {operation} on an argument or a view of one",
        "numfuse never writes into its arguments or into arrays that share their memory "
        "with another value; write `x = x + 1` instead of `x += 1`, or copy first "
        "(`x = x.copy()`).",
    )


def _named(value: Any, frame: types.FrameType) -> bool:
    """Whether a variable of ``frame`` holds ``value``, or a list, tuple or dict held by
    one (``views[0] += 1``) does (else it is a temporary of the statement running
    there)."""
    for item in frame.f_locals.values():
        if item is value:
            return True
        if isinstance(item, dict):
            item = item.values()
        if isinstance(item, (list, tuple, type({}.values()))) and \
                any(element is value for element in item):
            return True
    return False


# Instructions that only move the stack between an augmented operator and the store of its
# result (``y[0] += 1`` is ``t = y[0]; t = t.__iadd__(1); y[0] = t``).
_STACK_MOVES = frozenset({"SWAP", "ROT_TWO", "ROT_THREE", "ROT_FOUR", "CACHE", "NOP",
                          "EXTENDED_ARG"})
_instructions: weakref.WeakKeyDictionary[types.CodeType, dict[int, str]] = \
    weakref.WeakKeyDictionary()


def instruction_names(code: types.CodeType) -> dict[int, str]:
    """The name of each instruction of ``code`` by its offset (kept per code object)."""
    names = _instructions.get(code)
    if names is None:
        names = _instructions[code] = {instruction.offset: instruction.opname
                                       for instruction in dis.get_instructions(code)}
    return names


def stored_by_item(frame: types.FrameType) -> bool:
    """Whether the instruction running in ``frame`` (an augmented operator) is followed
    by an item assignment of its result: ``y[key] op= v``."""
    names = instruction_names(frame.f_code)
    offsets = sorted(offset for offset in names if offset > frame.f_lasti)
    for offset in offsets:
        if names[offset] not in _STACK_MOVES:
            return names[offset] == "STORE_SUBSCR"
    return False


def augmented_item(view: Any) -> bool:
    """Whether ``view op= v``, called from the user's code two frames up, is ``y[key] op=
    v`` on a temporary view: numpy's in-place write into it is then the same as assigning
    the result to ``y[key]``, which the next instruction does."""
    frame = sys._getframe(2)
    return stored_by_item(frame) and not _named(view, frame)


def _immutable(node: Node) -> bool:
    """A numpy scalar or a Python number: ``+=`` rebinds, item assignment fails."""
    return node.weak or (node.scalar and node.ndim == 0)


def _scalar_type_name(node: Node) -> str:
    """``float`` for a Python number, ``numpy.float64`` for a numpy scalar."""
    if node.weak:
        return type(node.dtype.type(0).item()).__name__
    return f"numpy.{node.dtype.type.__name__}"


# Imported last: these modules and this one use each other's functions at call time.
from .constants import _constants_only, _eager  # noqa: E402
from .functions import (  # noqa: E402
    FUNCTIONS,
    _copy,
    _imag,
    _real,
    astype,
    clip,
    fresh_copy,
    memory_order,
    round_,
)
from .probes import LINALG_UFUNCS, _moving_axes, record_call  # noqa: E402
from .ufuncs import _fast_power, _operator, apply_ufunc, assign_item, together  # noqa: E402
