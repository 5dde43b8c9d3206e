"""Reverse mode over a traced graph: the backward pass is traced into the same graph.

``backward(seeds, wrt)`` runs while a function is being traced.  It walks the recorded
graph from the output nodes back to the arguments (the nodes reachable from the outputs,
in reverse topological order) keeping one cotangent per node, and applies each node's
derivative rule — the op table's ``vjp`` for elementwise nodes, ``rules.NUMPY_RULES`` for
numpy calls — written as ordinary numpy code on ``Tracer`` values.  So the backward pass
is recorded as more graph nodes, beside the forward ones, and the partitioner fuses the
two like any other work.

Shapes are patterns (``graph``): a free dimension is never 1, so the axes a value was
broadcast along are known while tracing, and summing a cotangent over them needs no
sizes.  A cotangent may stay *wider* than its node: ``Cotangent.value`` has the shape of
``anchor``, a forward node its node broadcasts to, and the node's cotangent is its sum
over the broadcast axes.  Elementwise rules are linear in the cotangent with coefficients
constant along those axes, so the sum can wait until a value is needed at its own shape
(a gradient, a numpy call's rule, or two cotangents over loops not known to be the same
size); by then it sums everything that went through that broadcast in one reduction of
the loop that computed it.  That is how the gradient of a scalar parameter of a function
of an array becomes a reduction fused into the kernel that computes the function.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..calls import is_elementwise_call
from ..graph import (
    CONST,
    ELEMENTWISE,
    INPUT,
    NUMPY,
    Node,
    broadcast_shapes,
    shape_text,
    toposort,
)
from ..ops import OPS
from ..trace import Tracer
from . import rules, sums
from .values import (
    NotDifferentiableError,
    as_tracer,
    broadcast_to_node,
    describe,
    not_differentiable,
    remembering_broadcasts,
    same_size,
)


@dataclasses.dataclass(frozen=True)
class Cotangent:
    """A node's cotangent: ``value`` (a traced value of ``anchor``'s shape) summed over
    the axes along which the node broadcasts to ``anchor``."""

    value: Tracer
    anchor: Node


class _Dimensions:
    """Which free dimensions of the forward graph are the same size: an elementwise node's
    free axis and the free axes of its operands it broadcasts with (numpy checked them
    equal when it ran), joined in a union-find."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self._parent: dict[tuple[Node, int], tuple[Node, int]] = {}
        for node in nodes:
            if node.kind != ELEMENTWISE and not is_elementwise_call(node):
                continue
            for source in node.inputs:
                for axis in range(1, min(node.ndim, source.ndim) + 1):
                    if node.shape[-axis] is None and source.shape[-axis] is None:
                        self._union((node, -axis), (source, -axis))

    def _find(self, key: tuple[Node, int]) -> tuple[Node, int]:
        path = []
        while (parent := self._parent.get(key, key)) != key:
            path.append(key)
            key = parent
        for item in path:
            self._parent[item] = key
        return key

    def _union(self, first: tuple[Node, int], second: tuple[Node, int]) -> None:
        a, b = self._find(first), self._find(second)
        if a != b:
            self._parent[a] = b

    def same(self, first: Node, second: Node) -> bool:
        """Whether values of the shapes of ``first`` and ``second`` are the same size."""
        if first is second:
            return True
        if first.shape != second.shape:
            return False
        return all(self._find((first, -axis)) == self._find((second, -axis))
                   for axis in range(1, first.ndim + 1) if first.shape[-axis] is None)


def differentiable(node: Node) -> bool:
    """Whether a cotangent flows through ``node``: float values (integers and booleans
    stop the gradient, as in JAX)."""
    return node.dtype.kind == "f"


def backward(seeds: Sequence[tuple[Node, Any]], wrt: Sequence[Node]) -> list[Tracer | None]:
    """The cotangents of the ``wrt`` nodes, given a cotangent for each seed node (the
    function's results); None for a node the results do not depend on."""
    order = toposort([node for node, _ in seeds])
    targets = set(wrt)
    active: set[Node] = set()
    for node in order:
        if node in targets or (node.kind != CONST and any(source in active
                                                          for source in _read(node))):
            if node.dtype.kind == "c":
                raise NotDifferentiableError(
                    f"numfuse.grad: {describe(node)} gives complex values", "numfuse "
                    "differentiates real (float) functions only.", node.source)
            if differentiable(node):
                active.add(node)
    with remembering_broadcasts():
        return _run(seeds, wrt, order, active)


# numpy calls whose value does not depend on their first argument's values, only on its
# shape and dtype (a buffer made with np.zeros_like(x) and written is no function of x)
_SHAPE_ONLY = frozenset({"zeros_like", "ones_like", "empty_like", "full_like"})


def _read(node: Node) -> Sequence[Node]:
    """The inputs whose values ``node``'s value depends on."""
    if node.kind == NUMPY and node.op in _SHAPE_ONLY:
        return node.inputs[1:]  # (full_like's traced fill value)
    return node.inputs


def _run(seeds: Sequence[tuple[Node, Any]], wrt: Sequence[Node], order: Sequence[Node],
         active: set[Node]) -> list[Tracer | None]:
    state = _Backward(_Dimensions(order), active)
    for node, value in seeds:
        value = as_tracer(value)
        if not same_size(value.node.shape, node.shape):
            raise ValueError(f"a cotangent of shape {shape_text(value.node.shape)} for a result "
                             f"of shape {shape_text(node.shape)}: they must be the same")
        if node in active:
            state.add(node, value, node)
    leaves = set(wrt)  # each differentiated-by value is a leaf (an argument of the
    # function differentiated), even one computed before it (grad called on w * 3 inside a
    # traced function): its cotangent is the answer, not passed on to what it came from
    for node in reversed(order):
        if node.kind == INPUT or node in leaves or node not in active:
            continue
        cotangent = state.cotangents.pop(node, None)
        if cotangent is not None:
            state.propagate(node, cotangent)
    return [None if (found := state.cotangents.get(node)) is None
            else state.exact(node, found).value for node in wrt]


class _Backward:
    """The cotangents found so far, and how a node passes its own to its operands."""

    def __init__(self, dimensions: _Dimensions, active: set[Node]) -> None:
        self.dimensions = dimensions
        self.active = active
        self.cotangents: dict[Node, Cotangent] = {}

    def propagate(self, node: Node, cotangent: Cotangent) -> None:
        if node.kind == ELEMENTWISE or is_elementwise_call(node):
            rule = OPS[node.op].vjp
            if rule is None:
                raise not_differentiable(node)
            operands = [operand(source) for source in node.inputs]
            results = rule(cotangent.value, Tracer(node), *operands)
            for source, result in zip(node.inputs, results, strict=True):
                if result is not None and source in self.active:
                    self.add(source, as_tracer(result), cotangent.anchor)
            return
        assert node.kind == NUMPY, node
        exact = self.exact(node, cotangent).value
        for source, result in rules.numpy_vjp(node, exact, self.active):
            self.add(source, as_tracer(result), None)

    def add(self, node: Node, value: Tracer, anchor: Node | None) -> None:
        """Add ``value`` to ``node``'s cotangent.  ``value`` has ``anchor``'s shape, or
        (``anchor`` None) the node's own or one it broadcasts to from a numpy call's
        rule."""
        if value.node.dtype != node.dtype:
            value = value.astype(node.dtype)
        if anchor is None:
            shape = value.node.shape
            if not same_size(shape, node.shape) and \
                    broadcast_shapes(shape, node.shape) != shape:
                value = broadcast_to_node(value, node)
            anchor = node if same_size(value.node.shape, node.shape) else value.node
        assert same_size(value.node.shape, anchor.shape), (value.node, anchor)
        new = Cotangent(value, anchor)
        old = self.cotangents.get(node)
        if old is not None:
            if not self.dimensions.same(old.anchor, new.anchor):
                old, new = self.exact(node, old), self.exact(node, new)
            new = Cotangent(as_tracer(old.value + new.value), old.anchor)
        self.cotangents[node] = new

    def exact(self, node: Node, cotangent: Cotangent) -> Cotangent:
        """``cotangent`` summed to ``node``'s own shape."""
        value = cotangent.value
        shape = value.node.shape
        if same_size(shape, node.shape):
            if cotangent.anchor is not node:  # (a chosen size of 1 broadcast: summed)
                value = as_tracer(rules.to_chosen_size(value, node))
            return Cotangent(value, node)
        extra = len(shape) - node.ndim
        inner = tuple(extra + axis for axis, size in enumerate(node.shape)
                      if size == 1 and shape[extra + axis] != 1)
        total = as_tracer(sums.summed(value, tuple(range(extra)) + inner, node.ndim))
        assert same_size(total.node.shape, node.shape), (total.node, node)
        return Cotangent(total, node)


def operand(node: Node) -> Any:
    """How a rule sees an operand: a constant as its value (a Python number stays weak,
    and work on constants alone is done by numpy now), anything else as a traced value."""
    if node.kind == CONST:
        return node.value.value
    return Tracer(node)
