"""The IR: nodes, Graph, toposort, broadcasting of shape patterns, verify, str()."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numfuse.dtypes import spec_of
from numfuse.graph import (
    CONST,
    ELEMENTWISE,
    INPUT,
    NUMPY,
    Argument,
    Call,
    Const,
    Constant,
    ErrState,
    Graph,
    Loop,
    Node,
    broadcast_shapes,
    toposort,
    verify,
)
from numfuse.trace import trace_graph

F64 = np.dtype(np.float64)


def arg(index: int, shape) -> Node:
    return Node("arg", INPUT, (), F64, tuple(shape), Argument(index))


def add(a: Node, b: Node, shape=None) -> Node:
    shape = broadcast_shapes(a.shape, b.shape) if shape is None else shape
    return Node("add", ELEMENTWISE, (a, b), F64, shape, Loop((F64, F64)))


# ------------------------------------------------------------------------------- str()


def test_str_reads_like_a_jaxpr():
    graph = trace_graph(lambda x, y: np.sin(x) * y + 2.0,
                        [spec_of(np.ones(3)), spec_of(np.ones((3, 1), np.float32))])
    assert str(graph) == (
        "{ lambda a:f64[n] b:f32[n,1] .\n"
        "    c:f64[n] = sin a\n"
        "    d:f64[n,n] = multiply c b\n"
        "    f:f64[n,n] = add d 2.0\n"
        "  in (f) }"
    )


def test_str_names_array_constants_and_known_sizes():
    table = np.arange(4.0)
    graph = trace_graph(lambda x: x * table, [spec_of(np.ones(4))])
    text = str(graph)
    assert "f64[4] = const [0.0, 1.0, 2.0, 3.0]" in text
    assert "= multiply a" in text


def test_str_of_a_graph_with_many_values_uses_multi_letter_names():
    def chain(x):
        for _ in range(30):
            x = x + 1.0
        return x

    text = str(trace_graph(chain, [spec_of(np.ones(2))]))
    names = [line.split(":")[0].strip() for line in text.splitlines()[1:-1]]
    assert len(names) == 30
    assert len(set(names)) == 30
    assert "aa" in names


def test_node_repr_and_type_str():
    node = arg(0, (None, 1))
    assert node.type_str() == "f64[n,1]"
    assert repr(node) == "Node(arg, f64[n,1])"
    assert node.ndim == 2
    assert node.ones == (False, True)
    assert node.index == 0
    assert node.loop == () and node.call is None and node.reduction is None
    with pytest.raises(TypeError, match="not a constant"):
        _ = node.value


# ---------------------------------------------------------------------------- verify


def test_verify_accepts_traced_graphs():
    graph = trace_graph(lambda x, y: (x * y, np.where(x > y, x, y - 1.0)),
                        [spec_of(np.ones((2, 3))), spec_of(np.ones(3))])
    verify(graph)


def test_verify_rejects_an_elementwise_node_with_the_wrong_shape():
    x, y = arg(0, (None,)), arg(1, (None, 1))
    broken = add(x, y, shape=(None,))
    with pytest.raises(AssertionError, match="shape"):
        verify(Graph((x, y), (broken,)))


def test_verify_rejects_an_argument_the_graph_does_not_list():
    x, y = arg(0, (None,)), arg(1, (None,))
    with pytest.raises(AssertionError, match="argument"):
        verify(Graph((x,), (add(x, y),)))


def test_verify_rejects_a_node_without_a_numpy_dtype():
    x = arg(0, (None,))
    broken = Node("negative", ELEMENTWISE, (x,), "float64", (None,),  # type: ignore[arg-type]
                  Loop((F64,)))
    with pytest.raises(AssertionError, match="dtype"):
        verify(Graph((x,), (broken,)))


@pytest.mark.parametrize(("make", "words"), [
    (lambda x: Node("negative", ELEMENTWISE, (x,), F64, (None,)), "carries None, not a Loop"),
    (lambda x: Node("negative", ELEMENTWISE, (x,), F64, (None,), Argument(0)), "not a Loop"),
    (lambda x: Node("negative", ELEMENTWISE, (x,), F64, (None,), Loop((F64, F64))),
     "2 loop dtypes for 1 inputs"),
    (lambda x: Node("negative", "elementwise", (x,), F64, (None,), Loop((F64,))),  # type: ignore[arg-type]
     "not a NodeKind"),
    (lambda x: Node("sort", NUMPY, (x,), F64, (None,), Constant(Const(1.0))), "not a Call"),
    (lambda x: Node("const", CONST, (x,), F64, (), Constant(Const(1.0))), "has inputs"),
], ids=["no-payload", "another-kinds-payload", "loop-dtypes-per-input", "kind-as-text",
        "numpy-call-without-call", "constant-with-inputs"])
def test_verify_checks_each_kind_carries_its_payload(make, words):
    x = arg(0, (None,))
    with pytest.raises(AssertionError, match=words):
        verify(Graph((x,), (make(x),)))


def test_errstate_of_operations_is_traced_printed_and_verified():
    def fn(x):
        y = x * 2.0
        with np.errstate(divide="ignore", over="raise"):
            z = np.log(y)
        return y, z

    graph = trace_graph(fn, [spec_of(np.ones(3))])
    verify(graph)
    y, z = graph.outputs
    assert y.errstate is None
    assert z.errstate == ErrState((("divide", "ignore"), ("over", "raise")))
    assert "= log c  # under np.errstate(divide='ignore', over='raise')" in str(graph)
    constant = Node("const", CONST, (), F64, (), Constant(Const(1.0)), errstate=z.errstate)
    x = arg(0, (None,))
    with pytest.raises(AssertionError, match="raises no floating-point errors"):
        verify(Graph((x,), (add(x, constant),)))
    with pytest.raises(AssertionError, match="not an ErrState"):
        verify(Graph((x,), (Node("negative", ELEMENTWISE, (x,), F64, (None,), Loop((F64,)),
                                 errstate="ignore"),)))  # type: ignore[arg-type]


def test_verify_rejects_an_argument_at_another_position():
    x, y = arg(0, (None,)), arg(0, (None,))
    with pytest.raises(AssertionError, match="is not argument 0"):
        verify(Graph((x, y), (add(x, y),)))


def test_a_numpy_node_reads_its_call_payload():
    x = arg(0, (None,))
    node = Node("sort", NUMPY, (x,), F64, (None,), Call("the call", frozenset({0})))
    assert node.call == "the call" and node.moving == {0} and node.reduction is None
    with pytest.raises(TypeError, match="not an argument"):
        _ = node.index


# -------------------------------------------------------------------------- toposort


def test_toposort_puts_every_node_after_its_inputs_and_lists_each_once():
    x, y = arg(0, (None,)), arg(1, (None,))
    a = add(x, y)
    b = add(a, x)
    c = add(a, b)
    order = toposort([c, b, a])
    assert len(order) == len(set(map(id, order))) == 5
    position = {id(node): index for index, node in enumerate(order)}
    for node in order:
        for source in node.inputs:
            assert position[id(source)] < position[id(node)]


def test_toposort_handles_very_deep_graphs_without_recursion():
    node = arg(0, (None,))
    start = node
    for _ in range(20_000):
        node = Node("negative", ELEMENTWISE, (node,), F64, (None,), Loop((F64,)))
    order = toposort([node])
    assert len(order) == 20_001
    assert order[0] is start and order[-1] is node


def test_graph_nodes_start_with_the_arguments_in_order_even_if_unused():
    x, y, z = arg(0, (None,)), arg(1, (None,)), arg(2, (None,))
    graph = Graph((x, y, z), (add(z, x),))
    assert graph.nodes[:3] == (x, y, z)
    assert graph.consumers[y] == []
    assert len(graph.consumers[x]) == 1


# --------------------------------------------------------------- broadcasting of patterns

PATTERN_SIZES = st.sampled_from([1, 2, 3])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(PATTERN_SIZES, max_size=3), min_size=1, max_size=4))
def test_broadcast_shapes_of_concrete_shapes_is_numpys(shapes):
    shapes = [tuple(shape) for shape in shapes]
    try:
        expected = np.broadcast_shapes(*shapes)
    except ValueError:
        with pytest.raises(ValueError):
            broadcast_shapes(*shapes)
        return
    assert broadcast_shapes(*shapes) == expected


@pytest.mark.parametrize(("shapes", "expected"), [
    (((None,), (1,)), (None,)),
    (((None,), ()), (None,)),
    (((None, 1), (None,)), (None, None)),
    (((None,), (4,)), (4,)),
    (((1, 1), (1,)), (1, 1)),
    (((None, 1, 3), (2, 1)), (None, 2, 3)),
])
def test_broadcast_shapes_with_free_sizes(shapes, expected):
    assert broadcast_shapes(*shapes) == expected


def test_broadcast_shapes_raises_like_numpy_on_conflicting_known_sizes():
    with pytest.raises(ValueError, match="could not be broadcast"):
        broadcast_shapes((None, 3), (4,))


# ---------------------------------------------------------------------------- constants


def test_const_compares_by_value_and_distinguishes_what_numpy_distinguishes():
    assert Const(1.5) == Const(1.5)
    assert hash(Const(1.5)) == hash(Const(1.5))
    assert Const(0.0) != Const(-0.0)
    assert Const(float("nan")) == Const(float("nan"))
    assert Const(1) != Const(1.0)
    assert Const(True) != Const(1)
    assert Const(np.float32(1)) != Const(np.float64(1))
    assert Const(np.arange(3.0)) == Const(np.arange(3.0))
    assert Const(np.arange(3.0)) != Const(np.arange(3.0).reshape(3, 1))
    assert Const(np.arange(3)) != Const(np.arange(3.0))


def test_const_array_is_a_read_only_snapshot():
    values = np.arange(3.0)
    constant = Const(values)
    values[0] = 99.0
    assert constant.value[0] == 0.0
    assert not constant.value.flags.writeable


def test_const_node_kind():
    graph = trace_graph(lambda x: x + np.arange(3.0), [spec_of(np.ones(3))])
    constants = [node for node in graph.nodes if node.kind == CONST]
    assert len(constants) == 1
    assert constants[0].shape == (3,)
