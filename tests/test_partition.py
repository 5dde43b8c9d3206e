"""Partitioning into convex multi-output regions, by hand-made cases and random graphs.

Every plan is checked with ``check_plan`` (one region per elementwise node, one loop shape
per region, convexity, execution order, operand cap); compiled programs are compared with
numpy.  Graphs with a hand-made non-fusible node kind (``opaque``) exercise convexity,
which elementwise-only graphs rarely stress: broadcasting only ever adds dimensions, so a
path that leaves a loop shape never comes back to it through elementwise nodes alone.
"""

from __future__ import annotations

import dataclasses
import itertools
import pickle

import numpy as np
import pytest
from conftest import assert_like_numpy, assert_same, check, numpy_result
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import numfuse
from numfuse.codegen import emit
from numfuse.dtypes import spec_of
from numfuse.graph import (
    ELEMENTWISE,
    INPUT,
    NUMPY,
    Argument,
    Call,
    Graph,
    Loop,
    Node,
    broadcast_shapes,
    verify,
)
from numfuse.partition import (
    MAX_OPERANDS,
    MAX_PASSES,
    RECOMPUTE_MAX_COST,
    Plan,
    Reason,
    Refusal,
    Region,
    check_plan,
    op_cost,
    partition,
    schedule,
)
from numfuse.passes import simplify
from numfuse.trace import trace_graph

F64 = np.dtype(np.float64)
RNG = np.random.default_rng(23)


def plan_of(fn, *args) -> Plan:
    graph = simplify(trace_graph(fn, [spec_of(value) for value in args]), check=verify)
    plan = partition(graph)
    check_plan(plan)
    return plan


def ops_of(region: Region) -> list[str]:
    return [node.op for node in region.nodes]


# ------------------------------------------------------------------------ hand-made cases


def test_founding_case_is_one_region_with_two_outputs():
    def logp_and_grad(x, mu):
        d = x - mu
        return -(d**2) / 2, -d

    plan = plan_of(logp_and_grad, np.ones(4), 0.5)
    (region,) = plan.regions
    assert len(region.inputs) == 2
    assert region.outputs == plan.graph.outputs
    assert ops_of(region).count("subtract") == 1


def test_value_used_before_and_after_another_loop_shape():
    """``d`` feeds a 2-d result and, later, more 1-d work: the 1-d work is one region."""
    def mixed(row, column):
        d = row - 1.0
        grid = d * column
        e = d * 2.0
        return grid + 1.0, e + d

    row, column = np.arange(5.0), np.arange(3.0)[:, None]
    plan = plan_of(mixed, row, column)
    assert len(plan.regions) == 2
    shapes = {region.ones: ops_of(region) for region in plan.regions}
    assert sorted(shapes[(False,)]) == ["add", "multiply", "subtract"]
    assert sorted(shapes[(False, False)]) == ["add", "multiply"]
    one_d = next(region for region in plan.regions if region.ones == (False,))
    assert len(one_d.outputs) == 2  # d for the 2-d region, and e + d
    check(mixed, row, column)


def test_siblings_reading_one_value_fuse_into_one_kernel():
    def sin_cos(x):
        return np.sin(x), np.cos(x)

    plan = plan_of(sin_cos, np.ones(4))
    (region,) = plan.regions
    assert len(region.inputs) == 1
    assert len(region.outputs) == 2
    compiled = numfuse.compile(sin_cos, np.ones(4))
    assert len(compiled.kernels) == 1
    check(sin_cos, np.linspace(-3, 3, 11), rtol=1e-15)


def test_regions_of_different_loop_shapes_stay_separate():
    def two_shapes(row, column):
        return row * 2.0, column * 2.0

    plan = plan_of(two_shapes, np.ones(4), np.ones((4, 1)))
    assert len(plan.regions) == 2
    assert {region.ones for region in plan.regions} == {(False,), (False, True)}
    check(two_shapes, np.arange(4.0), np.arange(3.0)[:, None])


def test_elementwise_diamond_is_one_region():
    def diamond(x):
        a = np.sin(x)
        return (a * 2.0) * (a + 1.0)

    (region,) = plan_of(diamond, np.ones(3)).regions
    assert len(region.outputs) == 1


def test_regions_are_in_execution_order():
    def chain_of_shapes(row, column, cube):
        a = row * 2.0
        b = np.sin(a + column)  # too costly to recompute inside the cube's loop
        c = b * cube
        return c - 1.0, a + 1.0

    plan = plan_of(chain_of_shapes, np.ones(4), np.ones((3, 1)), np.ones((2, 1, 1)))
    assert [region.ones for region in plan.regions] == [
        (False,), (False, False), (False, False, False)]
    check(chain_of_shapes, np.arange(4.0), np.arange(3.0)[:, None], np.arange(2.0)[:, None, None],
          rtol=1e-15)


def test_deep_chain_partitions_into_one_region_without_recursion():
    def deep(x):
        for index in range(1000):
            x = x * 0.5 + float(index)
        return x

    plan = plan_of(deep, np.ones(3))
    assert len(plan.regions) == 1


# ----------------------------------------------------------------------- the operand cap


def assert_operand_cap(compiled) -> None:
    for kernel in compiled.kernels:
        assert kernel.n_inputs + kernel.n_outputs <= MAX_OPERANDS
        assert kernel.layout.count("(") == kernel.n_inputs + kernel.n_outputs


def test_sum_of_seventy_arrays_is_split_under_the_operand_cap():
    def total(*values):
        result = values[0]
        for value in values[1:]:
            result = result + value
        return result

    args = [np.arange(4.0) * index for index in range(70)]
    compiled = numfuse.compile(total, *args)
    assert len(compiled.kernels) >= 2
    assert_operand_cap(compiled)
    assert_same(compiled(*args), total(*args))


def test_seventy_outputs_are_split_under_the_operand_cap():
    def many(x):
        return [x + float(index) for index in range(70)]

    compiled = numfuse.compile(many, np.arange(4.0))
    assert len(compiled.kernels) >= 2
    assert_operand_cap(compiled)
    assert_same(compiled(np.arange(4.0)), many(np.arange(4.0)))


def test_many_inputs_and_many_outputs_are_split_under_the_operand_cap():
    def pairwise(*values):
        return tuple(a * b for a, b in itertools.pairwise(values))

    args = [np.arange(3.0) + index for index in range(40)]
    compiled = numfuse.compile(pairwise, *args)
    assert_operand_cap(compiled)
    check_plan(compiled.plan)
    assert_same(compiled(*args), pairwise(*args))


# ------------------------------------------------------- convexity with non-fusible nodes


def arg(index: int, shape=(None,)) -> Node:
    return Node("arg", INPUT, (), F64, shape, Argument(index))


def unary(op: str, source: Node) -> Node:
    return Node(op, ELEMENTWISE, (source,), F64, source.shape, Loop((F64,)))


def binary(op: str, left: Node, right: Node) -> Node:
    return Node(op, ELEMENTWISE, (left, right), F64, broadcast_shapes(left.shape, right.shape),
                Loop((F64, F64)))


def opaque(*sources: Node, shape=None) -> Node:
    """A node numfuse cannot fuse (like a reduction would be): any shape, never in a region."""
    shape = sources[0].shape if shape is None else shape
    return Node("opaque", NUMPY, tuple(sources), F64, shape, Call(None))


def region_of(plan: Plan) -> dict[Node, int]:
    return {node: region.index for region in plan.regions for node in region.nodes}


def test_vertical_diamond_through_a_non_fusible_node_stays_convex():
    """a -> b -> d and a -> r -> d with r not fusible: {a, b, d} in one region would need
    r both before and after it."""
    x = arg(0)
    a = unary("sin", x)
    b = unary("cos", a)
    r = opaque(a, shape=(1,))  # e.g. a reduction: another loop shape
    d = binary("add", b, r)
    plan = partition(Graph((x,), (d,)))
    check_plan(plan)
    owner = region_of(plan)
    assert owner[a] == owner[b]
    assert owner[d] != owner[a]


def test_horizontal_siblings_connected_through_a_non_fusible_node_stay_apart():
    """a and b both read x; b also reads r, computed from a: fusing the siblings a and b
    would put a region both before and after r."""
    x = arg(0)
    a = unary("sin", x)
    r = opaque(a)
    b = binary("add", x, r)
    plan = partition(Graph((x,), (b, a)))
    check_plan(plan)
    owner = region_of(plan)
    assert owner[a] != owner[b]


def test_path_through_two_non_fusible_nodes_and_a_region_between_them():
    x = arg(0)
    a = unary("negative", x)
    r1 = opaque(a)
    m = unary("exp", r1)
    r2 = opaque(m)
    d = binary("multiply", a, r2)
    e = binary("add", d, x)
    plan = partition(Graph((x,), (e, m)))
    check_plan(plan)
    owner = region_of(plan)
    assert owner[a] != owner[d]
    assert owner[d] == owner[e]
    order = [owner[a], owner[m], owner[d]]
    assert order == sorted(order)


# ------------------------------------------------------------- check_plan can say no


def test_check_plan_rejects_a_non_convex_region():
    x = arg(0)
    a = unary("sin", x)
    r = opaque(a)
    d = binary("add", a, r)
    graph = Graph((x,), (d,))
    bad = Plan(graph, (Region(0, (a, d), (x, r), (a, d)),))
    with pytest.raises(AssertionError, match="convex"):
        check_plan(bad)


def test_check_plan_rejects_mixed_loop_shapes_and_missing_nodes():
    x, column = arg(0), arg(1, (None, 1))
    a = unary("sin", x)
    b = binary("add", a, column)
    graph = Graph((x, column), (b, a))
    with pytest.raises(AssertionError, match="recomputed yet an output"):
        check_plan(Plan(graph, (Region(0, (a, b), (x, column), (b, a)),)))
    row = arg(2, (1, None))
    down, across = unary("sin", column), unary("cos", row)
    with pytest.raises(AssertionError, match="does not broadcast"):
        check_plan(Plan(Graph((column, row), (down,)),
                        (Region(0, (down, across), (column, row), (down,)),)))
    graph = Graph((x, column), (b,))
    with pytest.raises(AssertionError, match="no region"):
        check_plan(Plan(graph, (Region(0, (a,), (x,), (a,)),)))


def test_check_plan_rejects_regions_out_of_order():
    x, column = arg(0), arg(1, (None, 1))
    a = unary("sin", x)
    b = binary("add", a, column)
    graph = Graph((x, column), (b,))
    backwards = Plan(graph, (Region(0, (b,), (a, column), (b,)), Region(1, (a,), (x,), (a,))))
    with pytest.raises(AssertionError, match="runs later"):
        check_plan(backwards)


# ----------------------------------------------------- random graphs of non-fusible nodes

HAND_SHAPES = [(None,), (1,), (None, None), (None, 1), (1, None), ()]


@st.composite
def hand_made_graphs(draw):
    shapes = draw(st.lists(st.sampled_from(HAND_SHAPES), min_size=1, max_size=3))
    nodes = [arg(index, shape) for index, shape in enumerate(shapes)]
    inputs = tuple(nodes)
    for _ in range(draw(st.integers(1, 16))):
        pick = st.integers(0, len(nodes) - 1)
        kind = draw(st.sampled_from(["unary", "binary", "binary", "binary", "opaque"]))
        if kind == "unary":
            nodes.append(unary("negative", nodes[draw(pick)]))
        elif kind == "binary":
            nodes.append(binary("add", nodes[draw(pick)], nodes[draw(pick)]))
        else:
            sources = [nodes[draw(pick)] for _ in range(draw(st.integers(1, 2)))]
            nodes.append(opaque(*sources, shape=draw(st.sampled_from(HAND_SHAPES))))
    extra = draw(st.lists(st.integers(len(inputs), len(nodes) - 1), max_size=3))
    outputs = tuple([nodes[-1]] + [nodes[index] for index in extra])
    return Graph(inputs, outputs)


@settings(max_examples=300, deadline=None)
@given(hand_made_graphs())
def test_random_graphs_with_non_fusible_nodes_partition_into_convex_regions(graph):
    verify(graph)
    plan = partition(graph)
    check_plan(plan)
    for region in plan.regions:
        generated = emit(region)
        # outputs written into an input's buffer are not gufunc operands (a placeholder
        # output stands in when that is all of them)
        assert generated.layout.count("(") == len(region.inputs) + len(region.outputs) - \
            len(region.donate) + generated.placeholder


# --------------------------------------------------- random traced programs against numpy

# Every example of the numeric tests compiles kernels; shrinking a failure would cost
# minutes, and the drawn program (at most 8 steps) is readable as it is.
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)
PATTERNS = {"n": (5,), "1": (1,), "mn": (3, 5), "m1": (3, 1), "0d": ()}
FLOAT64 = st.just(F64)
VALUES = [-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, 1e300, np.inf, np.nan]
BINARY = {"add": np.add, "multiply": np.multiply, "subtract": np.subtract,
          "maximum": np.maximum}


@dataclasses.dataclass(frozen=True)
class Program:
    """A random numpy program: input patterns, steps over earlier values, returned values.

    A step is ``(op, i, j)`` for a binary op, ``("sin", i)``, ``("where", i, j, k, l)``
    for ``np.where(v[i] < v[j], v[k], v[l])`` or ``("scale", i, c)`` for ``v[i] * c``.
    """

    patterns: tuple[str, ...]
    steps: tuple[tuple, ...]
    outputs: tuple[int, ...]

    def __call__(self, *args):
        values = list(args)
        for op, *operands in self.steps:
            if op == "sin":
                values.append(np.sin(values[operands[0]]))
            elif op == "where":
                a, b, c, d = (values[index] for index in operands)
                values.append(np.where(a < b, c, d))
            elif op == "scale":
                values.append(values[operands[0]] * operands[1])
            else:
                values.append(BINARY[op](values[operands[0]], values[operands[1]]))
        return tuple(values[index] for index in self.outputs)

    def returning_every_result(self) -> Program:
        """The same program returning every step's value that no later step reads, so
        nothing numpy computes (or raises on) is dead code."""
        first_step = len(self.patterns)
        read = {index for step in self.steps for index in step[1:5] if type(index) is int}
        sinks = [first_step + position for position in range(len(self.steps))
                 if first_step + position not in read]
        return dataclasses.replace(self, outputs=(*self.outputs, *sinks))

    @property
    def transcendental(self) -> bool:
        return any(step[0] == "sin" for step in self.steps)


@st.composite
def programs(draw, leading: tuple[str, ...] = ()):
    patterns = leading + tuple(
        draw(st.lists(st.sampled_from(sorted(PATTERNS)), min_size=1, max_size=4)))
    steps = []
    for index in range(draw(st.integers(1, 8))):
        value = st.integers(0, len(patterns) + index - 1)
        op = draw(st.sampled_from([*BINARY, "sin", "where", "scale"]))
        if op == "sin":
            steps.append((op, draw(value)))
        elif op == "where":
            steps.append((op, draw(value), draw(value), draw(value), draw(value)))
        elif op == "scale":
            steps.append((op, draw(value), draw(st.sampled_from([0.5, -2.0, 3.0]))))
        else:
            steps.append((op, draw(value), draw(value)))
    last = len(patterns) + len(steps) - 1
    extra = draw(st.lists(st.integers(0, last), max_size=3))
    return Program(patterns, tuple(steps), (last, *extra))


def arguments(program: Program, dtypes=FLOAT64):
    return st.tuples(*(hnp.arrays(dtypes, PATTERNS[pattern], elements=st.sampled_from(VALUES))
                       for pattern in program.patterns))


def resized(pattern: str, sizes: tuple[int, int]) -> tuple[int, ...]:
    m, n = sizes
    return {"n": (n,), "1": (1,), "mn": (m, n), "m1": (m, 1), "0d": ()}[pattern]


def jitted_program(program: Program):
    def run(*args):
        return program(*args)

    return run


@settings(max_examples=150, deadline=None)
@given(programs())
def test_random_programs_trace_to_valid_plans(program):
    specs = [spec_of(np.ones(PATTERNS[pattern])) for pattern in program.patterns]
    graph = simplify(trace_graph(jitted_program(program), specs), check=verify)
    plan = partition(graph)
    check_plan(plan)
    for region in plan.regions:
        generated = emit(region)
        assert len(generated.core_inputs) == len(region.inputs)


@settings(max_examples=40, deadline=None, phases=NO_SHRINK)
@given(st.data())
def test_random_programs_compute_numpys_results(data):
    program = data.draw(programs(), label="program")
    args = data.draw(arguments(program), label="args")
    expected = numpy_result(program, *args)
    compiled = numfuse.compile(jitted_program(program), *args)
    check_plan(compiled.plan)
    tolerance = {"rtol": 1e-13, "atol": 1e-13} if program.transcendental else {}
    with np.errstate(all="ignore"):
        actual = compiled(*args)
    assert_same(actual, expected, **tolerance)


@settings(max_examples=25, deadline=None, phases=NO_SHRINK)
@given(st.data())
def test_random_programs_with_float32_and_float64_inputs(data):
    program = data.draw(programs(), label="program")
    dtypes = st.sampled_from([F64, np.dtype(np.float32)])
    args = data.draw(arguments(program, dtypes), label="args")
    expected = numpy_result(program, *args)
    with np.errstate(all="ignore"):
        actual = numfuse.jit(jitted_program(program))(*args)
    single = any(arg.dtype == np.float32 for arg in args)
    tolerance = {}
    if program.transcendental:
        tolerance = {"rtol": 1e-6, "atol": 1e-6} if single else {"rtol": 1e-13, "atol": 1e-13}
    assert_same(actual, expected, **tolerance)


@settings(max_examples=25, deadline=None, phases=NO_SHRINK)
@given(st.data())
def test_random_programs_with_inputs_of_different_sizes(data):
    """Inputs whose sizes may disagree: wherever numpy broadcasts, numfuse must give
    numpy's result; wherever numpy raises ValueError, numfuse must raise it too."""
    program = data.draw(programs(), label="program").returning_every_result()
    sizes = st.sampled_from([(3, 5), (3, 5), (2, 4)])
    args = tuple(
        data.draw(hnp.arrays(F64, resized(pattern, data.draw(sizes)),
                             elements=st.sampled_from(VALUES)), label=f"arg {index}")
        for index, pattern in enumerate(program.patterns)
    )
    jitted = numfuse.jit(jitted_program(program))
    try:
        expected = numpy_result(program, *args)
    except ValueError:
        with pytest.raises(ValueError), np.errstate(all="ignore"):
            jitted(*args)
        return
    with np.errstate(all="ignore"):
        actual = jitted(*args)
    tolerance = {"rtol": 1e-13, "atol": 1e-13} if program.transcendental else {}
    assert_same(actual, expected, **tolerance)


@settings(max_examples=25, deadline=None, phases=NO_SHRINK)
@given(st.data())
def test_independent_programs_side_by_side_with_different_sizes(data):
    """Two unrelated programs in one function, sharing only a 0-d argument (and maybe
    constants), on arrays of different sizes: numpy runs each on its own sizes."""
    first = data.draw(programs(leading=("0d",)), label="first")
    second = data.draw(programs(leading=("0d",)), label="second")
    scalar = data.draw(hnp.arrays(F64, (), elements=st.sampled_from(VALUES)), label="scalar")

    def arrays_for(program, sizes, label):
        return tuple(data.draw(hnp.arrays(F64, resized(pattern, sizes),
                                          elements=st.sampled_from(VALUES)), label=label)
                     for pattern in program.patterns[1:])

    first_args = arrays_for(first, (3, 5), "first args")
    second_args = arrays_for(second, (2, 4), "second args")
    split = len(first_args)

    def side_by_side(shared, *args):
        return first(shared, *args[:split]), second(shared, *args[split:])

    expected = numpy_result(side_by_side, scalar, *first_args, *second_args)
    with np.errstate(all="ignore"):
        actual = numfuse.jit(side_by_side)(scalar, *first_args, *second_args)
    transcendental = first.transcendental or second.transcendental
    tolerance = {"rtol": 1e-13, "atol": 1e-13} if transcendental else {}
    assert_same(actual, expected, **tolerance)


def test_scalar_work_feeding_kernels_runs_in_their_prelude():
    """``-r`` on a scalar argument is computed once before the loop of the kernel that
    reads it, not as a kernel of its own; a returned scalar keeps its own kernel."""
    def f(x, r):
        y = np.exp(-r * x)
        return y * x, y + x

    x = np.linspace(0.0, 3.0, 11)
    compiled = numfuse.compile(f, x, 0.02)
    assert [kernel.layout for kernel in compiled.kernels] == ["(),(n)->(n),(n)"]
    kernel = compiled.kernels[0]
    assert kernel.region.prelude and all(node.ndim == 0 for node in kernel.region.prelude)
    assert "s0 = " in kernel.source.split("for i in range")[0]
    check_plan(compiled.plan)
    for got, want in zip(compiled(x, 0.02), f(x, 0.02), strict=True):
        np.testing.assert_array_equal(got, want)

    def g(x, r):
        s = -r
        return x * s, s

    compiled = numfuse.compile(g, x, 0.5)
    assert len(compiled.kernels) == 2
    got = compiled(x, 0.5)
    np.testing.assert_array_equal(got[0], x * -0.5)
    assert got[1] == -0.5 and type(got[1]) is float


def test_scalar_work_reading_its_own_values_still_runs_in_the_prelude():
    """A scalar value both read by the kernel and by more scalar work (``k`` and ``k *
    k``) folds into the prelude with that work: one kernel, not a kernel of length-1
    arrays before it."""
    def f(x, s):
        k = 1.0 / s
        return x * k + x * (k * k)

    x = np.linspace(0.0, 3.0, 37)
    compiled = numfuse.compile(f, x, 1.5)
    assert [kernel.layout for kernel in compiled.kernels] == ["(),(n)->(n)"]
    assert len(compiled.kernels[0].region.prelude) == 2
    check_plan(compiled.plan)
    np.testing.assert_array_equal(compiled(x, 1.5), f(x, 1.5))


# ------------------------------------------------------------- regions across loop shapes


def _kernel_layouts(fn, *args):
    compiled = numfuse.compile(fn, *args)
    check_plan(compiled.plan)
    return compiled, [kernel.layout for kernel in compiled.kernels]


def test_cheap_work_on_a_row_vector_is_recomputed_inside_the_matrix_loop():
    m, v = np.random.default_rng(0).random((50, 60)), np.random.default_rng(1).random(60)

    def fn(m, v):
        return (v * 2 + 1) * m

    compiled, layouts = _kernel_layouts(fn, m, v)
    assert layouts == ["(n),(n)->(n)"]  # one kernel, reading v itself
    assert compiled.plan.regions[0].ones == (False, False)
    assert_same(compiled(m, v), fn(m, v))


def test_expensive_work_on_a_row_vector_is_computed_once_in_its_own_kernel():
    m, v = np.random.default_rng(0).random((50, 60)), np.random.default_rng(1).random(60)

    def fn(m, v):
        return np.arctan(v) * m  # transcendental: costly per element

    compiled, layouts = _kernel_layouts(fn, m, v)
    assert layouts == ["(n)->(n)", "(n),(n)->(n)"]
    assert op_cost(compiled.plan.regions[0].nodes[0]) > RECOMPUTE_MAX_COST
    assert_same(compiled(m, v), fn(m, v), rtol=1e-15)


def test_small_values_used_elsewhere_are_not_recomputed():
    m, v = np.random.default_rng(0).random((5, 6)), np.random.default_rng(1).random((5, 1))

    def returned(m, v):
        w = v + 1
        return w * m, w

    def shared(m, v):
        w = v + 1
        return w * m + w / m

    for fn in (returned, shared):
        compiled, layouts = _kernel_layouts(fn, m, v)
        assert len(layouts) == 2, fn.__name__
        assert_same(compiled(m, v), fn(m, v))


# ------------------------------------------------------------------- buffer reuse


def test_a_temporary_read_last_by_a_kernel_becomes_its_output_buffer():
    import tracemalloc

    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    x = np.random.default_rng(0).standard_normal((400, 500))
    compiled, _ = _kernel_layouts(softmax, x)
    assert compiled.plan.regions[1].donate == ((0, 0),)
    assert "in0[i] = " in compiled.kernels[1].source
    compiled(x)
    tracemalloc.start()
    try:
        result = compiled(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.2 * x.nbytes  # the result and O(1), where numpy needs two arrays
    assert_same(result, softmax(x), rtol=1e-14)


def test_temporaries_still_needed_are_not_overwritten():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((30, 40))

    def returned(x):
        e = np.exp(x)
        return e / e.sum(axis=-1, keepdims=True), e

    def read_later(x):
        e = np.exp(x)
        first = e / e.sum(axis=-1, keepdims=True)
        return first, np.sin(first) + e * 2

    def viewed(x):
        e = np.exp(x)
        flat = e.reshape(-1)
        return e / e.sum(axis=-1, keepdims=True), flat * 1

    for fn in (returned, viewed):  # e is returned / a numpy call may hold a view of it
        compiled, _ = _kernel_layouts(fn, x)
        assert all(region.donate == () for region in compiled.plan.regions), fn.__name__
        assert_same(compiled(x), fn(x), rtol=1e-14)
    compiled, _ = _kernel_layouts(read_later, x)  # the last kernel reading e may reuse it
    assert_same(compiled(x), read_later(x), rtol=1e-14)


def test_reductions_of_an_argument_share_one_pass_over_it():
    x = np.random.default_rng(2).standard_normal((40, 50))

    def several(x):
        return np.sum(x), np.max(x), x.mean(axis=-1)

    compiled, layouts = _kernel_layouts(several, x)
    assert layouts == ["(n)->(),(),()"]
    result, expected = compiled(x), several(x)
    assert_same(result[1], expected[1])
    assert_same(result[0], expected[0], rtol=1e-13)
    assert_same(result[2], expected[2], rtol=1e-13)

    def lone(x):
        return np.sum(x) * 2  # one reduction of an argument: numpy's own loop

    compiled, _ = _kernel_layouts(lone, x)
    assert [step.op for step in compiled.plan.steps if isinstance(step, Node)] == ["sum"]

    def normalise(x):
        return (x - x.mean()) / x.std()

    compiled, layouts = _kernel_layouts(normalise, x)
    assert len(layouts) == 3 and layouts[0] == "(n)->(),()"  # both means in one pass
    assert_same(compiled(x), normalise(x), rtol=1e-12)


# ------------------------------------------------------------- refused merges, recorded


def refusals_of(plan: Plan, reason: Reason) -> list[Refusal]:
    return [refusal for refusal in plan.refusals if refusal.reason is reason]


def named(plan: Plan, op: str) -> Node:
    (node,) = [node for node in plan.graph.nodes if node.op == op]
    return node


def test_a_merge_refused_for_convexity_names_the_node_on_the_path():
    """d cannot join {a, b}: the path a -> r -> d leaves the region through r and comes
    back.  The refusal is between b and its reader d, via r, and d's region keeps it."""
    x = arg(0)
    a = unary("sin", x)
    b = unary("cos", a)
    r = opaque(a, shape=(1,))
    d = binary("add", b, r)
    plan = partition(Graph((x,), (d,)))
    check_plan(plan)
    assert Refusal(b, d, Reason.NOT_CONVEX, via=r) in plan.refusals
    owner = region_of(plan)
    assert Refusal(b, d, Reason.NOT_CONVEX, via=r) in plan.regions[owner[d]].refusals
    # r is no kernel's: each value crossing to or from it is refused as not elementwise
    crossing = {(refusal.first, refusal.second) for refusal in
                refusals_of(plan, Reason.NOT_ELEMENTWISE) if refusal.via is r}
    assert crossing == {(a, r), (r, d)}


def test_siblings_kept_apart_by_convexity_are_recorded_with_the_value_they_share():
    x = arg(0)
    a = unary("sin", x)
    r = opaque(a)
    b = binary("add", x, r)
    plan = partition(Graph((x,), (b, a)))
    (sibling,) = [refusal for refusal in plan.refusals if refusal.shared is not None]
    assert (sibling.first, sibling.second, sibling.reason) == (a, b, Reason.NOT_CONVEX)
    assert sibling.shared is x and sibling.via is r


def test_a_value_needed_before_and_after_its_reduction_is_refused_as_such():
    def centred(x):
        m = np.where(x > 0, x, 0.0)
        return m - m.mean(), m.mean()

    plan = plan_of(centred, np.ones(5))
    refused = refusals_of(plan, Reason.REDUCTION_IN_LOOP)
    mean, where, subtract = named(plan, "mean"), named(plan, "where"), named(plan, "subtract")
    # subtract reads both where, from the loop, and mean, complete only after it
    assert [(refusal.first, refusal.second, refusal.via) for refusal in refused] == [
        (where, subtract, mean), (mean, subtract, mean)]
    assert [region.refusals for region in plan.regions] == [tuple(refused)] * 2
    assert plan.refusals == tuple(refused)


def test_data_dependent_sizes_are_refused_as_another_size_class():
    def positive_times(x, y):
        a = x[x > 0] + 1.0
        return a * y

    plan = plan_of(positive_times, np.ones(5), np.ones(5))
    (refusal,) = refusals_of(plan, Reason.SIZE_CLASS)
    getitem = named(plan, "getitem")
    assert (refusal.first, refusal.second) == (named(plan, "add"), named(plan, "multiply"))
    assert refusal.via is getitem and getitem.kind == NUMPY
    assert "depends on the data" in refusal.detail


def test_loop_shapes_and_recomputation_are_refused_with_their_details():
    def scalar_kept(x, h):
        s = -h
        return s, x * s  # s is returned: its own kernel of loop shape []

    plan = plan_of(scalar_kept, np.ones(4), 0.5)
    (refusal,) = refusals_of(plan, Reason.LOOP_SHAPE)
    assert (refusal.first.op, refusal.second.op, refusal.detail) == (
        "negative", "multiply", "[] vs [n]")
    (kept,) = refusals_of(plan, Reason.NOT_IN_PRELUDE)  # nor is it the kernel's prelude
    assert (kept.first, kept.second, kept.detail) == (
        refusal.first, refusal.second, "it is returned")

    def costly(x, y):
        return np.sin(x) + np.cos(y)

    plan = plan_of(costly, np.ones(4), np.ones((4, 1)))
    refused = refusals_of(plan, Reason.NOT_RECOMPUTED)
    assert {refusal.first.op for refusal in refused} == {"sin", "cos"}
    assert all("20 operations per element" in refusal.detail for refusal in refused)

    def returned(m, v):
        w = v + 1
        return w * m, w

    (refusal,) = refusals_of(plan_of(returned, np.ones((5, 6)), np.ones((5, 1))),
                             Reason.NOT_RECOMPUTED)
    assert refusal.via is refusal.first and "returned" in refusal.detail


def test_siblings_of_a_scalar_are_refused_as_possibly_of_different_sizes():
    def two_arrays(x, y, h):
        return x * h, y + h

    plan = plan_of(two_arrays, np.ones(4), np.ones(5), 2.0)
    (refusal,) = refusals_of(plan, Reason.SIBLING_SIZE)
    assert (refusal.first.op, refusal.second.op) == ("multiply", "add")
    assert refusal.shared is plan.graph.inputs[2]
    assert len(plan.regions) == 2


def test_numpy_calls_are_refused_with_why_numpy_runs_them():
    def sorted_sum(x):
        scaled = x * 2.0
        return scaled + np.sort(scaled), scaled - np.sum(scaled, axis=(0, 2), keepdims=True)

    plan = plan_of(sorted_sum, np.ones((3, 4, 5, 6)))
    details = {refusal.via.op: refusal.detail
               for refusal in refusals_of(plan, Reason.NOT_ELEMENTWISE)}
    assert details == {"sort": "it is not elementwise",
                       "sum": "the axes it reduces are not next to each other"}
    unfused = partition(plan_of(lambda x: x - x.mean(), np.ones(3)).graph,
                        fuse_reductions=False)
    (refusal,) = unfused.refusals
    assert (refusal.first.op, refusal.second.op, refusal.reason) == (
        "mean", "subtract", Reason.NOT_ELEMENTWISE)
    assert refusal.detail == "reductions are left to numpy (fuse_reductions=False)"


def test_a_split_under_the_operand_cap_records_each_value_crossing_it():
    def total(*values):
        result = values[0]
        for value in values[1:]:
            result = result + value
        return result

    plan = plan_of(total, *[np.ones(3) for _ in range(70)])
    capped = refusals_of(plan, Reason.OPERAND_CAP)
    assert len(plan.regions) == 2 and len(capped) == 1
    (refusal,) = capped
    assert refusal.first in refusal.second.inputs
    assert refusal.detail == f"71 operands, over numpy's limit of {MAX_OPERANDS} per gufunc"

    def many(x):  # nothing crosses between the halves: one refusal between them
        return [x + float(index) for index in range(70)]

    plan = plan_of(many, np.ones(3))
    (refusal,) = refusals_of(plan, Reason.OPERAND_CAP)
    assert refusal.first in plan.regions[0].nodes and refusal.second in plan.regions[1].nodes


def test_refusals_made_moot_by_later_merges_stay_out_of_the_regions():
    """``-h`` and ``x * s`` have different loop shapes (refused), then the scalar region is
    folded into the kernel's prelude: the plan keeps the refusal, the region does not."""
    def scaled(x, h):
        return x * (-h), x + h

    plan = plan_of(scaled, np.ones(4), 0.5)
    (region,) = plan.regions
    assert region.prelude and region.refusals == ()
    assert [refusal.reason for refusal in plan.refusals] == [Reason.LOOP_SHAPE]


def test_check_plan_rejects_a_crossing_value_without_a_refusal():
    x = arg(0)
    a = unary("sin", x)
    r = opaque(a)
    d = binary("add", a, r)
    plan = partition(Graph((x,), (d,)))
    check_plan(plan)
    silent = dataclasses.replace(plan, regions=tuple(
        dataclasses.replace(region, refusals=()) for region in plan.regions))
    with pytest.raises(AssertionError, match="no refusal"):
        check_plan(silent)


def test_a_pickled_region_leaves_its_refusals_behind():
    """Refusals name nodes all over the graph; a pickled region carries only its own."""
    plan = plan_of(lambda x: x - x.mean(), np.ones(3))
    region = next(region for region in plan.regions if region.refusals)
    restored = pickle.loads(pickle.dumps(region))
    assert restored.refusals == ()
    assert [node.op for node in restored.nodes] == [node.op for node in region.nodes]


def test_work_under_other_floating_point_error_handling_is_refused_as_such():
    """A kernel's flags are handled under one np.errstate: the log under the function's
    own block joins neither its producer, its sibling, nor the sum of its result."""
    def fn(x):
        scaled = x * 2.0
        with np.errstate(divide="ignore"):
            logs = np.log(scaled)
            shifted = logs - 1.0
        return logs.sum(), scaled + 1.0, shifted

    plan = plan_of(fn, np.ones(5))
    check_plan(plan)
    log, multiply, add = named(plan, "log"), named(plan, "multiply"), named(plan, "add")
    owner = region_of(plan)
    assert owner[log] != owner[multiply] == owner[add]
    assert owner[named(plan, "subtract")] == owner[log]
    refused = refusals_of(plan, Reason.ERRSTATE)
    assert (multiply, log) in {(refusal.first, refusal.second) for refusal in refused}
    assert all(refusal.detail == "the caller's error handling vs np.errstate(divide='ignore')"
               or refusal.detail == "np.errstate(divide='ignore') vs the caller's error "
               "handling" for refusal in refused)
    sum_node = named(plan, "sum")
    assert sum_node.errstate is None and log.errstate is not None
    assert sum_node not in owner or owner[sum_node] != owner[log]


# ------------------------------------------------------ reductions accumulated in passes


def standardise_columns(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def test_standardising_columns_is_one_region_of_three_passes():
    plan = plan_of(standardise_columns, np.ones((4, 3)))
    (region,) = plan.regions
    assert region.reduced == (0,) and not plan.refusals
    assert all(step is region for step in plan.steps)
    plan_passes = schedule(region)
    ops = {node.op: node for node in region.nodes}
    assert plan_passes.passes == 3
    assert {node.op: done for node, done in plan_passes.accumulating.items()} == {
        "mean": 0, "mean_of": 0, "sum_over_count": 1}
    # the mean and the variance are complete after passes 1 and 2; the std is per column
    assert {node.op: level for node, level in plan_passes.columns.items()} == {
        "mean": 1, "mean_of": 1, "sum_over_count": 2, "sqrt": 2}
    assert plan_passes.computed[ops["square"]] == (1,)
    assert plan_passes.computed[ops["true_divide"]] == (2,)
    assert plan_passes.stored == {ops["true_divide"]: 2}


_M = np.arange(12.0).reshape(4, 3) ** 2
_T = np.arange(60.0).reshape(3, 4, 5) ** 1.5


@pytest.mark.parametrize(("fn", "args"), [
    (lambda train, test: (test - train.mean(axis=0)) / train.std(axis=0),
     (_M, np.ones((2, 3)))),
    (lambda x: x[1:] - x.mean(axis=0), (_M,)),
    (lambda a, b: a.mean(axis=0) - b.mean(axis=0), (np.ones((3, 4)), np.ones((5, 4)))),
    (lambda m: m[::2] - m.mean(axis=0), (_M,)),
    (lambda m: np.concatenate([m, m]) - m.mean(axis=0), (_M,)),
    (lambda t: t[:, 1:] - t.mean(axis=(0, 1)), (_T,)),
    (lambda m: (m[1:] * 2).max(axis=0) + (m * 3).max(axis=0), (_M,)),
    (lambda x, y: (x.mean(0) - y.mean(0)) / np.sqrt(x.var(0, ddof=1) / len(x) +
                                                   y.var(0, ddof=1) / len(y)),
     (_M, np.arange(18.0).reshape(6, 3) * 2)),
], ids=["test-by-train-statistics", "fewer-rows", "two-means", "strided-rows",
        "more-rows", "3d", "two-maxima", "welch-t"])
def test_values_of_other_row_counts_never_share_an_accumulating_kernel(fn, args):
    """Found by a conformance hunt: ``test - train.mean(axis=0)`` joined the kernel
    accumulating ``train``'s rows, whose passes then ran over ``test``'s rows too (a
    broadcast error); rows not known to be equally long keep such work apart."""
    assert_same(numfuse.jit(fn)(*args), numpy_result(fn, *args), rtol=1e-12)


def _sums_and_their_keepdims(a, b):
    kept = b.sum(axis=0, keepdims=True)
    return kept, (a * 2).sum(axis=0) + kept


_SQUARE, _CUBE = np.arange(9.0).reshape(3, 3) + 1, np.arange(27.0).reshape(3, 3, 3)
_STACK, _MATRIX = np.arange(24.0).reshape(2, 4, 3), np.arange(12.0).reshape(4, 3) ** 1.5


@pytest.mark.parametrize(("fn", "args"), [
    (lambda x: x.sum(axis=1) - x.sum(axis=0), (_SQUARE,)),
    (lambda x: np.maximum(x.max(0), x.max(1)), (_SQUARE,)),
    (lambda x: x.std(0) + x.std(1), (_SQUARE,)),
    (lambda cm: 2 * np.diag(cm) / (cm.sum(0) + cm.sum(1)), (_SQUARE,)),
    (lambda x: x.sum((0, 1)) + x.sum((0, 2)), (_CUBE,)),
    (lambda x: x.sum(axis=1) + x.sum(axis=0), (_CUBE,)),
    (lambda x: x * x.sum(axis=1), (np.arange(48.0).reshape(4, 4, 3),)),
    (lambda a, b: a.mean(axis=0) - b.mean(axis=0), (_STACK, _MATRIX)),
    (lambda a, b: a.var(0) + b.std(0), (_STACK, _MATRIX)),
    (lambda a, b: a.max(0) + b.min(0), (_STACK, _MATRIX)),
    (lambda a, b: a.mean(axis=0) - b.mean(axis=0), (_STACK, np.arange(4.0).reshape(4, 1))),
    (lambda a, b: a.sum(axis=(0, 1)) + b.sum(axis=0), (_STACK, _MATRIX)),
    (_sums_and_their_keepdims, (np.arange(60.0).reshape(5, 3, 4), _MATRIX.T)),
], ids=["out-minus-in-degree", "max-of-maxima", "std-plus-std", "f1-score", "3d-pairs",
        "3d-sums", "3d-scaled", "stack-minus-matrix", "var-plus-std", "max-plus-min",
        "column", "two-axes-and-one", "keepdims-output"])
def test_reductions_over_other_axes_broadcast_as_numpy(fn, args):
    """Found by a conformance hunt: a reduction's result computed in one kernel and read
    by another lies along that kernel's last axes, as numpy broadcasts it (not along the
    axes it did not reduce: a squeeze error, and wrong values); an accumulation of a
    value of fewer dimensions than the loop never shares it (its axes are another of the
    loop's: ``b.mean(axis=0)`` of a matrix beside ``a.mean(axis=0)`` of a stack)."""
    assert_same(numfuse.jit(fn)(*args), numpy_result(fn, *args), rtol=1e-12)


def test_reductions_over_other_axes_of_arrays_numpy_cannot_broadcast_raise_its_error():
    for fn, args in ((lambda x: x.sum(axis=1) - x.sum(axis=0), (np.ones((3, 4)),)),
                     (lambda x: x.sum(axis=1) + x.sum(axis=0), (np.ones((3, 4, 5)),))):
        with pytest.raises(ValueError, match="could not be broadcast"):
            numfuse.jit(fn)(*args)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_complex_products_along_an_axis_are_numpys_bits(dtype, axis):
    """numpy's reduce loop rounds each complex product apart: a kernel folding them with
    fused multiply-adds differed in the last bits (found by a conformance hunt)."""
    rng = np.random.default_rng(4)
    z = (rng.standard_normal((12, 10)) + 1j * rng.standard_normal((12, 10))).astype(dtype)
    fn = lambda z: np.prod(z * 2, axis=axis)  # noqa: E731
    assert_same(numfuse.jit(fn)(z), fn(z))


def test_a_refusal_names_rows_of_lengths_not_known_equal():
    plan = plan_of(lambda train, test: test - train.mean(axis=0), _M, np.ones((2, 3)))
    assert any(refusal.reason is Reason.ROW_LENGTHS for refusal in plan.refusals)
    (region,) = plan_of(standardise_columns, _M).regions  # one length: one kernel still
    assert region.reduced == (0,)


def test_cheap_work_needed_by_two_passes_is_computed_in_both():
    def fn(x):
        d = x * 2.0
        return d.sum(axis=0), d - d.mean(axis=0)

    plan = plan_of(fn, np.ones((4, 3)))
    (region,) = plan.regions
    multiply = named(plan, "multiply")
    assert schedule(region).computed[multiply] == (0, 1)
    check(fn, RNG.standard_normal((6, 5)))


def test_costly_work_needed_by_two_passes_is_stored_by_a_kernel_of_its_own_pass():
    def fn(x):
        e = np.exp(x)
        return e - e.mean(axis=0)

    plan = plan_of(fn, np.ones((4, 3)))
    assert len(plan.regions) == 2
    refused = refusals_of(plan, Reason.PASSES)
    assert refused and all(refusal.via is named(plan, "exp") for refusal in refused)
    assert "more operations per element" in refused[0].detail
    check(fn, RNG.standard_normal((6, 5)), rtol=1e-14)  # exp: within an ulp


def _centred_times(times):
    def fn(x):
        for _ in range(times):
            x = x - x.mean(axis=0)
        return x

    return fn


def test_a_kernel_makes_at_most_max_passes_passes():
    four = plan_of(_centred_times(3), np.ones((4, 3)))
    assert [schedule(region).passes for region in four.regions] == [MAX_PASSES]
    five = plan_of(_centred_times(4), np.ones((4, 3)))
    assert len(five.regions) == 2
    (refusal,) = {refusal.detail for refusal in refusals_of(five, Reason.PASSES)}
    assert refusal == f"{MAX_PASSES + 1} passes over the rows, more than the {MAX_PASSES} one " \
                      "kernel makes"
    check(_centred_times(4), RNG.standard_normal((6, 5)))


@pytest.mark.parametrize(("fn", "shape"), [
    pytest.param(lambda x: ((x * 2).sum(axis=0), (x * 2).sum(axis=1)), (3, 4, 5),
                 id="accumulated-over-other-axes"),
    pytest.param(lambda x: ((x * 2).sum(axis=0), (x * 2).sum(axis=1)), (4, 5),
                 id="folded-along-rows-and-accumulated-across"),
])
def test_reductions_over_other_axes_do_not_share_a_kernel(fn, shape):
    plan = plan_of(fn, np.ones(shape))
    refused = refusals_of(plan, Reason.REDUCED_AXES)
    assert refused and all(refusal.first.op == "multiply" for refusal in refused)
    owner = region_of(plan)
    first, second = plan.graph.outputs
    assert owner.get(first) != owner.get(second)
    check(fn, RNG.standard_normal(shape))


def test_a_result_not_lined_up_with_its_loop_is_read_outside_it():
    """``sum(axis=1)`` of a 3-d array drops a middle axis: numpy broadcasts the result
    against other axes, so its readers cannot join the loop that accumulates it."""
    def fn(x):
        return (x * 2).sum(axis=1) + 1.0

    plan = plan_of(fn, np.ones((3, 4, 5)))
    assert [region.reduced for region in plan.regions] == [(1,), ()]
    check(fn, RNG.standard_normal((3, 4, 5)))


REDUCERS_OVER_ROWS = [
    lambda v: v.mean(axis=0), lambda v: v.sum(axis=0, keepdims=True),
    lambda v: v.max(axis=0), lambda v: np.sqrt(v.var(axis=0)) + 1.0,
]
ROW_UNARY = [np.abs, np.negative, lambda v: v * 0.5, lambda v: v - 1.0]
ROW_BINARY = [np.add, np.subtract, np.multiply, np.maximum]


def _random_program(seed: int):
    """A seeded program over a matrix mixing elementwise work with reductions over its
    rows and work on their results."""
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(rng.integers(3, 9)):
        kind = rng.integers(3)
        choices = (ROW_UNARY, ROW_BINARY, REDUCERS_OVER_ROWS)[kind]
        steps.append((kind, int(rng.integers(len(choices))), int(rng.integers(1 << 30)),
                      int(rng.integers(1 << 30))))

    def fn(x):
        values, matrices = [x], [True]  # whether each value has the rows of x
        for kind, op, first, second in steps:
            index, other = first % len(values), second % len(values)
            left, right = values[index], values[other]
            if kind == 0:
                values.append(ROW_UNARY[op](left))
                matrices.append(matrices[index])
            elif kind == 1:
                values.append(ROW_BINARY[op](left, right))
                matrices.append(matrices[index] or matrices[other])
            elif matrices[index]:
                values.append(REDUCERS_OVER_ROWS[op](left))
                matrices.append(False)
        return tuple(values[1:]) or x * 1.0

    return fn


@pytest.mark.parametrize("seed", range(12))
def test_random_programs_with_reductions_over_rows_are_numpys(seed):
    fn = _random_program(seed)
    x = RNG.standard_normal((7, 6))
    plan_of(fn, x)
    check(fn, x)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12, 200))
def test_many_random_programs_with_reductions_over_rows_are_numpys(seed):
    fn = _random_program(seed)
    x = RNG.standard_normal((7, 6))
    plan_of(fn, x)
    check(fn, x)


# ------------------------------------------------------- numbers changing at each step


def _decayed(a, x):
    for t in range(1, 41):
        x = x - (0.1 / t) * (a @ x)
    return x


def _rows_scaled(x):
    for step in range(1, 31):
        x = np.sort(x) * (step % 3) + step  # (a numpy call between: a kernel per step)
    return x


@pytest.mark.parametrize(("fn", "args"), [
    (_decayed, (np.eye(3) * 0.5, np.ones(3))),
    (_decayed, (np.eye(3, dtype=np.float32) * 0.5, np.ones(3, np.float32))),
    (_rows_scaled, (np.arange(5.0),)),
    (_rows_scaled, (np.arange(5, dtype=np.int8),)),
], ids=["float64", "float32", "ints", "int8"])
def test_kernels_differing_only_in_their_numbers_compile_once(fn, args):
    """Found by a conformance hunt: a loop whose number changes at each step (a
    learning-rate schedule) compiled one kernel per step (200 steps: 6 s); those kernels
    take their numbers as operands and share one compilation, converting them to the
    loop's dtype as numpy does."""
    compiled = numfuse.compile(fn, *args)
    names = {kernel.name for kernel in compiled.kernels}
    assert len(compiled.kernels) >= 30 and len(names) <= 2
    assert_same(compiled(*args), fn(*args))
    single = numfuse.compile(lambda x: x * 0.1 + 2.0, args[-1])
    assert "0.1" in single.kernels[0].source  # alone: its numbers in its source


def _compared_twice(x):
    return x < 2**31, np.sort(x) < 2**63


def _hashed(x):
    z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
    z = np.sort(z)
    return (z ^ (z >> 27)) * 0x94D049BB133111EB


def _clamped_twice(x):
    return np.maximum(x, 3.0), np.maximum(np.sort(x), 1e300)


@pytest.mark.parametrize(("fn", "args"), [
    (_compared_twice, (np.array([1.0, 3e9, 1e19]),)),
    (_hashed, (np.arange(5, dtype=np.uint64),)),
    (_clamped_twice, (np.ones(2, np.float32),)),
], ids=["beyond-int64", "uint64-constants", "overflowing-cast"])
def test_numbers_a_shared_kernel_cannot_take_as_int64_operands_stay_in_its_source(fn, args):
    """Found by a conformance hunt: Python ints of 2**63 and more (uint64 hashing
    constants) were passed as int64 operands (OverflowError, or no loop for the types),
    and a float overflowing its float32 loop warned under the kernel's name, not "cast"."""
    assert_like_numpy(fn, *args)


def _items_summed(x):
    total = 0.0
    for i in range(300):
        total += x[i] * 2.0
    return total


def test_a_long_chain_of_steps_is_merged_without_walking_its_whole_cluster(monkeypatch):
    """``s += x[i]`` over thousands of items (numba-style code) took a minute to partition
    at 1e4 items: each step tested the chain's whole cluster for convexity and joined its
    producers.  A node joining one cluster is tested against its own producers only."""
    from numfuse import partition as module

    walks = []
    whole = module._Clusters.external_producers

    def counted(self, clusters):
        walks.append(len(clusters))
        return whole(self, clusters)

    monkeypatch.setattr(module._Clusters, "external_producers", counted)
    x = RNG.standard_normal(300)
    compiled = numfuse.compile(_items_summed, x, cache=False)
    assert len(walks) < 30  # (300 steps, each merged into the chain)
    assert sum(len(region.nodes) for region in compiled.plan.regions) >= 300
    assert_same(compiled(x), _items_summed(x), rtol=1e-12)
