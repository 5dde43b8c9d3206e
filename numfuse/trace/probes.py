"""Non-fusible numpy calls: run on stand-ins to learn their results' shapes and dtypes,
then recorded as numpy nodes."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import dis
import functools
import inspect
import itertools
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

from .. import pytree, reductions
from ..calls import (
    TRACED,
    Apart,
    CallOutput,
    NumpyCall,
    PythonComplexOperator,
    PythonNumber,
    Written,
    is_elementwise_call,
)
from ..dtypes import KERNEL_DTYPES
from ..errors import (
    ConcretizationError,
    SizeDependentError,
    StaticArgumentError,
    UnsupportedOperationError,
)
from ..graph import (
    CONST,
    ELEMENTWISE,
    NUMPY,
    Call,
    Node,
    broadcast_shapes,
)
from ..registry import Kind, fresh_result, lookup
from . import errstate
from .nodes import _advice_for

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
    found = memo.get(node)
    if found is not None:
        return found
    for item in _unknown_in_order(node, memo):
        if _acts_elementwise(item):
            try:
                memo[item] = broadcast_shapes(  # type: ignore[assignment]  # (sizes in, sizes out)
                    *(memo[source] for source in item.inputs))
            except ValueError:  # a data-dependent size meets an argument's: take the latter
                memo[item] = _known_broadcast(item, [memo[source] for source in item.inputs])
        elif isinstance(getattr(item.call, "fn", None), Written):
            # a write (``y[0] = v`` builds its node itself) keeps its array's shape
            memo[item] = memo[item.inputs[0]]
        else:
            memo[item] = tuple(_DEFAULT_SIZE if size is None else size for size in item.shape)
    return memo[node]


def _unknown_in_order(node: Node, memo: dict[Node, tuple[int, ...]]) -> list[Node]:
    """``node`` and the nodes it depends on that ``memo`` has no shape for, operands
    first: the walk stops at known nodes, so tracing a long program (a loop unrolled)
    does not walk the whole graph again at each step."""
    order: list[Node] = []
    done: set[Node] = set()
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        item, expanded = stack.pop()
        if expanded:
            order.append(item)
            continue
        if item in done or item in memo:
            continue
        done.add(item)
        stack.append((item, True))
        stack.extend((source, False) for source in item.inputs
                     if source not in done and source not in memo)
    return order


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


def _strip(item: Any, nodes: list[Node]) -> Any:
    """Replace tracers by ``TRACED`` (collecting their nodes), keep everything else.  A
    function among them that uses a traced value (``np.piecewise(x, conds, [lambda v:
    a * v])``) is refused: the call runs when the program does, and the traced value
    inside it would not be the argument's value then."""
    for leaf in pytree.leaves(item):
        if callable(leaf) and (used := _tracers_used(leaf)):
            arguments = [_scalar_arguments(tracer.node) for tracer in used]
            if all(arguments):  # number arguments: their values (one compile per value)
                raise StaticArgumentError(
                    "a function given to a numpy call that uses a number argument",
                    "the argument is passed as a constant", tuple(sorted(
                        {index for indices in arguments for index in indices})))
            raise UnsupportedOperationError(
                f"a function given to a numpy call that uses a traced value "
                f"({getattr(leaf, '__qualname__', type(leaf).__name__)})",
                "pass the values it uses as arguments of the numpy call, or compute them "
                "outside the jitted function.")
    if not has_tracer(item):
        return item

    def strip(leaf: Any) -> Any:
        if isinstance(leaf, Tracer):
            nodes.append(leaf.node)
            return TRACED
        return leaf

    return pytree.map_leaves(strip, item)


def _tracers_used(fn: Any) -> list[Tracer]:
    """The traced values the Python function ``fn`` holds: in its closure, defaults or
    bound instance (a function of numpy or numfuse holds none)."""
    function = getattr(fn, "__func__", fn)
    held = []
    for cell in getattr(function, "__closure__", None) or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:  # a cell not filled yet
            continue
    held += list(getattr(function, "__defaults__", None) or ())
    held += list((getattr(function, "__kwdefaults__", None) or {}).values())
    if getattr(fn, "__self__", None) is not None and hasattr(fn, "__func__"):
        held.append(fn.__self__)
    return [tracer for value in held for tracer in tracers_in(value)]



def _probe(node: Node, scale: int, varied: bool) -> Any:
    """A stand-in for ``node``, its free sizes multiplied by ``scale``: zero-stride zeros,
    or (``varied``) seeded values in [0.5, 1.5) for calls that reject zeros (``inv``),
    stacks of square matrices made symmetric positive definite (``cholesky``)."""
    if node.kind == CONST:
        return node.value.value
    if node.weak:
        return node.dtype.type(1).item()
    example = _example_shape(node)
    shape = tuple(size * scale if free is None else size
                  for size, free in zip(example, node.shape, strict=True))
    if varied:
        values = np.random.default_rng(0).random(shape) + 0.5
        square = len(shape) >= 2 and shape[-1] == shape[-2]
        if square:
            values = values + np.swapaxes(values, -1, -2) + np.eye(shape[-1]) * 2 * shape[-1]
        if node.dtype.kind != "b":
            stand_in = values.astype(node.dtype)
        else:  # (square: identities, which inv and cholesky take; all True is singular)
            stand_in = np.broadcast_to(np.eye(shape[-1], dtype=bool), shape).copy() \
                if square else values > 1
    else:
        stand_in = np.broadcast_to(np.zeros((), node.dtype), shape)
    return stand_in[()] if node.scalar and not shape else stand_in


def _filled(node: Node, fill: str, seed: int) -> Any:
    """A stand-in for ``node`` holding ``fill`` data: ``ones``, ``distinct`` values (none
    shared with another operand), seeded ``random`` values (small integers, normal
    floats, a mix of True and False), ``large`` ones (integers beyond the stand-ins'
    sizes, which ``np.bincount(x, minlength=5)`` counts up to) or ``negative`` ones
    (signed values from -3 to 3, a Python number -3; unsigned ones as ``random``) or
    ``alternate`` ones (bool operands all True or all False by turns)."""
    if node.kind == CONST:
        return _probe(node, 1, varied=False)
    if node.weak:  # a Python number: 1 or 0 (True or False as a mask), -3 if negative
        if fill == "negative" and node.dtype.kind in "ifc":
            return node.dtype.type(-3).item()
        return node.dtype.type(fill == "ones").item()
    shape = _example_shape(node)
    if fill == "ones":
        return np.ones(shape, node.dtype)
    if fill == "alternate":  # bool operands all True, all False, ...; others distinct
        return np.full(shape, seed % 2 == 0) if node.dtype.kind == "b" else \
            _filled(node, "distinct", seed)
    if fill == "distinct":
        count = int(np.prod(shape))
        return (np.arange(count) % 2 == 1 if node.dtype.kind == "b" else
                np.arange(seed * count, (seed + 1) * count)).astype(node.dtype).reshape(shape)
    if fill == "large":
        count = int(np.prod(shape))
        spread = np.arange(count) * 7 + 11 + seed * count
        return (spread % 3 == 0 if node.dtype.kind == "b" else
                spread.astype(node.dtype)).reshape(shape)
    rng = np.random.default_rng(seed)
    if node.dtype.kind == "b":
        return rng.random(shape) < 0.5
    if fill == "negative" and node.dtype.kind in "ifc":  # -3, -2, ..., 3, -3, ...
        count = int(np.prod(shape))
        return (np.arange(count) % 7 - 3).astype(node.dtype).reshape(shape)
    if node.dtype.kind in "iu":
        return rng.integers(0, 4, shape).astype(node.dtype)
    values = rng.standard_normal(shape) * 3
    if node.dtype.kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(node.dtype)


def _run_on_data(call: NumpyCall, nodes: Sequence[Node]) -> list[Any]:
    """What ``call`` returns on stand-ins holding other data than the zero probes (all
    ones, distinct, random and large values): its sizes may depend on them."""
    results = []
    # (bool operands hold two values: one all True and the next all False share none,
    # which np.intersect1d of a one-element operand needs to be seen empty)
    alternate = ("alternate",) if any(node.dtype.kind == "b" for node in nodes) else ()
    for fill in ("ones", "distinct", "random", "large", *alternate):
        try:
            results.append(call.invoke([_filled(node, fill, seed)
                                        for seed, node in enumerate(nodes)]))
        except Exception:  # numpy rejects these values; the other stand-ins decide
            continue
    return results


# Matrix products whose numpy call takes BLAS's symmetric product for two operands of
# one array (``x @ x.T``), and the calls through which an operand is a view of another.
_PRODUCTS = frozenset({np.matmul, np.dot, np.inner, np.tensordot, np.vdot})
_VIEWS = frozenset({"transpose", "matrix_transpose", "swapaxes", "moveaxis", "getitem",
                    "reshape", "ravel", "squeeze", "expand_dims", "atleast_2d"})


def _computed_apart(args: Sequence[Any], nodes: Sequence[Node]) -> bool:
    """Whether the first two operands of a matrix product are traced values computed
    apart (views of different nodes), which common-subexpression elimination may make one
    array where numpy had two."""
    if len(args) < 2 or not (isinstance(args[0], Tracer) and isinstance(args[1], Tracer)):
        return False

    def base(node: Node) -> Node:
        while node.kind == NUMPY and node.op in _VIEWS and node.inputs:
            node = node.inputs[0]
        return node

    return base(nodes[0]) is not base(nodes[1])


def _check_signs(call: NumpyCall, nodes: Sequence[Node], first: Any) -> None:
    """Raise where ``call`` gives another dtype for negative values than the probes found
    (``np.emath.sqrt`` of a negative number is complex): numpy then runs the function."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            negative = call.invoke([_filled(node, "negative", seed)
                                    for seed, node in enumerate(nodes)])
    except Exception:  # numpy rejects these values: nothing learnt
        return
    if isinstance(negative, (np.ndarray, np.generic)) and \
            isinstance(first, (np.ndarray, np.generic)) and negative.dtype != first.dtype:
        raise UnsupportedOperationError(
            f"np.{call.name} with these arguments",
            "the dtype of its result depends on the values (complex for negative ones), "
            "which numfuse cannot trace; compute it outside the jitted function.")


# Each node's moving axes, once found (a node never changes): a loop of N steps asked for
# those of its latest value N times, walking all earlier steps each time (1,000 steps:
# 4 s of tracing).
_MOVING: weakref.WeakKeyDictionary[Node, frozenset[int]] = weakref.WeakKeyDictionary()


def _moving_axes(node: Node) -> frozenset[int]:
    """The axes of ``node`` whose size depends on the values: those of a data-dependent
    call (its ``moving`` param) and, through elementwise work, of its operands -- unless
    another operand's axis, not data-dependent and not of length 1, decides the size."""
    known = _MOVING.get(node)
    if known is not None:
        return known
    found: dict[Node, frozenset[int]] = {}
    stack = [node]
    while stack:
        item = stack[-1]
        if item not in found and (known := _MOVING.get(item)) is not None:
            found[item] = known
        if item in found:
            stack.pop()
            continue
        pending = [source for source in item.inputs if source not in found] \
            if _acts_elementwise(item) else []
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        if _acts_elementwise(item):
            moving: set[int] = set()
            fixed: set[int] = set()  # axes an operand of a size other than 1 decides
            for source in item.inputs:
                offset = item.ndim - source.ndim
                for axis in range(source.ndim):
                    if axis in found[source]:
                        moving.add(axis + offset)
                    elif source.shape[axis] != 1:
                        fixed.add(axis + offset)
            found[item] = frozenset(moving - fixed)
        else:
            found[item] = item.moving
        _MOVING[item] = found[item]
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


def _view_of_stand_ins(call: NumpyCall, nodes: Sequence[Node]) -> bool:
    """Whether ``call``'s result on stand-ins may share memory with one of them (True
    when it fails on them)."""
    stand_ins = [_probe(node, 1, varied=False) for node in nodes]
    with np.errstate(all="ignore"), warnings.catch_warnings(), _quiet_libraries():
        warnings.simplefilter("ignore")
        try:
            result = call.invoke(stand_ins)
        except Exception:
            return True
    return any(np.may_share_memory(part, stand_in)
               for part in pytree.leaves(result) if isinstance(part, np.ndarray)
               for stand_in in stand_ins if isinstance(stand_in, np.ndarray))


_handlers: weakref.WeakKeyDictionary[
    types.CodeType, tuple[tuple[int, int, frozenset[str] | None], ...]] = \
    weakref.WeakKeyDictionary()
# The names of the exceptions an ``except`` clause catches a ufunc's error by: its class
# and bases (FloatingPointError under ``np.errstate(...="raise")``, ValueError for
# operands that do not broadcast or an integer to a negative power, OverflowError for a
# Python int beyond the dtype), which a kernel raises when the function has returned.
_CAUGHT_BY = {error: {error, "Exception", "BaseException"} | extra for error, extra in (
    ("FloatingPointError", {"ArithmeticError"}), ("OverflowError", {"ArithmeticError"}),
    ("ValueError", set()))}


def _except_ranges(code: types.CodeType) -> tuple[tuple[int, int, frozenset[str] | None], ...]:
    """The instruction ranges of ``code`` that an ``except`` clause guards (not a
    ``with`` block's exit nor a ``finally``): Python 3.11's exception table; each with
    the names its clauses match (None: any exception, a bare ``except`` or a clause
    naming what cannot be told)."""
    found = _handlers.get(code)
    if found is None:
        entries = getattr(dis.Bytecode(code), "exception_entries", ())
        instructions = {instruction.offset: instruction
                        for instruction in dis.get_instructions(code)}
        offsets = sorted(instructions)

        def caught(target: int, seen: frozenset[int]) -> frozenset[str] | str | None:
            """What the handler at ``target`` catches, following a ``with`` block's exit
            and the cleanups it passes the exception on through to the handler guarding
            them (a ``with np.errstate(...)`` block inside a ``try``); "": nothing."""
            handler = [instructions[offset] for offset in offsets if offset >= target]
            following = [instruction.opname for instruction in handler[:12]]
            if following[:1] == ["PUSH_EXC_INFO"] and "WITH_EXCEPT_START" not in following \
                    and ("CHECK_EXC_MATCH" in following or following[1:2] == ["POP_TOP"]):
                return _caught_names(handler)
            outer = [entry for entry in entries if entry.start <= target < entry.end]
            if not outer or outer[0].target in seen:
                return ""
            return caught(outer[0].target, seen | {target})

        ranges = []
        for entry in entries:
            names = caught(entry.target, frozenset())
            if not isinstance(names, str):
                ranges.append((entry.start, entry.end, names))
        found = _handlers[code] = tuple(ranges)
    return found


def _caught_names(handler: Sequence[dis.Instruction]) -> frozenset[str] | None:
    """The exception names the ``except`` clauses starting at ``handler`` (its first
    instruction is PUSH_EXC_INFO) match, or None for any: a bare ``except``, a clause
    naming a variable (which cannot be told)."""
    if handler[1].opname == "POP_TOP":
        return None  # a bare except
    names: set[str] = set()
    for position, instruction in enumerate(handler):
        if instruction.opname == "RERAISE":
            break  # no clause matched: the end of the clauses
        if instruction.opname != "CHECK_EXC_MATCH":
            continue
        for loaded in reversed(handler[:position]):  # the class or tuple matched
            if loaded.opname in ("LOAD_FAST", "LOAD_DEREF"):
                return None
            if loaded.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR"):
                names.add(str(loaded.argval))
            elif loaded.opname != "BUILD_TUPLE":
                break
    return frozenset(names)


def inside_try(errors: Sequence[str] = ()) -> bool:
    """Whether the traced function's code (or a function it called) is running inside a
    ``try`` block with an ``except`` clause -- one that may catch one of ``errors`` (the
    names of a ufunc's exceptions, ``_CAUGHT_BY``) when they are given."""
    frame: Any = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module == "numfuse.trace" and frame.f_code.co_name == "trace_graph":
            return False  # back at numfuse's call of the traced function
        if not module.startswith(("numfuse.", "numpy")) and any(
                start <= frame.f_lasti < end and (
                    not errors or names is None or
                    any(names & _CAUGHT_BY[error] for error in errors))
                for start, end, names in _except_ranges(frame.f_code)):
            return True
        frame = frame.f_back
    return False


def _not_overwriting(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
                     ) -> tuple[Sequence[Any], dict[str, Any]]:
    """``args`` and ``kwargs`` with ``overwrite_input=False`` (``np.median``,
    ``np.percentile`` & co.): a traced operand may be a value other expressions share
    (equal expressions are computed once), and numpy leaves the operand's contents
    undefined after such a call, so not overwriting it is numpy's contract too."""
    if kwargs.get("overwrite_input"):
        return args, {**kwargs, "overwrite_input": False}
    if fn in _OVERWRITING:
        index = _OVERWRITING[fn]
        if len(args) > index and args[index]:
            return (*args[:index], False, *args[index + 1:]), kwargs
    return args, kwargs


# numpy's functions taking ``overwrite_input``, and its position among their parameters
_OVERWRITING = {function: list(inspect.signature(function).parameters).index("overwrite_input")
                for function in (np.median, np.percentile, np.quantile, np.nanmedian,
                                 np.nanpercentile, np.nanquantile)}


def _positional_out(fn: Callable[..., Any], args: Sequence[Any],
                    kwargs: dict[str, Any]) -> bool:
    """Whether ``fn(*args, **kwargs)`` gives an ``out`` array by position
    (``np.cumsum(x, 0, None, y)``, ``x.sum(0, None, y)``)."""
    position = _out_position(fn)
    return position is not None and len(args) > position and args[position] is not None


@functools.lru_cache(maxsize=1024)
def _out_position(fn: Callable[..., Any]) -> int | None:
    """The position of ``fn``'s ``out`` parameter among its positional ones, or None."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    for position, parameter in enumerate(parameters):
        if parameter.kind not in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            return None
        if parameter.name == "out":
            return position
    return None


def record_call(fn: Callable[..., Any], name: str, args: Sequence[Any],
                kwargs: dict[str, Any], unlisted: bool = False) -> Any:
    """Record a non-fusible numpy call; numpy itself gives its result dtype and shape.

    An ``unlisted`` function (one numfuse knows nothing about) also runs on stand-ins
    holding other data, so that sizes depending on the values are found, and its result is
    taken to be a possible view of its operands."""
    if inside_try() and has_tracer((args, kwargs)):
        raise ConcretizationError(
            f"np.{name} inside a try block with an except clause",
            "the error it may raise when the compiled function runs could not reach the "
            "function's except clause; call it outside the try block, or outside the "
            "jitted function.")
    args, kwargs = _not_overwriting(fn, args, kwargs)
    nodes: list[Node] = []
    static_args = tuple(_strip(item, nodes) for item in args)
    static_kwargs = {key: _strip(item, nodes) for key, item in kwargs.items()}
    if ("out" in static_kwargs and static_kwargs["out"] is not None) or \
            _positional_out(fn, args, kwargs):
        raise UnsupportedOperationError(
            f"np.{name}(..., out=...) inside a traced function",
            "numfuse allocates results itself; return the value instead of writing into out=.",
        )
    if nodes and all(node.kind == CONST for node in nodes):
        return _eager(fn, args, kwargs)
    # the nodes of the arguments beside the data (the first argument): an index, axis=,
    # a count, a split point
    beside = nodes[len(tracers_in(args[0])) if args and fn not in _SIZE_FIRST else 0:]
    if not isinstance(fn, (np.ufunc, PythonComplexOperator, Written)) \
            and fn not in _SCALAR_DATA:
        # a scalar argument as axis=, n=, q=...: the value may decide the result's shape
        # (the first argument is the data: np.sum(s), np.stack([s, t]) stay traced; what
        # a write stores is data too)
        arguments = sorted({index for node in beside for index in _scalar_arguments(node)})
        if arguments:
            raise StaticArgumentError(f"np.{name} with a scalar argument",
                                      _advice_for(f"np.{name} with a scalar argument"),
                                      tuple(arguments))
    call = NumpyCall(Apart(fn) if fn in _PRODUCTS and _computed_apart(args, nodes) else fn,
                     name, static_args, static_kwargs)
    quiet = _quiet_libraries() if unlisted or name.startswith(("linalg.", "poly")) \
        else contextlib.nullcontext()
    with np.errstate(all="ignore"), warnings.catch_warnings(), quiet:
        warnings.simplefilter("ignore")
        moves = any(_moving_axes(node) for node in nodes)
        masked = fn is operator.getitem and any(node.dtype.kind == "b" for node in nodes[1:])
        # a traced array beside the data may decide the result's size (np.repeat's counts,
        # np.split's indices): learnt from other data as for a data-dependent function
        # (or an integer computed in the function: np.split(x, [np.argmax(x)]))
        sizing = any(node.ndim or (node.dtype.kind in "iu" and not isinstance(fn, np.ufunc)
                                   and fn not in _SCALAR_DATA) for node in beside)
        variants = _run_on_data(call, nodes) if _data_dependent(fn) or masked or unlisted \
            or sizing else []
        variants += _run_resized(call, nodes) if moves else []
        # a write gives the array it writes into (its stand-in when the others' values do
        # not fit together: a mask of zeros selecting fewer than the values to add)
        writes = isinstance(fn, Written) and isinstance(args[0], Tracer)
        try:
            first = _run_probe(call, nodes, 1)
        except Exception as error:
            if variants:
                first = variants[0]  # works for some values or sizes only (x[mask] of 1)
            elif writes:
                first = _probe(nodes[0], 1, varied=False)
            else:
                if unlisted:
                    _failed_on_stand_ins(name, error)
                raise
        if unlisted:
            _check_signs(call, nodes, first)
        try:
            second = _run_probe(call, nodes, 2)
        except Exception:
            second = _probe(nodes[0], 2, varied=False) if writes else first
    if _is_python_number(first):  # np.allclose: a Python bool, weak in later arithmetic
        tracer = _call_tracer(NumpyCall(PythonNumber(fn), name, static_args, static_kwargs),
                              nodes, np.asarray(first), np.asarray(second), True)
        tracer.node = dataclasses.replace(tracer.node, weak=True)
        return tracer
    fresh = fresh_result(fn, static_args, static_kwargs) or \
        isinstance(fn, (np.ufunc, Written)) or (
        fn is operator.getitem and _advanced_index(static_args[1], beside)) or \
        isinstance(getattr(fn, "__self__", None), np.ufunc) or (  # np.add.outer(x, y)
            (fn is np.einsum or unlisted) and  # einsum 'ii->i' is a view
            not _view_of_stand_ins(call, nodes))  # (np.diag_indices_from(K): new arrays)
    if isinstance(first, (tuple, list)) and isinstance(second, (tuple, list)) \
            and len(first) != len(second):
        raise SizeDependentError(  # np.unstack, np.split into pieces of a given size
            f"np.{name} returns as many values as an argument's size",
            "numfuse compiles such functions once per argument shape.")
    if isinstance(first, (tuple, list)) and first and len(first) == len(second):
        # several results (np.linalg.eigh, np.meshgrid, np.frexp): one call per item
        parts: list[Tracer] = []

        def items(first: Any, second: Any, variants: Sequence[Any], path: tuple[int, ...]
                  ) -> Any:
            """The results at ``path``: a call per array, nested lists and tuples kept
            (np.histogramdd's edges are a list of arrays)."""
            if path and isinstance(first, (tuple, list)) and first and \
                    isinstance(second, (tuple, list)) and len(first) == len(second):
                nested = [items(item, second[index], [variant[index] for variant in variants],
                                (*path, index)) for index, item in enumerate(first)]
                return type(first)(*nested) if hasattr(first, "_fields") else \
                    type(first)(nested)
            index = path if len(path) > 1 else path[0]
            label = "".join(f"[{position}]" for position in path)
            part = _call_tracer(NumpyCall(CallOutput(fn, index), f"{name}{label}",
                                          static_args, static_kwargs), nodes, first, second,
                                fresh, variants)
            parts.append(part)
            return part

        results = [items(item, second[index], [variant[index] for variant in variants],
                         (index,)) for index, item in enumerate(first)]
        if not fresh:
            _share((args, tuple(kwargs.values())), parts)
        return type(first)(*results) if hasattr(first, "_fields") else type(first)(results)
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
_SCALAR_DATA = frozenset({operator.getitem, np.full, np.full_like, np.dot, np.vdot, np.inner,
                          np.outer, np.kron, np.cross, np.polyval})
# Calls whose first argument is a size, not data (``np.fft.fftfreq(n, d)``): a scalar
# argument there is static too.
_SIZE_FIRST = frozenset({np.fft.fftfreq, np.fft.rfftfreq})


def _call_tracer(call: NumpyCall, nodes: Sequence[Node], first: Any, second: Any,
                 fresh: bool, variants: Sequence[Any] = ()) -> Tracer:
    """The node of ``call``, whose probes returned ``first`` and ``second`` (and, for a
    call whose sizes depend on the values, ``variants`` on other data)."""
    name = call.name
    if isinstance(call.fn, CallOutput):  # CallOutput turns a Python number into a scalar
        first, second = (value if isinstance(value, np.ndarray) else np.asarray(value)[()]
                         for value in (first, second))  # (a 0-d array stays one)
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
    # (complex values reduced into a real dtype: numpy's call, which warns ComplexWarning)
    reduction = reductions.recognise(call.fn, name, call.args, call.kwargs, nodes[0].ndim,
                                     dtype) if len(nodes) == 1 and \
        nodes[0].dtype in KERNEL_DTYPES and dtype in KERNEL_DTYPES and \
        not (nodes[0].dtype.kind == "c" and dtype.kind in "iuf") else None
    node = Node(name, NUMPY, tuple(nodes), dtype, shape,
                Call(call, frozenset(moving), reduction),
                scalar=isinstance(first, np.generic), errstate=errstate.current())
    memo = _examples.get()
    if memo is not None:
        # (a size chosen from the data is at least what the probe gave: np.bincount's
        # minlength, which a reshape of the counts may need)
        memo[node] = tuple(max(_DEFAULT_SIZE, size) if axis in moving else size
                           for axis, size in enumerate(np.shape(first)))
    return Tracer(node, owned=fresh or reduction is not None or isinstance(first, np.generic))


def _data_dependent(fn: Any) -> bool:
    record = lookup(fn)
    return record is not None and record.kind is Kind.DATA_DEPENDENT


def _advanced_index(key: Any, traced: Sequence[Node]) -> bool:
    """Whether indexing with ``key`` copies (numpy's advanced indexing); ``traced``: the
    nodes of its traced parts, in order.  A traced integer (a Python int argument, an
    ``argmax``) is a basic index, as numpy takes an integer scalar: the item is a view."""
    parts = key if isinstance(key, tuple) else (key,)
    indices = iter(traced)
    for part in parts:
        if part is TRACED:
            node = next(indices, None)
            if node is None or node.ndim or node.dtype.kind not in "iu" or not (
                    node.scalar or node.weak):
                return True
        elif isinstance(part, (list, np.ndarray)):
            return True
    return False


# Imported last: these modules and this one use each other's functions at call time.
from .constants import _eager  # noqa: E402
from .functions import _share  # noqa: E402
from .tracer import (  # noqa: E402
    Tracer,
    _scalar_arguments,
    has_tracer,
    tracers_in,
)
