"""Graph passes: constant folding, common-subexpression and dead-code elimination."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same, check

from numfuse.dtypes import spec_of
from numfuse.graph import CONST, ELEMENTWISE, Graph, verify
from numfuse.ops import OPS
from numfuse.passes import (
    PASSES,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_constants,
    simplify,
)
from numfuse.trace import trace_graph
from numfuse.trace.nodes import const_node, elementwise

X = np.array([-2.0, -0.5, 0.0, 1.5, 4.0])


def traced(fn, *args):
    return trace_graph(fn, [spec_of(value) for value in args])


def count(graph: Graph, op: str) -> int:
    return sum(node.op == op for node in graph.nodes)


# ------------------------------------------------------------------------------------ CSE


def test_cse_merges_duplicate_expressions():
    def duplicated(x):
        a = np.sin(x) * 2.0
        b = np.sin(x) * 2.0
        return a + b, np.sin(x)

    graph = eliminate_common_subexpressions(traced(duplicated, X))
    verify(graph)
    assert count(graph, "sin") == 1
    assert count(graph, "multiply") == 1
    check(duplicated, X, rtol=1e-15)


def test_cse_merges_equal_constants():
    graph = eliminate_common_subexpressions(traced(lambda x: (x + 1.5) * 1.5 - 1.5, X))
    constants = [node for node in graph.nodes if node.kind == CONST]
    assert len(constants) == 1


@pytest.mark.parametrize("fn", [
    pytest.param(lambda x: (x * 0.0, x * -0.0), id="signed-zeros"),
    pytest.param(lambda x: (x + 1, x + 1.0, x + True), id="python-number-kinds"),
    pytest.param(lambda x: (x * np.float32(0.1), x * 0.1), id="float32-vs-float64"),
    pytest.param(lambda x: (x.astype(np.float32), x.astype(np.int32)), id="astype-targets"),
    pytest.param(lambda x: (x - 1.0, 1.0 - x), id="operand-order"),
])
def test_cse_keeps_expressions_that_differ(fn):
    graph = simplify(traced(fn, X), check=verify)
    assert len(set(map(id, graph.outputs))) == len(graph.outputs)
    check(fn, X)


def test_cse_does_not_merge_arguments():
    graph = simplify(traced(lambda x, y: (x + 1.0, y + 1.0), X, X), check=verify)
    assert graph.outputs[0] is not graph.outputs[1]
    assert len(graph.inputs) == 2


I32 = np.array([-7, 0, 3, 2**31 - 1, -(2**31)], np.int32)
I64 = np.array([5, -1, 2**40, 0, 9], np.int64)
U8 = np.array([0, 1, 200, 255, 7], np.uint8)
B = np.array([True, False, True, True, False])


@pytest.mark.parametrize(("fn", "args", "merged"), [
    pytest.param(lambda b, d: (b + d, d + b), (I64, I64), "add", id="int-add"),
    pytest.param(lambda b, d: (b * d, d * b, np.maximum(b, d), np.maximum(d, b)),
                 (I32, I32), "multiply", id="int-multiply-maximum"),
    pytest.param(lambda b, d: (b & d, d & b, b ^ d, d ^ b), (U8, U8), "bitwise_and",
                 id="bitwise"),
    pytest.param(lambda b, d: (b + d, d + b), (I32, I64), "add", id="mixed-int-widths"),
    pytest.param(lambda b, d: (b + 3, 3 + b), (U8, U8), "add", id="weak-python-int"),
    pytest.param(lambda b, d: (b == d, d == b, np.logical_or(b, d), np.logical_or(d, b)),
                 (X, X[::-1].copy()), "equal", id="float-comparisons"),
    pytest.param(lambda b, d: (b | d, d | b), (B, B[::-1].copy()), "bitwise_or", id="bool"),
])
def test_cse_merges_commutative_operations_with_swapped_operands(fn, args, merged):
    """``f(b, d)`` and ``f(d, b)`` become one node when the op row says the swap changes no
    bit for that loop (integer and bool arithmetic, comparisons, logical operations); the
    results are still numpy's, each returned array distinct."""
    graph = simplify(traced(fn, *args), check=verify)
    nodes = [node for node in graph.nodes if node.kind == ELEMENTWISE]
    assert len(nodes) == len(graph.outputs) // 2
    assert graph.outputs[0] is graph.outputs[1] and graph.outputs[0].op == merged
    check(fn, *args)


@pytest.mark.parametrize(("fn", "args"), [
    pytest.param(lambda b, d: (b + d, d + b), (X, X[::-1].copy()), id="float-add"),
    pytest.param(lambda b, d: (np.maximum(b, d), np.maximum(d, b)), (X, -X),
                 id="float-maximum"),
    pytest.param(lambda b, d: (np.hypot(b, d), np.hypot(d, b)), (X, X), id="hypot"),
    pytest.param(lambda b, d: (b - d, d - b), (I64, I64), id="int-subtract"),
])
def test_cse_keeps_swapped_operands_where_the_swap_may_change_bits(fn, args):
    """Float arithmetic returns the first NaN's payload and maximum the second of two
    signed zeros: swapped, they may differ from numpy's bits, so they stay two nodes."""
    graph = simplify(traced(fn, *args), check=verify)
    assert graph.outputs[0] is not graph.outputs[1]
    check(fn, *args)


def test_cse_of_a_swapped_float_add_would_change_a_nan_payload():
    """Why float add is not merged: numpy's ``b + d`` and ``d + b`` differ in the bits of
    the NaN they return when both operands are NaNs of different payloads."""
    b = np.array([0x7FF8000000000001], np.uint64).view(np.float64)
    d = np.array([0x7FF8000000000002], np.uint64).view(np.float64)
    assert (b + d).view(np.uint64)[0] != (d + b).view(np.uint64)[0]
    assert not OPS["add"].commutes((np.dtype(np.float64),) * 2)


# ------------------------------------------------------------------------------------ DCE


def test_unused_values_are_dropped():
    def wasteful(x):
        np.exp(x)
        unused = np.cos(x) * 3.0  # noqa: F841
        return x + 1.0

    graph = simplify(traced(wasteful, X), check=verify)
    assert {node.op for node in graph.nodes} == {"arg", "const", "add"}


def test_dead_code_elimination_keeps_unused_arguments():
    graph = eliminate_dead_code(traced(lambda x, y: x * 2.0, X, X))
    assert len(graph.inputs) == 2
    assert graph.nodes[:2] == graph.inputs


# ------------------------------------------------------------------------ constant folding


def fold(node):
    """Fold a graph whose one output is ``node``; return the folded output node."""
    graph = fold_constants(Graph((), (node,)))
    verify(graph)
    (result,) = graph.outputs
    assert result.kind == CONST, f"{node} was not folded"
    return result


def folded_value(node):
    return fold(node).value.value


@pytest.mark.parametrize(("op", "operands"), [
    ("add", (np.float32(0.1), 0.2)),
    ("add", (np.int8(100), np.int8(100))),
    ("subtract", (np.uint8(3), np.uint8(5))),
    ("multiply", (np.float32(3.4e38), 10)),
    ("true_divide", (np.int16(7), np.int16(2))),
    ("true_divide", (np.float64(1.0), np.float64(0.0))),
    ("floor_divide", (np.int32(-7), 2)),
    ("remainder", (np.float64(-7.5), 2.0)),
    ("power", (np.float32(2.0), 0.5)),
    ("power", (np.int64(3), np.int64(4))),
    ("less", (np.int8(5), 1000)),
    ("greater_equal", (np.uint64(2**64 - 1), -1)),
    ("maximum", (np.float64(np.nan), np.float64(1.0))),
    ("sqrt", (np.float32(2.0),)),
    ("sin", (np.float64(0.5),)),
    ("negative", (np.int8(-128),)),
    ("logical_and", (np.float64(0.5), 0)),
    ("copysign", (np.float64(1.0), np.float64(-0.0))),
])
def test_folding_gives_exactly_numpys_value(op, operands):
    node = elementwise(OPS[op], [const_node(value) for value in operands])
    with np.errstate(all="ignore"):
        expected = OPS[op].reference(*operands)
    value = folded_value(node)
    assert_same(value, expected)


def test_folding_python_numbers_keeps_them_python_numbers():
    node = elementwise(OPS["multiply"], [const_node(3), const_node(2.5)], weak=True)
    folded = fold(node)
    assert folded.weak
    assert_same(folded_value(node), 3 * 2.5)


def test_folding_is_transitive_and_feeds_array_expressions():
    x = trace_graph(lambda x: x, [spec_of(X.astype(np.float32))]).inputs[0]
    scale = elementwise(OPS["sqrt"], [elementwise(OPS["add"], [const_node(np.float32(1.0)),
                                                                const_node(3)])])
    graph = fold_constants(Graph((x,), (elementwise(OPS["multiply"], [x, scale]),)))
    verify(graph)
    (output,) = graph.outputs
    constant = output.inputs[1]
    assert constant.kind == CONST
    assert_same(constant.value.value, np.sqrt(np.float32(1.0) + 3))
    assert [node.op for node in graph.nodes if node.kind == ELEMENTWISE] == ["multiply"]


def test_folding_leaves_array_operands_alone():
    graph = fold_constants(traced(lambda x: x * 2.0 + np.arange(5.0), X))
    assert count(graph, "multiply") == 1
    assert count(graph, "add") == 1


# -------------------------------------------------------------------------------- simplify


def test_simplify_runs_the_check_after_every_pass():
    checked = []
    simplify(traced(lambda x: np.sin(x) + np.sin(x), X), check=checked.append)
    assert len(checked) == len(PASSES)


def test_passes_do_not_change_their_input_graph():
    graph = traced(lambda x: (np.sin(x) + np.sin(x), np.cos(x) * 0.0), X)
    before = str(graph)
    nodes = graph.nodes
    simplify(graph, check=verify)
    assert str(graph) == before
    assert graph.nodes == nodes


def test_simplified_programs_compute_numpys_results():
    def redundant(x, y):
        a = (x - y) * (x - y)
        b = (x - y) * (x - y)
        return a + b, a - b, np.maximum(a, x - y)

    check(redundant, X, X[::-1].copy())
