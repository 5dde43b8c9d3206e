"""Summing a wide cotangent over the axes its node was broadcast along, cheaply.

A cotangent kept wider than its node (``backward.Cotangent``) is summed over the broadcast
axes when a value at the node's own shape is needed.  The elementwise rules that made it
often end in factors constant along those axes: the cotangent of ``b`` in ``(x - b) / s``,
``b`` and ``s`` scalars, is ``-(g / s)`` at ``x``'s size, ``g`` itself often a chain of
constant scalings (``-0.5 * (2.0 * z)`` for a square).  Summed as written, every element
pays a division and a few multiplications.

``summed`` peels those factors off: the outermost ``negative``, ``multiply`` and
``true_divide`` nodes whose other operand is constant along the summed axes — by its
shape, or as a broadcast of a 0-d value (``values.broadcast_to_node``) and arithmetic on
such broadcasts —, and the common outer factor of the two terms of an ``add`` or
``subtract``.  The factors multiply into one value ``scale`` (a division becomes a
multiplication by the reciprocal), computed once, before the loop, and the sum is of
``core * scale``: one multiplication per element instead of a chain with divisions.  (The
sum of ``core`` scaled afterwards would save that multiplication too, but the scaling
would then be a step of its own after the loop's reduction, which costs more than the
multiplication at every size a kernel call is short enough for it to matter.)

Only rounding changes: a factor applied to the element rather than to each intermediate,
a division made a multiplication by the reciprocal (which overflows where the divisor is
below about 1/max, where the gradient does too).  The dtype and shape are those of the sum
as written: every node peeled computes in the cotangent's own dtype.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..graph import CONST, ELEMENTWISE, Node
from ..trace import Tracer
from .values import scalar_source

# Ops whose outer factor can be taken out of a sum: ``negative(u)``; ``multiply(u, k)``
# and ``multiply(k, u)``; ``true_divide(u, k)``.
_SCALING = frozenset({"negative", "multiply", "true_divide"})
# Elementwise arithmetic rebuilt on the narrow values of its operands (``_narrow``).
_ARITHMETIC = {"negative": np.negative, "multiply": np.multiply, "true_divide": np.true_divide,
               "add": np.add, "subtract": np.subtract}



@dataclasses.dataclass(frozen=True)
class Factor:
    """What a sum is multiplied by: ``base`` (a number, weak Python or numpy, or a traced
    value constant along the summed axes), or its reciprocal when ``inverse``."""

    base: Any
    inverse: bool = False

    def value(self) -> Any:
        return 1 / self.base if self.inverse else self.base

    def same(self, other: Factor) -> bool:
        if self.inverse != other.inverse:
            return False
        first, second = self.base, other.base
        if isinstance(first, Tracer) or isinstance(second, Tracer):
            return isinstance(first, Tracer) and isinstance(second, Tracer) \
                and first.node is second.node
        return type(first) is type(second) and bool(first == second)


def summed(value: Tracer, axes: tuple[int, ...], ndim: int) -> Tracer:
    """``value`` summed over ``axes`` (as ``np.sum(value, axis=axes, keepdims=True)``,
    then the leading ``value.ndim - ndim`` axes, all summed, dropped): a result of
    ``ndim`` dimensions, its factors constant along ``axes`` folded into one ``scale``."""
    extra = value.node.ndim - ndim
    core, factors = _peeled(value.node, axes, ndim)
    term = _rebuilt(core, factors)
    inner = any(axis >= extra for axis in axes)
    if not inner:
        return np.sum(term, axis=axes)
    total = np.sum(term, axis=axes, keepdims=True)
    return total[(0,) * extra] if extra else total


def _rebuilt(node: Node, factors: Sequence[Factor] = ()) -> Tracer:
    """``node`` times ``factors``, with the 0-d factors of ``node``'s own products
    (``-(-0.5 * (2.0 * z)) * z``) folded into one: ``z * z`` times their product."""
    own, variables = _monomial(node)
    if not variables:
        return _scaled_by(Tracer(node), list(factors))
    term = _expanded(variables[0])
    for variable in variables[1:]:
        term = term * _expanded(variable)
    rebuilt = _scaled_by(term, [*factors, *own])
    if rebuilt.node.shape != node.shape or rebuilt.node.dtype != node.dtype:
        return _scaled_by(Tracer(node), list(factors))
    return rebuilt


def _scaled_by(term: Tracer, factors: list[Factor]) -> Tracer:
    if not factors:
        return term
    scale = _product(factors)
    if _is_number(scale) and scale == 1:
        return term
    scaled = term * scale
    assert isinstance(scaled, Tracer)
    return scaled


def _expanded(node: Node) -> Tracer:
    """A term of a product: a sum or difference rebuilt term by term (``_rebuilt``)."""
    if not (_plain(node) and node.op in ("add", "subtract")):
        return Tracer(node)
    first, second = (_rebuilt(source) for source in node.inputs)
    combined = _ARITHMETIC[node.op](first, second)
    if not isinstance(combined, Tracer) or combined.node.shape != node.shape \
            or combined.node.dtype != node.dtype:
        return Tracer(node)
    return combined


def _monomial(node: Node) -> tuple[list[Factor], list[Node]]:
    """``node`` as a product: its 0-d factors (numbers, 0-d values and broadcasts of
    them) and the nodes it multiplies (``[node]`` when it is no product)."""
    if not _plain(node) or node.op not in _SCALING:
        return [], [node]
    if node.op == "negative":
        factors, variables = _monomial(node.inputs[0])
        return [Factor(-1), *factors], variables
    if node.op == "true_divide":
        base = _scalar(node.inputs[1], node)
        if base is None:
            return [], [node]
        factors, variables = _monomial(node.inputs[0])
        return [*factors, Factor(base, inverse=True)], variables
    factors, variables = [], []
    for operand in node.inputs:
        base = _scalar(operand, node)
        if base is not None:
            factors.append(Factor(base))
            continue
        more, found = _monomial(operand)
        factors += more
        variables += found
    return factors, variables


def _scalar(operand: Node, node: Node) -> Any:
    """``operand`` of ``node`` as a 0-d value, if it is one or a broadcast of one."""
    return _narrow(operand, node, tuple(range(node.ndim)), 0)


def _product(factors: list[Factor]) -> Any:
    """The factors' product, constants first (numpy folds them now)."""
    values = [factor.value() for factor in factors]
    numbers = [value for value in values if _is_number(value)]
    traced = [value for value in values if not _is_number(value)]
    scale: Any = 1
    for factor in numbers:
        scale = scale * factor
    for factor in traced:
        scale = factor if _is_number(scale) and scale == 1 else scale * factor
    return scale


def _is_number(value: Any) -> bool:
    return not isinstance(value, Tracer) and np.ndim(value) == 0


def _peeled(node: Node, axes: tuple[int, ...], ndim: int) -> tuple[Node, list[Factor]]:
    """``node`` as ``core`` times ``factors``, every factor constant along ``axes``,
    ``core`` of ``node``'s shape and dtype."""
    factors: list[Factor] = []
    while (found := _peel(node, axes, ndim)) is not None:
        node, factor = found
        factors.append(factor)
    return node, factors


def _peel(node: Node, axes: tuple[int, ...], ndim: int) -> tuple[Node, Factor] | None:
    """The outermost factor of ``node`` constant along ``axes``, and what it scales."""
    if not _plain(node):
        return None
    if node.op in _SCALING:
        return _scaled(node, axes, ndim)
    if node.op in ("add", "subtract"):
        return _common(node, axes, ndim)
    return None


def _plain(node: Node) -> bool:
    """An elementwise node of the backward pass computing in its own dtype, under the
    caller's error handling, whose operands have that dtype (or are weak Python numbers).
    (The forward pass's values are computed anyway: rewriting one in terms of its
    operands would only add work.)"""
    return (node.kind == ELEMENTWISE and node.backward and node.errstate is None
            and all(dtype == node.dtype for dtype in node.loop)
            and all(source.dtype == node.dtype or (source.kind == CONST and source.weak)
                    for source in node.inputs))


def _scaled(node: Node, axes: tuple[int, ...], ndim: int) -> tuple[Node, Factor] | None:
    if node.op == "negative":
        return node.inputs[0], Factor(-1)
    first, second = node.inputs
    if first.shape == node.shape and (base := _narrow(second, node, axes, ndim)) is not None:
        return first, Factor(base, inverse=node.op == "true_divide")
    if node.op == "multiply" and second.shape == node.shape \
            and (base := _narrow(first, node, axes, ndim)) is not None:
        return second, Factor(base)
    return None


def _common(node: Node, axes: tuple[int, ...], ndim: int) -> tuple[Node, Factor] | None:
    """``a*k + b*k`` as ``(a + b)`` times ``k`` (``k`` the same node, or the same number),
    so also for ``-``, ``/`` and ``subtract``."""
    if not all(source.shape == node.shape for source in node.inputs):
        return None
    first, second = (_peel(source, axes, ndim) for source in node.inputs)
    if first is None or second is None or not first[1].same(second[1]):
        return None
    combined = _ARITHMETIC[node.op](Tracer(first[0]), Tracer(second[0]))
    if not isinstance(combined, Tracer) or combined.node.shape != node.shape \
            or combined.node.dtype != node.dtype:
        return None
    return combined.node, first[1]


def _narrow(factor: Node, node: Node, axes: tuple[int, ...], ndim: int) -> Any:
    """``factor`` (an operand of ``node``) as a value constant along the summed ``axes``
    and of at most ``ndim`` dimensions: itself when its shape says so, the 0-d value of a
    broadcast (and arithmetic on such values, redone on them), else None."""
    if factor.kind == CONST and factor.ndim == 0:
        return factor.value.value
    offset = node.ndim - factor.ndim
    if factor.ndim <= ndim and all(axis < offset or factor.shape[axis - offset] == 1
                                   for axis in axes):
        return Tracer(factor)
    source = scalar_source(Tracer(factor))
    if source is not None:
        return source.node.value.value if source.node.kind == CONST else source
    if factor.op not in _ARITHMETIC or not _plain(factor):
        return None
    operands = [_narrow(operand, node, axes, ndim) for operand in factor.inputs]
    if any(operand is None for operand in operands):
        return None
    return _ARITHMETIC[factor.op](*operands)
