"""Gradients fused with the function: ``grad``, ``value_and_grad`` and ``vjp``.

``value_and_grad(fn)`` is a jitted function (``api.Jitted``) of a wrapper that, when
traced, calls ``fn`` on the traced arguments and then adds the backward pass to the same
graph (``backward``): the forward values, the gradients and whatever both read are one
program, so the partitioner puts forward and backward work into the same kernels and each
input is read once.  Everything ``numfuse.jit`` does applies: signatures, static
arguments, dict arguments, ``numfuse.compile``, ``explain()`` (backward nodes are marked),
dask arrays.

Nodes made by ``fn`` record the user's source line (``graph.tracing_phase("forward")``) so
an operation without a derivative rule is reported where the user wrote it; nodes of the
backward pass are marked ``backward``.
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import pytree
from ..api import Jitted, argument_numbers
from ..graph import Node, shape_text, tracing_phase
from ..trace import Tracer, traced_now
from ..trace.functions import fresh_copy
from ..trace.nodes import const_node
from .backward import backward, differentiable
from .values import NotDifferentiableError, broadcast_to_node

__all__ = ["NotDifferentiableError", "grad", "value_and_grad", "vjp"]


def value_and_grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, *, static_argnums: int | Sequence[int] = (),
                   cache: bool = True, threads: int | None = None,
                   fastmath: Any = False) -> Jitted:
    """A jitted function returning ``(fn(*args), gradient)``, the gradient being that of
    ``fn``'s scalar result with respect to argument ``argnums`` (a tuple of gradients for
    a tuple of argnums; a dict of gradients for a dict argument).  With ``has_aux``, ``fn``
    returns ``(value, aux)`` and the result is ``((value, aux), gradient)``.  Other options
    are ``numfuse.jit``'s; ``fn`` may be a ``numfuse.jit`` function (its options apply)."""
    return _jitted(fn, argnums, has_aux, True, static_argnums, cache, threads, fastmath)


def grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
         *, static_argnums: int | Sequence[int] = (), cache: bool = True,
         threads: int | None = None, fastmath: Any = False) -> Jitted:
    """A jitted function returning the gradient of ``fn``'s scalar result (``(gradient,
    aux)`` with ``has_aux``); see ``value_and_grad``."""
    return _jitted(fn, argnums, has_aux, False, static_argnums, cache, threads, fastmath)


def _jitted(fn: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool,
            with_value: bool, static_argnums: int | Sequence[int], cache: bool,
            threads: int | None, fastmath: Any) -> Jitted:
    static_argnums = argument_numbers(static_argnums, "static_argnums")
    if isinstance(fn, Jitted):
        static_argnums = static_argnums or fn.static_argnums
        cache, threads, fastmath = fn.cache, fn.threads, fn.fastmath
        fn = fn.fn
    positions = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not positions or not all(isinstance(position, int) for position in positions):
        raise TypeError(f"argnums must be an int or a non-empty tuple of ints, not {argnums!r}")
    static = set(static_argnums) & set(positions)
    if static:
        raise ValueError(f"argument(s) {sorted(static)} are both differentiated (argnums) and "
                         "static (static_argnums); a static argument has no gradient.")
    wrapper = _differentiated(fn, positions, isinstance(argnums, int), has_aux, with_value)
    jitted = Jitted(wrapper, static_argnums=static_argnums, cache=cache, threads=threads,
                    fastmath=fastmath, background=False)
    wrapper.jitted = jitted  # type: ignore[attr-defined]
    jitted.numpy_runs = False  # numpy cannot run the backward pass
    # pickled as the call that made it (its wrapper is a closure): fn by reference
    jitted.rebuild = (_jitted, (fn, argnums, has_aux, with_value, tuple(static_argnums),
                                cache, threads, fastmath))
    return jitted


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))


def _differentiated(fn: Callable[..., Any], positions: tuple[int, ...], single: bool,
                    has_aux: bool, with_value: bool) -> Callable[..., Any]:
    """The function numfuse traces: ``fn``, then its backward pass."""
    name = _name(fn)
    try:
        parameters = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        parameters = []
    kind = "value_and_grad" if with_value else "grad"

    @functools.wraps(fn)
    def differentiated(*args: Any, **kwargs: Any) -> Any:
        traced = traced_now()
        if traced is not differentiated and getattr(traced, "__wrapped__", None) is not \
                differentiated and \
                not pytree.any_leaf(lambda leaf: isinstance(leaf, Tracer), (args, kwargs)):
            # called with values, not while tracing (numfuse.jit runs an ndarray subclass
            # with numpy): run the jitted function on plain arrays
            plain = [np.asarray(arg) if isinstance(arg, np.ndarray) else arg for arg in args]
            return differentiated.jitted(*plain, **kwargs)  # type: ignore[attr-defined]
        targets = []
        for argnum in positions:
            position = argnum + len(args) if argnum < 0 else argnum
            if not 0 <= position < len(args):
                raise TypeError(f"numfuse.{kind}({name}): argnums has {argnum} but the "
                                f"function was called with {len(args)} positional "
                                "argument(s)")
            leaves, treedef = pytree.flatten(args[position])
            for leaf in leaves:
                if leaf is None and treedef is not pytree.LEAF:
                    continue  # a None among the parameters: its gradient is None (as JAX's)
                _check_argument(leaf, position, parameters, name, kind)
            targets.append((leaves, treedef))
        with tracing_phase("forward"):
            result = fn(*args, **kwargs)
        value, aux = _split(result, has_aux, name, kind)
        nodes = [leaf.node for leaves, _ in targets for leaf in leaves if leaf is not None]
        with tracing_phase("backward"):
            found = backward(_seed(value, name, kind), nodes)
            cotangents = iter([value if value is not None else broadcast_to_node(0.0, node)
                               for value, node in zip(found, nodes, strict=True)])
        grads = [pytree.unflatten(treedef, [None if leaf is None else
                                            _like_argument(next(cotangents), leaf)
                                            for leaf in leaves])
                 for leaves, treedef in targets]
        gradient = grads[0] if single else tuple(grads)
        if with_value:
            return ((value, aux), gradient) if has_aux else (value, gradient)
        return (gradient, aux) if has_aux else gradient

    return differentiated


def _like_argument(gradient: Tracer, argument: Tracer) -> Tracer:
    """The gradient of a 0-d array argument is a 0-d array (as JAX's), not the numpy
    scalar a 0-d result of numpy's work would be; that of a numpy scalar or a Python
    number a numpy scalar, also when it is zero (a 0-d array of zeros otherwise)."""
    node = argument.node
    if node.ndim == 0 and not node.scalar and not node.weak and gradient.node.scalar:
        return fresh_copy(gradient.node, scalar=False)
    if node.ndim == 0 and (node.scalar or node.weak) and gradient.node.ndim == 0 and \
            (not gradient.node.scalar or gradient.node.weak):
        return fresh_copy(gradient.node, scalar=True)  # (not a Python number either)
    return gradient


def _check_argument(leaf: Any, position: int, parameters: Sequence[str], name: str,
                    kind: str) -> None:
    label = f"argument {position}" + (f" ({parameters[position]!r})"
                                      if position < len(parameters) else "")
    if not isinstance(leaf, Tracer):
        raise TypeError(f"numfuse.{kind}({name}): {label} is the constant {leaf!r} (a static "
                        "argument or a setting such as None or a bool), which has no "
                        "gradient; leave it out of argnums.")
    dtype = leaf.node.dtype
    if dtype.kind != "f":
        raise TypeError(
            f"numfuse.{kind}({name}): {label} has dtype {dtype}; gradients are taken with "
            "respect to float arguments only (as in JAX). Leave it out of argnums, or "
            "pass it as floats (x.astype(np.float64)).")


def _split(result: Any, has_aux: bool, name: str, kind: str) -> tuple[Any, Any]:
    if not has_aux:
        return result, None
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise TypeError(f"numfuse.{kind}({name}, has_aux=True): the function must return a "
                        f"pair (value, aux), not {type(result).__name__}")
    return result[0], result[1]


def _seed(value: Any, name: str, kind: str) -> list[tuple[Node, Any]]:
    """The result's node and the cotangent it starts with, 1 (none for a constant)."""
    if not isinstance(value, Tracer):
        if np.ndim(value) != 0 or np.asarray(value).dtype.kind not in "fiub":
            raise TypeError(f"numfuse.{kind}({name}): the function must return a real "
                            f"scalar, not {type(value).__name__} of shape {np.shape(value)}")
        return []
    node = value.node
    if node.ndim != 0:
        raise TypeError(f"numfuse.{kind}({name}): gradients are defined for functions with "
                        f"a scalar result; this one returns shape {shape_text(node.shape)}. "
                        "Reduce it (np.sum) or use numfuse.vjp.")
    if not differentiable(node):
        raise TypeError(f"numfuse.{kind}({name}): the function returns dtype {node.dtype}; "
                        "gradients need a float result.")
    return [(node, Tracer(const_node(node.dtype.type(1))))]


# --------------------------------------------------------------------------------- vjp

_vjp_lock = threading.Lock()
_vjp_cache: weakref.WeakKeyDictionary[Any, dict[Any, Jitted]] = weakref.WeakKeyDictionary()


def vjp(fn: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(fn(*primals), pullback)`` (``(out, pullback, aux)`` with ``has_aux``), where
    ``pullback(cotangents)`` takes cotangents shaped as ``fn``'s results and returns one
    cotangent per primal (None for an integer or boolean one, and for each such leaf of a
    container).  The pullback is a jitted function of the primals and the cotangents: it
    computes ``fn`` again, fused with its backward pass."""
    if isinstance(fn, Jitted):  # differentiated as the function it compiles
        fn = fn.fn
    forward = _cached(fn, "forward", lambda: Jitted(fn, background=False))
    # the primals as they are now: the pullback differentiates at these values even when
    # the caller changes its arrays (or swaps a dict's entries) before calling it
    primals = tuple(pytree.map_leaves(
        lambda leaf: leaf.copy() if isinstance(leaf, np.ndarray) else leaf, primal,
        pytree.is_not_dict) for primal in primals)
    result = forward(*primals)
    out, aux = _split(result, has_aux, _name(fn), "vjp")
    out_leaves, out_treedef = pytree.flatten(out)
    # per primal, which of its leaves are floats (differentiated)
    floats = [tuple(_is_float(leaf) for leaf in pytree.leaves(primal)) for primal in primals]

    def pullback(cotangents: Any) -> tuple[Any, ...]:
        leaves, treedef = pytree.flatten(cotangents)
        if treedef != out_treedef:
            raise TypeError(f"numfuse.vjp({_name(fn)}): the cotangents must have the "
                            "structure of the function's results")
        for cotangent, result in zip(leaves, out_leaves, strict=True):
            if np.shape(cotangent) != np.shape(result):
                raise ValueError(f"numfuse.vjp({_name(fn)}): a cotangent of shape "
                                 f"{np.shape(cotangent)} for a result of shape "
                                 f"{np.shape(result)}: they must be equal")
        pulled = _cached(fn, (len(primals), has_aux, tuple(floats)),
                         lambda: _pullback(fn, len(primals), has_aux, floats))
        grads = iter(pulled(*primals, *leaves))
        return tuple(next(grads) if any(mask) else None for mask in floats)

    return (out, pullback, aux) if has_aux else (out, pullback)


def _is_float(primal: Any) -> bool:
    """Whether every value of ``primal`` (its containers' leaves: arrays of several
    shapes in a list are fine) is a float."""
    return all(np.asarray(leaf).dtype.kind == "f" for leaf in pytree.leaves(primal))


def _cached(fn: Any, key: Any, make: Callable[[], Jitted]) -> Jitted:
    with _vjp_lock:
        table = _vjp_cache.setdefault(fn, {})
        jitted = table.get(key)
        if jitted is None:
            jitted = table[key] = make()
        return jitted


def _pullback(fn: Callable[..., Any], count: int, has_aux: bool,
              floats: Sequence[tuple[bool, ...]]) -> Jitted:
    """The jitted backward pass of ``fn``: arguments are the primals, then the leaves of
    the cotangents; results the cotangents of the primals with float leaves (``floats``:
    per primal, which leaves are), None for each other leaf."""
    name = _name(fn)

    def pulled(*values: Any) -> Any:
        args, cotangents = values[:count], values[count:]
        targets = [(*pytree.flatten(args[position]), floats[position])
                   for position in range(count) if any(floats[position])]
        with tracing_phase("forward"):
            result = fn(*args)
        out, _aux = _split(result, has_aux, name, "vjp")
        seeds = [(leaf.node, cotangent) for leaf, cotangent in zip(
            pytree.leaves(out), cotangents, strict=True)
            if isinstance(leaf, Tracer) and differentiable(leaf.node)]
        nodes = [leaf.node for leaves, _, mask in targets
                 for leaf, is_float in zip(leaves, mask, strict=True) if is_float]
        with tracing_phase("backward"):
            found = backward(seeds, nodes)
            supply = iter([value if value is not None else broadcast_to_node(0.0, node)
                           for value, node in zip(found, nodes, strict=True)])
        return tuple(pytree.unflatten(treedef, [_like_argument(next(supply), leaf)
                                                if is_float else None
                                                for leaf, is_float in zip(leaves, mask,
                                                                          strict=True)])
                     for leaves, treedef, mask in targets)

    functools.update_wrapper(pulled, fn)
    pulled.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("values", inspect.Parameter.VAR_POSITIONAL)])
    jitted = Jitted(pulled, background=False)
    jitted.numpy_runs = False  # numpy cannot run the backward pass
    return jitted
