"""Nested containers: flatten and unflatten round trips, leaf order, the ``leaf``
predicate, the helpers built on them, and the places of numfuse that walk containers."""

from __future__ import annotations

import collections
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import numfuse
from numfuse import pytree
from numfuse.pytree import LEAF

Point = collections.namedtuple("Point", "x y")


class Row(list):
    pass


TREES = [
    1,
    (1, 2),
    [1, [2, 3], (4,)],
    {"b": 1, "a": (2, [3])},
    Point(1, (2, 3)),
    {"p": Point([1], {"q": 2})},
    Row([1, (2, 3)]),
    (),
    [],
    {},
    ((),),
    None,
]


@pytest.mark.parametrize("tree", TREES, ids=[repr(tree) for tree in TREES])
def test_flatten_unflatten_round_trip(tree):
    leaves, treedef = pytree.flatten(tree)
    rebuilt = pytree.unflatten(treedef, leaves)
    assert rebuilt == tree
    assert type(rebuilt) is type(tree)
    built = pytree.builder(treedef)(leaves)  # one expression, made once per treedef
    assert built == tree and type(built) is type(tree)
    if isinstance(tree, (list, dict)):
        assert built is not tree  # new containers at each call
    assert pytree.size(treedef) == len(leaves)
    if isinstance(tree, dict):
        assert list(rebuilt) == list(tree)


trees = st.recursive(
    st.integers() | st.none() | st.text(max_size=3),
    lambda children: (st.lists(children, max_size=4)
                      | st.lists(children, max_size=4).map(tuple)
                      | st.dictionaries(st.text(max_size=2), children, max_size=4)),
    max_leaves=20)


@given(trees)
def test_round_trip_of_any_tree(tree):
    leaves, treedef = pytree.flatten(tree)
    assert pytree.unflatten(treedef, leaves) == tree
    assert pytree.builder(treedef)(leaves) == tree
    assert pytree.size(treedef) == len(leaves)
    assert pytree.map_leaves(lambda leaf: leaf, tree) == tree
    hash(treedef)  # treedefs key caches


def test_leaves_in_order():
    assert pytree.leaves({"b": (1, 2), "a": [3, Point(4, 5)]}) == [1, 2, 3, 4, 5]


def test_the_leaf_predicate_stops_the_descent():
    tree = ({"w": [1, 2], "b": {"c": (3,)}}, [4])
    leaves, treedef = pytree.flatten(tree[0], pytree.is_not_dict)
    assert leaves == [[1, 2], (3,)]
    assert pytree.unflatten(treedef, ["W", "C"]) == {"w": "W", "b": {"c": "C"}}
    assert pytree.leaves([4], pytree.is_not_dict) == [[4]]


def test_map_leaves_and_any_leaf():
    tree = {"a": [1, (2, 3)], "b": Point(4, 5)}
    assert pytree.map_leaves(lambda leaf: leaf * 10, tree) == {
        "a": [10, (20, 30)], "b": Point(40, 50)}
    assert pytree.any_leaf(lambda leaf: leaf == 5, tree)
    assert not pytree.any_leaf(lambda leaf: leaf == 6, tree)
    # a leaf predicate stops the walk: the list [1, (2, 3)] is one leaf
    assert pytree.any_leaf(lambda leaf: leaf == [1, (2, 3)], tree, pytree.is_not_dict)
    assert not pytree.any_leaf(lambda leaf: leaf == 2, tree, pytree.is_not_dict)
    assert pytree.any_leaf(lambda leaf: leaf == 2, tree)
    assert not pytree.any_leaf(lambda leaf: True, ([], {}, ()))


def test_is_flat_tuple():
    assert pytree.is_flat_tuple(pytree.flatten((1, 2))[1], 2)
    assert not pytree.is_flat_tuple(pytree.flatten((1, 2))[1], 3)
    assert not pytree.is_flat_tuple(pytree.flatten([1, 2])[1], 2)
    assert not pytree.is_flat_tuple(pytree.flatten((1, (2,)))[1], 2)
    assert not pytree.is_flat_tuple(LEAF, 1)


def test_treedefs_pickle_with_their_leaf_marker():
    _, treedef = pytree.flatten({"a": (1, [2])})
    again = pickle.loads(pickle.dumps(treedef))
    assert again == treedef
    assert pickle.loads(pickle.dumps(LEAF)) is LEAF
    assert pytree.unflatten(again, [5, 6]) == {"a": (5, [6])}


# ------------------------------------------------------------------ numfuse's uses


def test_results_keep_their_structure():
    @numfuse.jit
    def fn(x):
        return {"sum": x + 1.0, "pair": Point(x * 2.0, [x - 1.0])}

    x = np.linspace(0.0, 1.0, 7)
    result = fn(x)
    assert list(result) == ["sum", "pair"] and type(result["pair"]) is Point
    np.testing.assert_array_equal(result["pair"].y[0], x - 1.0)


def test_dict_arguments_holding_lists_keep_the_lists_as_arrays():
    @numfuse.jit
    def fn(params, x):
        return params["w"] * x + params["b"]["c"]

    x = np.arange(3.0)
    expected = np.asarray([1.0, 2.0, 3.0]) * x + 0.5
    np.testing.assert_array_equal(fn({"w": [1.0, 2.0, 3.0], "b": {"c": 0.5}}, x), expected)


def test_numpy_calls_fill_traced_values_inside_dicts_and_lists():
    @numfuse.jit
    def fn(x, y):
        return np.concatenate([x, y * 2.0]) + 1.0, np.einsum("i,i->", x, y)

    x, y = np.arange(3.0), np.arange(3.0, 6.0)
    first, second = fn(x, y)
    np.testing.assert_array_equal(first, np.concatenate([x, y * 2.0]) + 1.0)
    assert second == np.einsum("i,i->", x, y)


def test_a_numpy_call_puts_its_traced_values_back_among_its_constants():
    """``invoke`` is one expression of the traced values: containers, keywords, dict keys
    that are not identifiers and constants of any kind keep their places."""
    from numfuse.calls import TRACED, NumpyCall

    def record(*args, **kwargs):
        return args, kwargs

    key = ("not", "an identifier")
    call = NumpyCall(record, "record", (TRACED, [1.5, TRACED], Point(TRACED, {key: "k"})),
                     {"axis": -1, "weights": (TRACED,), "out": None})
    a, b, c, d = (np.arange(k) for k in range(4))
    args, kwargs = call.invoke([a, b, c, d])
    assert args[0] is a and args[1][0] == 1.5 and args[1][1] is b
    assert type(args[2]) is Point and args[2].x is c and args[2].y == {key: "k"}
    assert kwargs == {"axis": -1, "weights": (d,), "out": None} and kwargs["weights"][0] is d
    assert call.count() == 4
    assert call.invoke([a, b, c, d])[0][1] is not args[1]  # new containers at each call
    with pytest.raises(IndexError):
        call.invoke([a, b])
    nested = TRACED
    for _ in range(300):  # beyond the parser's nesting: built by walking, as long lists
        nested = [nested]
    for args in ((nested,), ([TRACED] * 300, 2)):
        many = NumpyCall(record, "record", args, {"k": 1})
        leaves, treedef = pytree.flatten(args)
        numbers = iter(range(many.count()))
        expected = pytree.unflatten(treedef, [next(numbers) if leaf is TRACED else leaf
                                              for leaf in leaves])
        assert many.invoke(list(range(many.count()))) == (expected, {"k": 1})


def test_flattening_keeps_no_reference_to_the_leaves():
    import gc
    import weakref

    class Value:
        pass

    value = Value()
    alive = weakref.ref(value)
    gc.disable()
    try:
        pytree.flatten({"a": [value]})
        pytree.map_leaves(lambda leaf: leaf, ([value],))
        assert pytree.any_leaf(lambda leaf: isinstance(leaf, Value), (value,))
        del value
        assert alive() is None   # freed by reference counting, no collection needed
    finally:
        gc.enable()
