"""Graph passes: pure ``Graph -> Graph`` functions, run in the order ``simplify`` lists.

* ``fold_constants`` evaluates, with numpy itself, every elementwise node whose operands are
  all 0-d constants, so folded values are exactly numpy's.
* ``eliminate_common_subexpressions`` merges nodes with the same op, inputs and payload
  (and floating-point error handling: the same work under two ``np.errstate`` stays two),
  and ``f(a, b)`` with ``f(b, a)`` where the op row says the swap gives the same bits
  (``OpDef.commutes``).
* ``eliminate_dead_code`` keeps only what the outputs need.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable

import numpy as np

from .graph import CONST, ELEMENTWISE, INPUT, Const, Constant, Graph, Node
from .ops import OPS, evaluate

Rewrite = Callable[[Node, tuple[Node, ...]], Node]


def rewrite(graph: Graph, rule: Rewrite) -> Graph:
    """Rebuild ``graph`` bottom-up; ``rule(node, new_inputs)`` returns the replacement."""
    replaced: dict[Node, Node] = {}
    for node in graph.nodes:
        inputs = tuple(replaced[source] for source in node.inputs)
        replaced[node] = rule(node, inputs)
    return graph.with_outputs([replaced[node] for node in graph.outputs])


def _with_inputs(node: Node, inputs: tuple[Node, ...]) -> Node:
    if all(map(operator.is_, inputs, node.inputs)):  # (same length: a rule's rebuild)
        return node
    return dataclasses.replace(node, inputs=inputs)


def fold_constants(graph: Graph) -> Graph:
    def rule(node: Node, inputs: tuple[Node, ...]) -> Node:
        node = _with_inputs(node, inputs)
        if node.kind != ELEMENTWISE or not all(
            source.kind == CONST and source.ndim == 0 for source in node.inputs
        ):
            return node
        value = evaluate(node.op, node.dtype,
                         [source.value.value for source in node.inputs])
        if node.weak:
            value = np.asarray(value).item()
        return Node("const", CONST, (), node.dtype, (), Constant(Const(value)),
                    weak=node.weak, scalar=node.scalar)

    return rewrite(graph, rule)


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    seen: dict[tuple[object, ...], Node] = {}

    def rule(node: Node, inputs: tuple[Node, ...]) -> Node:
        node = _with_inputs(node, inputs)
        if node.kind == INPUT:
            return node
        operands = tuple(id(source) for source in node.inputs)
        if _commutes(node):  # the same operands in either order, cast to one loop dtype
            operands = tuple(sorted(operands))
        key = (node.op, node.kind, operands, node.payload, node.dtype, node.shape, node.weak,
               node.scalar, node.errstate)
        return seen.setdefault(key, node)

    return rewrite(graph, rule)


def _commutes(node: Node) -> bool:
    """A binary elementwise node whose op row says swapping its operands changes no bit
    of the result, for its loop dtypes (both the same dtype, so swapped they are too)."""
    if node.kind != ELEMENTWISE:
        return False
    row = OPS.get(node.op)
    return row is not None and row.commutes(node.loop)


def eliminate_dead_code(graph: Graph) -> Graph:
    """Drop every node the outputs do not need: a rebuilt graph recomputes ``nodes`` by
    walking back from its outputs, so values traced but never used (and nodes CSE made
    redundant) are gone."""
    return graph.with_outputs(graph.outputs)


PASSES: tuple[Callable[[Graph], Graph], ...] = (
    fold_constants,
    eliminate_common_subexpressions,
    eliminate_dead_code,
)


def simplify(graph: Graph, check: Callable[[Graph], None] | None = None) -> Graph:
    """Run every pass in order; ``check`` (e.g. ``graph.verify``) runs after each one."""
    for graph_pass in PASSES:
        graph = graph_pass(graph)
        if check is not None:
            check(graph)
    return graph
