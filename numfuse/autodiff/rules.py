"""Derivative rules of numpy calls (the graph's ``numpy`` nodes), by the call's name.

Elementwise operations keep their rules in the op table (``ops.py``, ``vjp`` beside each
row).  The calls here are reductions (read from the node's recognised ``Reduction``, so
``np.sum``, ``x.mean()``, ``np.add.reduce`` and the halves of ``np.var`` share one rule),
matrix products, reshapes and transposes, indexing, ``concatenate`` and ``stack``.  A rule
gets the node's cotangent at the node's shape and the call's arguments with traced values
in place (``Tracer``s, ``_bound``) and returns ``(operand, cotangent)`` pairs for the traced
operands; like the elementwise rules it is plain numpy code run on traced values, so
whatever it computes is recorded into the graph.

A size that is not known while tracing (a free axis) is read when the program runs, by a
small numpy call of its own (``element_count``, ``reshape_as``, ``concatenate_piece``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import pytree
from ..calls import TRACED
from ..graph import ELEMENTWISE, INPUT, Node
from ..reductions import Reduction
from ..trace import Tracer
from ..trace.probes import record_call
from .values import broadcast_to_node, not_differentiable, scalar_source, size_rank

Pairs = list[tuple[Any, Any]]
Rule = Callable[[Any, Tracer, tuple[Any, ...], dict[str, Any]], Pairs]


def numpy_vjp(node: Node, g: Tracer, active: set[Node]) -> list[tuple[Node, Any]]:
    """The cotangents a numpy node passes to its active operands, given its own ``g``."""
    args, kwargs, tracers = _bound(node)
    reduction = node.reduction
    if reduction is not None:
        pairs = _reduction_vjp(reduction, g, Tracer(node), tracers[0])
    else:
        rule = NUMPY_RULES.get(node.op)
        if rule is None:
            raise not_differentiable(node)
        try:
            pairs = rule(g, Tracer(node), args, kwargs)
        except _Unsupported as error:
            raise not_differentiable(node, f"np.{node.op} {error}") from None
    source_of = {id(tracer): source for tracer, source in zip(tracers, node.inputs,
                                                                strict=True)}
    # (an operand that is no traced value, a constant array the call was given, has
    # no cotangent to receive)
    return [(source_of[id(operand)], value) for operand, value in pairs
            if value is not None and id(operand) in source_of
            and source_of[id(operand)] in active]


class _Unsupported(Exception):
    """A call with arguments its rule does not cover (said in the message)."""


def _bound(node: Node) -> tuple[tuple[Any, ...], dict[str, Any], list[Tracer]]:
    """The call's arguments with a new ``Tracer`` of each operand in its place, and those
    tracers in operand order."""
    call = node.call
    leaves, treedef = pytree.flatten((call.args, call.kwargs))
    tracers = [Tracer(source) for source in node.inputs]
    supply = iter(tracers)
    args, kwargs = pytree.unflatten(treedef, [next(supply) if leaf is TRACED else leaf
                                              for leaf in leaves])
    return tuple(args), dict(kwargs), tracers


def _argument(args: Sequence[Any], kwargs: dict[str, Any], position: int, name: str,
              default: Any = None) -> Any:
    if len(args) > position:
        return args[position]
    return kwargs.get(name, default)


def _shape(value: Any) -> tuple[int | None, ...]:
    return value.node.shape if isinstance(value, Tracer) else np.shape(value)


# ------------------------------------------------------------------------- reductions


def _reduction_vjp(reduction: Reduction, g: Tracer, ans: Tracer, x: Tracer) -> Pairs:
    """sum/mean (and var's halves): the cotangent spread over the reduced axes (divided
    by the count); prod: the product of the others; max/min: shared among the elements
    equal to the result, as JAX does."""
    node = x.node
    source = scalar_source(g)
    g = source if source is not None else _kept(g, reduction, node.ndim)
    if reduction.ufunc == "add":
        if reduction.divide is not None:
            ddof = reduction.ddof if reduction.divide == "ddof" else 0
            g = g / count(node, reduction.axes, ddof, g.node.dtype)
        return [(x, broadcast_to_node(g, node))]
    axes = reduction.axes
    if reduction.ufunc == "multiply":
        return [(x, g * _product_of_others(x, axes))]
    if reduction.ufunc in ("maximum", "minimum"):
        chosen = (x == _kept(ans, reduction, node.ndim)).astype(g.node.dtype)
        share = g / np.sum(chosen, axis=axes, keepdims=True)
        return [(x, share * chosen)]
    raise _Unsupported(f"{reduction.ufunc}.reduce")


def _product_of_others(x: Tracer, axes: tuple[int, ...]) -> Any:
    """For each element, the product of the others along ``axes`` (``prod``'s derivative),
    with JAX's zeros, infinities and NaNs: the product of the finite nonzero elements
    (divided by the element's own if it is one of them), then what the others among the
    zeros, infinities and NaNs make of it (NaN for a NaN or for zero times infinity)."""
    def total(values: Any) -> Any:
        return np.sum(values, axis=axes, keepdims=True)

    zero, infinite, nan = x == 0, np.isinf(x), np.isnan(x)
    regular = ~(zero | infinite | nan)
    base = np.where(regular, x, 1.0)
    product = np.prod(base, axis=axes, keepdims=True)
    own = np.where(regular, product / base, product)
    zeros, infinities = total(zero) - zero, total(infinite) - infinite
    negative = x == -np.inf
    flips = (total(negative) - negative) % 2 == 1
    undefined = (total(nan) - nan > 0) | ((zeros > 0) & (infinities > 0))
    # (infinity by copysign, not by a product: a cotangent of zero times infinity would
    # make the second derivative NaN where this branch is not taken)
    return np.where(undefined, np.nan, np.where(
        zeros > 0, own * 0.0, np.where(
            infinities > 0, np.copysign(np.inf, np.where(flips, -own, own)), own)))


def _scalar_reduction_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> Pairs:
    """A reduction of a 0-d value (numpy returns the value): its cotangent as it is, over
    ``max(1 - ddof, 0)`` for the end of ``var``."""
    x = args[0]
    if np.ndim(x) != 0 and getattr(x, "dtype", None) == np.float16:
        raise _Unsupported("of float16 values (numpy's own call in half precision; "
                           "differentiate it of x.astype(np.float32))")
    if np.ndim(x) != 0 or set(kwargs) - {"axis", "keepdims", "dtype", "ddof"}:
        raise _Unsupported("with where=, initial= or out=")
    if ans.node.op == "sum_over_count":
        return [(x, g / max(1 - int(kwargs.get("ddof", 0)), 0))]
    return [(x, g)]


def _kept(value: Any, reduction: Reduction, ndim: int) -> Any:
    """A reduction's result with its reduced axes back as length-1 axes, where
    broadcasting against the input needs them (not for leading axes)."""
    if reduction.keepdims or reduction.axes == tuple(range(len(reduction.axes))):
        return value
    return np.expand_dims(value, reduction.axes)


def element_count(arrays: tuple[Any, ...], axes: tuple[int, ...], times: int, ddof: int,
                  dtype: np.dtype) -> Any:
    """``times`` x the product of the sizes of ``arrays[i]`` along ``axes[i]``, less
    ``ddof`` (at least 0), as a ``dtype`` scalar: the divisor of a mean or a variance."""
    total = times
    for array, axis in zip(arrays, axes, strict=True):
        total *= np.shape(array)[axis]
    return np.asarray(max(total - ddof, 0), dtype=dtype)[()]


def summed_to(value: Any, like: Any) -> Any:
    """``value`` summed over the axes where ``like`` (as many dimensions) has 1 element
    and ``value`` more: the cotangent of a size chosen from the data (``x[mask]``) that
    was 1 and broadcast, at that size."""
    axes = tuple(axis for axis, (size, wide) in enumerate(zip(np.shape(like), np.shape(value),
                                                              strict=True))
                 if size == 1 and wide != 1)
    return np.sum(value, axis=axes, keepdims=True) if axes else value


def to_chosen_size(value: Tracer, node: Node) -> Tracer:
    """The cotangent ``value`` of ``node``, of its shape pattern, at ``node``'s size when
    that is a size chosen from the data, which may have been a 1 that broadcast."""
    if size_rank(node) < 2 or value.node.ndim != node.ndim:
        return value
    return record_call(summed_to, "summed_to", (value, Tracer(node)), {})


def count(node: Node, axes: Sequence[int], ddof: int, dtype: np.dtype) -> Any:
    """The number of elements of ``node`` along ``axes`` less ``ddof``: a Python int when
    the sizes are known, else a traced ``element_count`` of the arguments whose sizes
    they are (so the count does not wait for the value it counts)."""
    times, sources, positions = 1, [], []
    for axis in axes:
        found = _size_source(node, axis)
        if isinstance(found, int):
            times *= found
        else:
            sources.append(Tracer(found[0]))
            positions.append(found[1])
    if not sources:
        return max(times - ddof, 0)
    return record_call(element_count, "element_count", (tuple(sources),),
                       {"axes": tuple(positions), "times": times, "ddof": ddof,
                        "dtype": np.dtype(dtype)})


def _size_source(node: Node, axis: int) -> int | tuple[Node, int]:
    """The size of ``node`` along ``axis``, or a node and axis of the same size that the
    program has before ``node`` (an argument, through elementwise work)."""
    while True:
        size = node.shape[axis]
        if size is not None:
            return size
        reduction = node.reduction
        if reduction is not None:  # a kept axis: the input's axis of the same size
            kept = [position for position in range(node.inputs[0].ndim)
                    if position not in reduction.axes]
            node, axis = node.inputs[0], axis if reduction.keepdims else kept[axis]
            continue
        if node.kind != ELEMENTWISE:
            return node, axis
        from_right = node.ndim - axis
        free = [(source, source.ndim - from_right) for source in node.inputs
                if source.ndim >= from_right and source.shape[source.ndim - from_right] is None]
        if not free:  # pragma: no cover - a free axis comes from a free axis of an operand
            return node, axis
        # an argument's size first: a size chosen from the data may be a 1 that broadcasts
        node, axis = min(free, key=lambda found: size_rank(found[0]))
        if node.kind == INPUT:
            return node, axis


# ------------------------------------------------------------------ matrix products


def _matmul_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> Pairs:
    if kwargs:
        raise _Unsupported("with keyword arguments")
    a, b = args[:2]
    return _product_pairs(g, a, b)


def _dot_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Pairs:
    a, b = args[0], _argument(args, kwargs, 1, "b")
    if kwargs.get("out") is not None or len(args) > 2:
        raise _Unsupported("with out=")
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise _Unsupported("of arrays of more than 2 dimensions")
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return [(a, g * b), (b, g * a)]
    return _product_pairs(g, a, b)


def _outer_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> Pairs:
    """``np.outer`` of (flattened) ``a`` and ``b``."""
    a, b = (value if isinstance(value, Tracer) else np.asarray(value)
            for value in (args[0], _argument(args, kwargs, 1, "b")))
    if np.ndim(a) != 1 or np.ndim(b) != 1 or kwargs.get("out") is not None:
        raise _Unsupported("of operands that are not 1-d")
    return [(a, np.matmul(g, b)), (b, np.matmul(a, g))]


def _product_pairs(g: Tracer, a: Any, b: Any) -> Pairs:
    """The cotangents of ``a @ b`` (numpy's matmul rules for 1-d operands; batch axes
    broadcast and are summed by the caller).  An operand that is not traced may be a list
    (``[1.0, 2.0] @ x``): numpy's array of it."""
    a, b = (value if isinstance(value, Tracer) else np.asarray(value) for value in (a, b))
    ndim_a, ndim_b = np.ndim(a), np.ndim(b)
    if ndim_a == 1 and ndim_b == 1:
        return [(a, g * b), (b, g * a)]
    if ndim_a == 1:  # (k) @ (..., k, m) -> (..., m)
        ga = np.matmul(b, g) if ndim_b == 2 else np.matmul(b, g[..., None])[..., 0]
        return [(a, ga), (b, a[:, None] * g[..., None, :])]
    if ndim_b == 1:  # (..., n, k) @ (k) -> (..., n)
        gb = np.matmul(g, a) if ndim_a == 2 else np.matmul(g[..., None, :], a)[..., 0, :]
        return [(a, g[..., :, None] * b), (b, gb)]
    return [(a, np.matmul(g, np.swapaxes(b, -1, -2))),
            (b, np.matmul(np.swapaxes(a, -1, -2), g))]


# ----------------------------------------------------------- reshapes and transposes


def reshape_as(pair: tuple[Any, Any], order: str = "C") -> Any:
    """``pair[0]`` reshaped to the shape of ``pair[1]``."""
    return np.reshape(pair[0], np.shape(pair[1]), order=order)  # type: ignore[call-overload]


def _reshape_back(g: Tracer, x: Any, order: str = "C") -> Any:
    shape = _shape(x)
    if all(size is not None for size in shape):
        return np.reshape(g, shape, order=order)  # type: ignore[call-overload]
    return record_call(reshape_as, "reshape_as", ((g, x),), {"order": order})


def _reshape_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                 ) -> Pairs:
    order = _argument(args, kwargs, 2, "order", "C") or "C"
    if order not in ("C", "F"):  # (the order "A" follows the operand's layout at run time)
        raise _Unsupported(f"with order={order!r}")
    return [(args[0], _reshape_back(g, args[0], order))]


def _ravel_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> Pairs:
    order = _argument(args, kwargs, 1, "order", "C")
    if order not in ("C", "F"):
        raise _Unsupported(f"with order={order!r}")
    return [(args[0], _reshape_back(g, args[0], order))]


def _same_size_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                   ) -> Pairs:
    """squeeze, expand_dims, atleast_*d: the same elements in another shape."""
    return [(args[0], _reshape_back(g, args[0]))]


def _transpose_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                   ) -> Pairs:
    axes = _argument(args, kwargs, 1, "axes")
    ndim = ans.node.ndim
    if axes is None:
        return [(args[0], np.transpose(g))]
    order = [int(axis) % ndim for axis in axes]
    return [(args[0], np.transpose(g, tuple(int(i) for i in np.argsort(order))))]


def _swapaxes_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> Pairs:
    first = _argument(args, kwargs, 1, "axis1")
    second = _argument(args, kwargs, 2, "axis2")
    return [(args[0], np.swapaxes(g, first, second))]


def _moveaxis_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> Pairs:
    source = _argument(args, kwargs, 1, "source")
    destination = _argument(args, kwargs, 2, "destination")
    return [(args[0], np.moveaxis(g, destination, source))]  # type: ignore[type-var]


def _broadcast_to_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                      ) -> Pairs:
    return [(args[0], g)]  # summed over the broadcast axes by the caller


# ------------------------------------------------------------- indexing and joining


def _getitem_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                 ) -> Pairs:
    """Scatter-add: repeated indices add up (``np.add.at``)."""
    x, key = args
    if not isinstance(x, Tracer):
        return []
    spread = np.zeros_like(x)
    np.add.at(spread, key, g)
    return [(x, spread)]


def _add_at_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> Pairs:
    """``np.add.at(x, key, values)`` (the backward pass of indexing, differentiated again):
    ``x`` passes its cotangent through, ``values`` gather theirs at ``key``."""
    x, key, values = args
    pairs: Pairs = [(x, g)] if isinstance(x, Tracer) else []
    if isinstance(values, Tracer):
        pairs.append((values, g[key]))  # summed over broadcast axes by the caller
    return pairs


def _concatenate_piece_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> Pairs:
    """A piece cut out of a concatenation (the backward pass of ``concatenate``,
    differentiated again): the joined value's cotangent is the piece's, zeros elsewhere."""
    (joined, *parts), = args
    axis, index = kwargs["axis"], kwargs["index"]
    if not isinstance(joined, Tracer):
        return []
    spread = np.concatenate([g if position == index else np.zeros_like(part, dtype=g.dtype)
                             for position, part in enumerate(parts)], axis=axis)
    return [(joined, spread)]


def concatenate_piece(values: tuple[Any, ...], axis: int, index: int) -> Any:
    """Part ``index`` of ``values[0]``, a concatenation of ``values[1:]`` along ``axis``."""
    joined, parts = values[0], values[1:]
    sizes = [np.shape(part)[axis] for part in parts]
    start = sum(sizes[:index])
    key = (slice(None),) * axis + (slice(start, start + sizes[index]),)
    return joined[key]


def _concatenate_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                     ) -> Pairs:
    arrays = list(args[0])
    axis = _argument(args, kwargs, 1, "axis", 0)
    if axis is None or set(kwargs) - {"axis"}:
        raise _Unsupported("with axis=None, out=, dtype= or casting=")
    axis = int(axis) % ans.node.ndim
    sizes = [_shape(part)[axis] for part in arrays]
    pairs: Pairs = []
    for index, part in enumerate(arrays):
        if not isinstance(part, Tracer):
            continue
        if all(size is not None for size in sizes):
            start = sum(sizes[:index])  # type: ignore[arg-type]
            stop = start + sizes[index]  # type: ignore[operator]
            pairs.append((part, g[(slice(None),) * axis + (slice(start, stop),)]))
        else:
            pairs.append((part, record_call(concatenate_piece, "concatenate_piece",
                                            ((g, *arrays),), {"axis": axis,
                                                              "index": index})))
    return pairs


def _stack_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Pairs:
    arrays = list(args[0])
    axis = _argument(args, kwargs, 1, "axis", 0)
    if set(kwargs) - {"axis"}:
        raise _Unsupported("with out=, dtype= or casting=")
    axis = int(axis) % ans.node.ndim
    return [(part, g[(slice(None),) * axis + (index,)])
            for index, part in enumerate(arrays) if isinstance(part, Tracer)]


def _flip_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Pairs:
    return [(args[0], np.flip(g, _argument(args, kwargs, 1, "axis")))]


def _roll_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Pairs:
    shift = _argument(args, kwargs, 1, "shift")
    if isinstance(shift, Tracer) or not all(
            isinstance(item, (int, np.integer)) for item in np.ravel(shift)):
        raise _Unsupported("by a traced shift")
    back = tuple(-int(item) for item in shift) if isinstance(shift, (tuple, list)) \
        else -int(shift)
    return [(args[0], np.roll(g, back, _argument(args, kwargs, 2, "axis")))]


def _cumsum_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> Pairs:
    """Each element reaches every later partial sum: the cotangents summed from the end."""
    if _argument(args, kwargs, 2, "dtype") is not None or \
            _argument(args, kwargs, 3, "out") is not None:
        raise _Unsupported("with dtype= or out=")
    x, axis = args[0], _argument(args, kwargs, 1, "axis")
    along = 0 if axis is None else axis
    spread: Any = np.flip(np.cumsum(np.flip(g, along), along), along)
    return [(x, spread if axis is None and x.node.ndim == 1 else
             _reshape_back(spread, x) if axis is None else spread)]


def _diff_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Pairs:
    """Each difference takes its later element and gives back its earlier one."""
    n = _argument(args, kwargs, 1, "n", 1)
    axis = _argument(args, kwargs, 2, "axis", -1)
    if _argument(args, kwargs, 3, "prepend", np._NoValue) is not np._NoValue or \
            _argument(args, kwargs, 4, "append", np._NoValue) is not np._NoValue or \
            not isinstance(n, (int, np.integer)) or n < 0:
        raise _Unsupported("with prepend=, append= or a traced n")
    given: Any = g
    for _ in range(int(n)):
        edge = np.zeros_like(np.take(given, [0], axis=axis))
        given = np.concatenate([edge, given], axis=axis) - \
            np.concatenate([given, edge], axis=axis)
    return [(args[0], given)]


def _norm_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Pairs:
    """The 2-norm (Frobenius for a matrix): x / norm, times the cotangent."""
    x = args[0]
    order = _argument(args, kwargs, 1, "ord")
    axis = _argument(args, kwargs, 2, "axis")
    keepdims = _argument(args, kwargs, 3, "keepdims", False)
    if order not in (None, 2, "fro") or (order == 2 and ((axis is None and x.node.ndim > 1)
                                                         or isinstance(axis, tuple))):
        raise _Unsupported("of another order than the 2-norm (or Frobenius)")
    cotangent: Any = g
    norm: Any = ans
    if axis is not None and not keepdims:
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        cotangent, norm = np.expand_dims(g, axes), np.expand_dims(ans, axes)
    return [(x, cotangent * (x / norm))]


def _joined_vjp(joined: Callable[[Any], Any], axis: int) -> Rule:
    """hstack, vstack: a concatenation along ``axis`` of the operands as ``joined`` makes
    them (at least 1-d, 2-d); a 1-d hstack joins along its only axis."""
    def rule(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
             ) -> Pairs:
        if set(kwargs) - {"casting"} or kwargs.get("casting", "same_kind") != "same_kind" \
                or len(args) > 1:
            raise _Unsupported("with dtype=")
        parts = [joined(part) for part in args[0]]
        along = 0 if ans.node.ndim == 1 else axis
        pieces = _concatenate_vjp(g, ans, (parts, along), {})
        back = {id(made): part for made, part in zip(parts, args[0], strict=True)}
        return [(back[id(made)], _reshape_back(piece, back[id(made)]))
                for made, piece in pieces if id(made) in back]
    return rule


def _take_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Pairs:
    """A scatter-add at the indices taken (``x[..., indices]`` along ``axis``)."""
    x, indices = args[0], _argument(args, kwargs, 1, "indices")
    axis = _argument(args, kwargs, 2, "axis")
    if _argument(args, kwargs, 4, "mode", "raise") != "raise" or \
            _argument(args, kwargs, 3, "out") is not None:
        raise _Unsupported("with out= or mode=")
    if axis is None:
        flat = np.ravel(x)
        return [(x, _reshape_back(_getitem_vjp(g, ans, (flat, indices), {})[0][1], x))]
    key = (slice(None),) * (int(axis) % x.node.ndim) + (indices,)
    return _getitem_vjp(g, ans, (x, key), {})


def _pad_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Pairs:
    """Constant padding: the cotangent of the part that was the operand."""
    x, widths = args[0], _argument(args, kwargs, 1, "pad_width")
    if _argument(args, kwargs, 2, "mode", "constant") != "constant" or \
            isinstance(widths, (Tracer, dict)):
        raise _Unsupported("other than constant padding by fixed widths")
    pairs = np.broadcast_to(np.asarray(widths, dtype=np.int64), (x.node.ndim, 2))
    key = tuple(slice(int(before), -int(after) if after else None) for before, after in pairs)
    return [(x, g[key])]


def _sort_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Pairs:
    """Each element's cotangent is the one at the place sorting moved it to."""
    x, axis = args[0], _argument(args, kwargs, 1, "axis", -1)
    if axis is None:
        flat: Any = np.ravel(x)
        order = np.argsort(np.argsort(flat, kind="stable"), kind="stable")
        moved: Any = np.take_along_axis(g, order, 0)  # type: ignore[arg-type]
        return [(x, _reshape_back(moved, x))]
    order = np.argsort(np.argsort(x, axis=axis, kind="stable"), axis=axis, kind="stable")
    return [(x, np.take_along_axis(g, order, axis))]


def _einsum_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> Pairs:
    """An explicit ``'ij,jk->ik'``: each operand's cotangent is the einsum of the result's
    with the other operands, into that operand's subscripts."""
    subscripts, operands = args[0], args[1:]
    if not isinstance(subscripts, str) or "->" not in subscripts or "." in subscripts or \
            set(kwargs) - {"optimize"}:
        raise _Unsupported("other than with explicit subscripts ('ij,jk->ik')")
    inputs, output = subscripts.replace(" ", "").split("->")
    terms = inputs.split(",")
    pairs: Pairs = []
    for index, operand in enumerate(operands):
        if not isinstance(operand, Tracer):
            continue
        mine = terms[index]
        others = [term for position, term in enumerate(terms) if position != index]
        if len(set(mine)) != len(mine):
            raise _Unsupported("with an index repeated in an operand")
        # (an index of this operand alone, summed: its cotangent broadcast along it)
        kept = "".join(letter for letter in mine if letter in output + "".join(others))
        rest = [other for position, other in enumerate(operands) if position != index]
        partial = np.einsum(f"{','.join([output, *others])}->{kept}", g, *rest)
        spread = partial[tuple(slice(None) if letter in kept else np.newaxis
                               for letter in mine)]
        pairs.append((operand, spread if kept == mine else spread + np.zeros_like(operand)))
    return pairs


def _repeat_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> Pairs:
    """Each element's copies give back the sum of their cotangents."""
    x, repeats = args[0], _argument(args, kwargs, 1, "repeats")
    axis = _argument(args, kwargs, 2, "axis")
    if not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise _Unsupported("other than by a constant count")
    along = 0 if axis is None else int(axis) % x.node.ndim
    total: Any = None
    for copy in range(int(repeats)):
        part = g[(slice(None),) * along + (slice(copy, None, int(repeats)),)]
        total = part if total is None else total + part
    return [(x, _reshape_back(total, x) if axis is None else total)]


def _tile_vjp(g: Tracer, ans: Tracer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Pairs:
    """Each element's tiles give back the sum of their cotangents."""
    x, reps = args[0], _argument(args, kwargs, 1, "reps")
    counts = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    if not all(isinstance(count, (int, np.integer)) and count >= 1 for count in counts):
        raise _Unsupported("other than by constant counts")
    counts = (1,) * (x.node.ndim - len(counts)) + tuple(int(count) for count in counts)
    return [(x, record_call(tiles_summed, "tiles_summed", ((g, x),), {"counts": counts}))]


def tiles_summed(values: tuple[Any, Any], counts: tuple[int, ...]) -> Any:
    """The sum of the tiles of ``values[0]``, ``np.tile(values[1], counts)``'s shape, as
    ``values[1]``'s shape (the backward pass of ``tile``)."""
    tiled, x = values
    shape = (1,) * (len(counts) - np.ndim(x)) + np.shape(x)
    split = [size for count, whole in zip(counts, shape, strict=True)
             for size in (count, whole)]
    summed = np.reshape(tiled, split).sum(axis=tuple(range(0, 2 * len(counts), 2)))
    return np.reshape(summed, np.shape(x))


NUMPY_RULES: dict[str, Rule] = {
    **dict.fromkeys(("sum", "mean", "prod", "max", "min", "amax", "amin", "mean_of",
                     "sum_over_count"), _scalar_reduction_vjp),
    # the backward pass's own calls, for gradients of gradients
    "element_count": lambda g, ans, args, kwargs: [],  # depends on sizes only
    # (the cotangent of a broadcast: broadcast back; ``like`` gives its size only)
    "summed_to": lambda g, ans, args, kwargs: [(args[0], broadcast_to_node(g, args[0].node))],
    **dict.fromkeys(("zeros_like", "ones_like", "empty_like"),
                    lambda g, ans, args, kwargs: []),  # sizes and dtype only
    "reshape_as": lambda g, ans, args, kwargs: [(args[0][0],
                                                  _reshape_back(g, args[0][0]))],
    "matmul": _matmul_vjp,
    "dot": _dot_vjp,
    "outer": _outer_vjp,
    "reshape": _reshape_vjp,
    "ravel": _ravel_vjp,
    "squeeze": _same_size_vjp,
    "expand_dims": _same_size_vjp,
    "atleast_1d": _same_size_vjp,
    "atleast_2d": _same_size_vjp,
    "atleast_3d": _same_size_vjp,
    "transpose": _transpose_vjp,
    "matrix_transpose": lambda g, ans, args, kwargs: [(args[0], np.swapaxes(g, -1, -2))],
    "swapaxes": _swapaxes_vjp,
    "moveaxis": _moveaxis_vjp,
    "broadcast_to": _broadcast_to_vjp,
    "getitem": _getitem_vjp,
    "add.at": _add_at_vjp,
    "concatenate": _concatenate_vjp,
    "concatenate_piece": _concatenate_piece_vjp,
    "stack": _stack_vjp,
    "flip": _flip_vjp,
    "roll": _roll_vjp,
    "cumsum": _cumsum_vjp,
    "diff": _diff_vjp,
    "linalg.norm": _norm_vjp,
    "hstack": _joined_vjp(np.atleast_1d, 1),
    "vstack": _joined_vjp(np.atleast_2d, 0),
    "take": _take_vjp,
    "pad": _pad_vjp,
    "sort": _sort_vjp,
    "einsum": _einsum_vjp,
    "repeat": _repeat_vjp,
    "tile": _tile_vjp,
}
