"""What the backward pass's modules share: its error, and traced values made from rule
results."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import UnsupportedOperationError
from ..graph import CONST, ELEMENTWISE, INPUT, NUMPY, Node, Shape
from ..trace import Tracer
from ..trace.nodes import const_node


class NotDifferentiableError(UnsupportedOperationError):
    """An operation on the way from a differentiated argument to the result has no
    derivative rule (or works on complex values); the message names the user's line that
    made it."""

    def __init__(self, operation: str, advice: str, location: str | None) -> None:
        super().__init__(operation, advice)
        if location is not None:
            self.location = location
            self.args = (f"{operation} at {location}\n  {advice}",)


_ADVICE = ("numfuse differentiates elementwise arithmetic and math functions, sum, mean, "
           "prod, max, min, var and std, matmul and dot, reshapes, transposes, indexing, "
           "concatenate, stack, hstack, vstack, take, pad, repeat, tile, sort, einsum, "
           "flip, roll, "
           "cumsum, diff and linalg.norm (the 2-norm); "
           "compute this part outside the differentiated function "
           "or pass its result as an argument that is not differentiated.")


def not_differentiable(node: Node, what: str | None = None) -> NotDifferentiableError:
    name = what or describe(node)
    return NotDifferentiableError(f"numfuse.grad: {name} has no derivative rule", _ADVICE,
                                  node.source)


def describe(node: Node) -> str:
    """How an error names the operation that made ``node``."""
    if node.op == "getitem":
        return "indexing x[...]"
    if node.op == "setitem":
        return "item assignment x[...] = v"
    return f"np.{node.op}"


def as_tracer(value: Any) -> Tracer:
    """A rule's result as a traced value (work on constants alone comes back from numpy)."""
    return value if isinstance(value, Tracer) else Tracer(const_node(value))


# The 0-d values that backward-pass nodes are broadcasts of (``broadcast_to_node``), so a
# rule can broadcast the 0-d value itself further (``scalar_source``).
_broadcasts: contextvars.ContextVar[dict[Node, Tracer] | None] = contextvars.ContextVar(
    "numfuse_broadcasts", default=None)


@contextlib.contextmanager
def remembering_broadcasts() -> Iterator[None]:
    token = _broadcasts.set({})
    try:
        yield
    finally:
        _broadcasts.reset(token)


def broadcast_to_node(value: Any, node: Node) -> Tracer:
    """``value`` (whose shape broadcasts to ``node``'s) at ``node``'s shape, as an
    elementwise ``where(True, value, node)`` that fuses with the work around it."""
    value = as_tracer(value)
    result = as_tracer(np.where(True, value, Tracer(same_shape(node))))
    if result.node.dtype != node.dtype:
        result = result.astype(node.dtype)
    memo = _broadcasts.get()
    if memo is not None and value.node.ndim == 0:
        memo[result.node] = value
    return result


def same_size(first: Shape, second: Shape) -> bool:
    """Whether values of these shape patterns have one shape: the same dimensions, free
    where the other has a known size (a numpy call's rule may know a size, ``x.reshape(2,
    10)`` of a free ``x``, that the argument's pattern leaves free)."""
    return len(first) == len(second) and all(
        a == b or (None in (a, b) and 1 not in (a, b)) for a, b in zip(first, second, strict=False))


def size_rank(node: Node) -> int:
    """How surely a free size of ``node`` is the size of what it broadcasts into: 0 for
    an argument (a free size is never 1), 2 for a size a numpy call chose from the data
    (``x[mask]``: 1 at run time broadcasts), 1 otherwise."""
    if node.kind == INPUT:
        return 0
    return 2 if node.kind == NUMPY and node.moving else 1


def same_shape(node: Node) -> Node:
    """A node of ``node``'s shape that the program has early: an argument or a numpy
    call's result that ``node`` is computed from elementwise (``node`` itself if none),
    so a broadcast to that shape does not wait for ``node``; an argument first, a size
    chosen from the data last (it may be a 1 that broadcasts)."""
    while node.kind == ELEMENTWISE:
        operands = [source for source in node.inputs if source.shape == node.shape
                    and source.kind != CONST]
        if not operands:
            break
        node = min(operands, key=size_rank)
    return node


def scalar_source(value: Tracer) -> Tracer | None:
    """The 0-d value ``value`` is a ``broadcast_to_node`` of, if it is one: a reduction's
    rule broadcasts it to the reduction's input directly (no reshape in between, and the
    broadcast value itself need not be computed)."""
    memo = _broadcasts.get()
    return None if memo is None else memo.get(value.node)
