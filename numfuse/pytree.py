"""Nested containers of values ("pytrees"): the one walker over them.

A tree is a tuple, list, dict or namedtuple of trees, or a leaf (anything else).  A tree's
shape is a *treedef*: ``LEAF``, or ``(container type, items)`` where the items are the
children's treedefs, or ``(key, treedef)`` pairs for a dict.  Treedefs are plain hashable
tuples (when the dict keys are), so they can key caches, and they pickle.

Every function takes ``leaf``, a predicate that stops the descent: ``leaf=is_not_dict``
flattens only dicts (their values are then leaves even when they are lists).
"""

from __future__ import annotations

import functools
import itertools
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
    if size(treedef) <= EXPRESSION_LEAVES:
        names: dict[str, Any] = {}
        source = expression(treedef, (f"leaves[{position}]"
                                      for position in itertools.count()), names)
        made = compiled("leaves", source, names)
        if made is not None:
            return made
    return lambda leaves: _build(treedef, iter(leaves))


def expression(treedef: Any, leaf_texts: Iterator[str], names: dict[str, Any]) -> str:
    """Python source of an expression making a tree of shape ``treedef``: each leaf is
    the next text of ``leaf_texts``, and the containers (and dict keys) it needs are added
    to ``names`` (the namespace the source is evaluated in)."""
    if treedef is LEAF:
        return next(leaf_texts)
    container, items = treedef
    if container is dict:
        keys = []
        for key, item in items:
            name = f"_k{len(names)}"
            names[name] = key
            keys.append(f"{name}: {expression(item, leaf_texts, names)}")
        return "{" + ", ".join(keys) + "}"
    parts = [expression(item, leaf_texts, names) for item in items]
    if container is list:
        return "[" + ", ".join(parts) + "]"
    if container is tuple:
        return "(" + "".join(part + ", " for part in parts) + ")"
    name = f"_c{len(names)}"
    names[name] = container
    if namedtuple_class(container):
        return f"{name}(" + ", ".join(parts) + ")"  # namedtuple
    return f"{name}([" + ", ".join(parts) + "])"  # other tuple and list subclasses


# Trees of more leaves are built by walking their treedef: compiling an expression costs
# about 10 µs a leaf, and pays for itself over many calls of small trees only.
EXPRESSION_LEAVES = 256


def compiled(parameter: str, source: str,
             names: dict[str, Any]) -> Callable[[Any], Any] | None:
    """``lambda parameter: source`` with ``names`` bound (a container made by one
    expression costs a fraction of building it by walking the treedef at each call), or
    None when the expression nests deeper than Python's parser allows.  The source is
    compiled once: programs repeat the same few shapes of calls many times."""
    factory = _factory(parameter, source, tuple(names))
    return None if factory is None else factory(*names.values())


@functools.lru_cache(maxsize=4096)
def _factory(parameter: str, source: str,
             names: tuple[str, ...]) -> Callable[..., Callable[[Any], Any]] | None:
    try:
        made: Callable[..., Callable[[Any], Any]] = eval(
            f"lambda {', '.join(names)}: lambda {parameter}: {source}", {})
    except (SyntaxError, RecursionError, MemoryError):
        return None
    return made


def _container(container: type, built: list[Any]) -> Any:
    if container is list:
        return built
    if container is tuple:
        return tuple(built)
    if namedtuple_class(container):
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


_UNSET = object()  # the value of a slot never assigned


def namedtuple_class(container: type) -> bool:
    """Whether ``container`` is a namedtuple class (made again from its items one by
    one, read by field names)."""
    return issubclass(container, tuple) and hasattr(container, "_fields")


def fields(value: Any) -> dict[str, Any]:
    """The fields of an object (none for a class): its ``__dict__``'s, and the values of
    its classes' ``__slots__`` (a ``dataclass(slots=True)`` has no ``__dict__``), private
    names mangled as Python stores them."""
    if isinstance(value, type):
        return {}
    state = getattr(value, "__dict__", None)
    found = dict(state) if isinstance(state, dict) else {}
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and type(name) is str:
                if name.startswith("__") and not name.endswith("__"):
                    name = f"_{cls.__name__.lstrip('_')}{name}"
                found.setdefault(name, getattr(value, name, _UNSET))
    return found
