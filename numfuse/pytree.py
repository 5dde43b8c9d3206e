"""Nested containers of values ("pytrees"): the one walker over them.

A tree is a tuple, list, dict or namedtuple of trees, or a leaf (anything else).  A tree's
shape is a *treedef*: ``LEAF``, or ``(container type, items)`` where the items are the
children's treedefs, or ``(key, treedef)`` pairs for a dict.  Treedefs are plain hashable
tuples (when the dict keys are), so they can key caches, and they pickle.

Every function takes ``leaf``, a predicate that stops the descent: ``leaf=is_not_dict``
flattens only dicts (their values are then leaves even when they are lists).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any


class _Leaf:
    """The treedef of a leaf (one object, also after pickling)."""

    def __repr__(self) -> str:
        return "LEAF"

    def __reduce__(self) -> str:
        return "LEAF"


LEAF: Any = _Leaf()

Predicate = Callable[[Any], bool]


def is_container(value: Any) -> bool:
    """Whether ``value`` is a tuple, list or dict (namedtuples included)."""
    return isinstance(value, (tuple, list, dict))


def is_not_dict(value: Any) -> bool:
    """A ``leaf`` predicate that flattens dicts only."""
    return not isinstance(value, dict)


def flatten(tree: Any, leaf: Predicate | None = None) -> tuple[list[Any], Any]:
    """The leaves of ``tree`` in order (dicts in their key order) and its treedef."""
    leaves: list[Any] = []
    return leaves, _walk(tree, leaf, leaves)


def _walk(value: Any, leaf: Predicate | None, leaves: list[Any]) -> Any:
    # A module-level function, not a closure: a recursive closure is a reference cycle
    # that would keep the leaves (traced values among them) alive until a collection.
    if not is_container(value) or (leaf is not None and leaf(value)):
        leaves.append(value)
        return LEAF
    if isinstance(value, dict):
        return (dict, tuple((key, _walk(item, leaf, leaves)) for key, item in value.items()))
    return (type(value), tuple(_walk(item, leaf, leaves) for item in value))


def unflatten(treedef: Any, leaves: Sequence[Any] | Iterator[Any]) -> Any:
    """The tree of shape ``treedef`` holding ``leaves`` in order."""
    return _build(treedef, iter(leaves))


def builder(treedef: Any) -> Callable[[Sequence[Any]], Any]:
    """``unflatten(treedef, ·)`` decided once: a function of the leaves (a sequence) that
    only indexes them and makes the containers (for results built at every call)."""
    return _maker(treedef, itertools.count())


def _maker(spec: Any, positions: Iterator[int]) -> Callable[[Sequence[Any]], Any]:
    if spec is LEAF:
        return operator.itemgetter(next(positions))
    container, items = spec
    if container is dict:
        keys = tuple(key for key, _item in items)
        values = tuple(_maker(item, positions) for _key, item in items)
        return lambda leaves: {key: part(leaves) for key, part in zip(keys, values, strict=True)}
    if container is tuple and len(items) > 1 and all(item is LEAF for item in items):
        return operator.itemgetter(*(next(positions) for _item in items))  # makes the tuple
    parts = tuple(_maker(item, positions) for item in items)
    if container is tuple:
        return lambda leaves: tuple([part(leaves) for part in parts])
    return lambda leaves: _container(container, [part(leaves) for part in parts])


def _container(container: type, built: list[Any]) -> Any:
    if container is list:
        return built
    if container is tuple:
        return tuple(built)
    if issubclass(container, tuple) and hasattr(container, "_fields"):
        return container(*built)  # namedtuple
    return container(built)  # other tuple and list subclasses


def _build(spec: Any, supply: Iterator[Any]) -> Any:
    if spec is LEAF:
        return next(supply)
    container, items = spec
    if container is dict:
        return {key: _build(item, supply) for key, item in items}
    return _container(container, [_build(item, supply) for item in items])


def leaves(tree: Any, leaf: Predicate | None = None) -> list[Any]:
    """The leaves of ``tree`` in order."""
    return flatten(tree, leaf)[0]


def any_leaf(test: Predicate, tree: Any, leaf: Predicate | None = None) -> bool:
    """Whether ``test`` holds for a leaf of ``tree`` (leaves looked at in no set order,
    up to the first that passes; no treedef made: tracing asks this at every call)."""
    stack = [tree]
    while stack:
        value = stack.pop()
        if not is_container(value) or (leaf is not None and leaf(value)):
            if test(value):
                return True
        else:
            stack.extend(value.values() if isinstance(value, dict) else value)
    return False


def map_leaves(function: Callable[[Any], Any], tree: Any,
               leaf: Predicate | None = None) -> Any:
    """``tree`` with every leaf replaced by ``function(leaf)``, in order."""
    values, treedef = flatten(tree, leaf)
    return unflatten(treedef, [function(value) for value in values])


def size(treedef: Any) -> int:
    """The number of leaves of a tree of shape ``treedef``."""
    if treedef is LEAF:
        return 1
    container, items = treedef
    if container is dict:
        return sum(size(item) for _, item in items)
    return sum(size(item) for item in items)


def is_flat_tuple(treedef: Any, count: int) -> bool:
    """Whether ``treedef`` is a plain tuple of ``count`` leaves."""
    return (treedef is not LEAF and treedef[0] is tuple and len(treedef[1]) == count
            and all(item is LEAF for item in treedef[1]))
