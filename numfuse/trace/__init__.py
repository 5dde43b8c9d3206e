"""Tracing: run the user's function once on ``Tracer`` values and record a ``Graph``.

Tracers intercept Python operators, numpy ufuncs (``__array_ufunc__``) and the numpy
functions numfuse supports (``__array_function__``).  Python code runs once: loops unroll
and helper functions inline.  Whatever does not involve a tracer is computed by numpy at
trace time, so constant subexpressions are exact numpy values.

Constants: arrays, numpy scalars, lists and Python numbers the function uses become
constants of the graph, *snapshotted when the function is traced*.  A closed-over array
that is mutated afterwards keeps its traced value in the compiled function; pass it as an
argument to see changes.

A module per job: ``nodes`` builds graph nodes and resolves their dtypes, ``tracer`` is
the ``Tracer`` class, ``ufuncs`` dispatches numpy ufuncs (``out=``, ``where=``, in-place
operators), ``functions`` handles the numpy functions tracing computes itself,
``probes`` records every other numpy call after learning its result from runs on
stand-ins (what each numpy function is: ``numfuse.registry``), ``constants``
evaluates work on constants with numpy, ``patches`` replaces numpy's conversion and
creation functions while a function is traced, and ``errstate`` records the
floating-point error handling (``np.errstate``, warnings filters) the function sets for
its own operations.  Those modules call one another while
tracing; each imports the others' names at its end.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import random
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .. import pytree
from ..dtypes import ArgSpec
from ..errors import (
    NumpyFallbackWarning,
    TracingError,
    UnsupportedOperationError,
    in_numfuse,
    raised_while_tracing,
)
from ..graph import Graph, Node, Warned
from ..hooks import HookWarning
from . import errstate
from .constants import _leaf_const
from .functions import supported_functions
from .nodes import input_node
from .patches import _converting_tracers, _own_globals, _user_globals
from .probes import _examples
from .tracer import Tracer

__all__ = ["Tracer", "supported_functions", "trace_graph", "traced_now"]

# The function ``trace_graph`` is running on tracers in this context, if any.
_traced_now: contextvars.ContextVar[Callable[..., Any] | None] = contextvars.ContextVar(
    "numfuse_traced_function", default=None)


def _check_rebuildable(value: Any) -> None:
    """Raise unless every container in the result ``value`` is rebuilt from its items as
    it was: a namedtuple subclass whose ``__new__`` takes more (scipy's ``TtestResult``),
    or one carrying attributes of its own, would be lost or fail at each call."""
    if isinstance(value, dict):
        for item in value.values():
            _check_rebuildable(item)
        return
    if not isinstance(value, (tuple, list)):
        return
    for item in value:
        _check_rebuildable(item)
    if type(value) in (tuple, list):
        return
    try:
        rebuilt = pytree.unflatten((type(value), (pytree.LEAF,) * len(value)), list(value))
        faithful = type(rebuilt) is type(value) and \
            getattr(rebuilt, "__dict__", {}) == getattr(value, "__dict__", {})
    except Exception:  # its constructor wants more than the items
        faithful = False
    if not faithful:
        raise UnsupportedOperationError(
            f"returning a {type(value).__name__}, which is not made again from its items "
            "alone (its constructor takes other arguments, or it holds attributes)",
            "return its items in a tuple or namedtuple and build it outside the jitted "
            "function.")

def _holds_tracer(value: Any, depth: int = 4) -> bool:
    """Whether a returned value that is no container numfuse rebuilds holds a traced value
    (an object's attributes, a dataclass's fields, a generator's or a closure's variables,
    the items of a set, a partial's or an exception's arguments), ``depth`` levels down;
    an iterator counts as one (it is used up: the function must make it at each call)."""
    if isinstance(value, Tracer):
        return True
    if depth == 0 or isinstance(value, (str, bytes, int, float, complex, type, np.ndarray,
                                        np.generic, types.ModuleType)) or value is None:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        items: Any = value
    elif isinstance(value, dict):
        items = value.values()
    elif isinstance(value, types.GeneratorType):
        items = value.gi_frame.f_locals.values() if value.gi_frame is not None else ()
    elif isinstance(value, types.FunctionType):
        items = [cell.cell_contents for cell in value.__closure__ or ()
                 if cell.cell_contents is not value]
    elif isinstance(value, functools.partial):
        items = [value.func, *value.args, *value.keywords.values()]
    elif isinstance(value, BaseException):
        items = [*value.args, *getattr(value, "__dict__", {}).values()]
    elif hasattr(type(value), "__next__"):
        # an iterator (iter(list), zip, map, enumerate) is used up by its reader: one made
        # while tracing, given back at every call, would be empty from the second
        return True
    else:
        items = list(getattr(value, "__dict__", {}).values()) + [
            getattr(value, name, None) for name in getattr(type(value), "__slots__", ())
            if isinstance(name, str)]
    return any(_holds_tracer(item, depth - 1) for item in items)


def _copied(value: Any) -> Any:
    """A copy of a list, dict or set argument, nested lists, dicts and sets copied too."""
    if type(value) is list:
        return [_copied(item) for item in value]
    if type(value) is dict:
        return {key: _copied(item) for key, item in value.items()}
    if type(value) is set:
        return set(value)
    return value


def _changed(traced: Any, original: Any) -> bool:
    """Whether tracing changed the copy ``traced`` of the argument ``original``: another
    length, keys or item (the same object, or an equal number or string)."""
    if type(traced) is not type(original):
        return True
    if type(original) is list:
        return len(traced) != len(original) or any(
            _changed(one, other) for one, other in zip(traced, original, strict=True))
    if type(original) is dict:
        return list(traced) != list(original) or any(
            _changed(traced[key], original[key]) for key in original)
    if type(original) is set:
        return traced != original
    if traced is original:
        return False
    try:
        return not (isinstance(original, (str, bytes, int, float, complex, type(None)))
                    and bool(traced == original))
    except Exception:
        return True


def traced_now() -> Callable[..., Any] | None:
    """The function being traced in this context (innermost), or None."""
    return _traced_now.get()


# ------------------------------------------------------------------------------ trace


def _generators(fn: Callable[..., Any], values: Iterable[Any]) -> list[tuple[Any, Any]]:
    """The random generators a traced function may draw from without a numpy function
    numfuse replaces (``patches``): numpy's global one (``from numpy.random import rand``,
    scipy's distributions), Python's, and the generators among the globals and closure
    cells of the function (and of the functions it wraps) and its static arguments (and
    their fields: ``self.rng``); each with its state now."""
    found: dict[int, Any] = {id(np.random.mtrand._rand): np.random.mtrand._rand,
                             id(random._inst): random._inst}  # type: ignore[attr-defined]
    candidates = list(values)
    layers: list[Any] = []
    layer: Any = fn
    while layer is not None and len(layers) < 16:  # fn, and the functions it wraps
        layers.append(layer)
        layer = getattr(layer, "__wrapped__", None)
    for layer in layers:
        code = getattr(layer, "__code__", None)
        namespace = getattr(layer, "__globals__", {})
        if code is not None:
            candidates += [namespace[name] for name in code.co_names if name in namespace]
        candidates += [cell.cell_contents for cell in getattr(layer, "__closure__", None)
                       or () if _filled(cell)]
    for candidate in candidates:
        fields = {} if isinstance(candidate, types.ModuleType) else pytree.fields(candidate)
        for value in (candidate, *fields.values()):
            if isinstance(value, (np.random.Generator, np.random.RandomState,
                                  np.random.BitGenerator, random.Random)):
                found.setdefault(id(value), value)
    return [(generator, _state(generator)) for generator in found.values()]


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # a cell with no value yet
        return False
    return True


def _state(generator: Any) -> Any:
    if isinstance(generator, random.Random):
        return generator.getstate()
    if isinstance(generator, np.random.RandomState):
        return generator.get_state(legacy=False)
    bits = generator if isinstance(generator, np.random.BitGenerator) else \
        generator.bit_generator
    return bits.state


def _restore(generator: Any, state: Any) -> None:
    if isinstance(generator, random.Random):
        generator.setstate(state)
    elif isinstance(generator, np.random.RandomState):
        generator.set_state(state)
    else:
        bits = generator if isinstance(generator, np.random.BitGenerator) else \
            generator.bit_generator
        bits.state = state


def _check_no_draws(generators: list[tuple[Any, Any]]) -> None:
    """Raise when tracing drew numbers from one of ``generators`` (their states before):
    a compiled function would return those numbers at every call.  Their states are
    restored first, so that numpy, running the function instead, draws what it would
    have drawn — unless another thread of the program may have drawn meanwhile (its
    numbers would come again)."""
    drawn = [generator for generator, state in generators
             if not _same_state(_state(generator), state)]
    if not drawn:
        return
    if not others_may_draw():
        for generator, state in generators:
            _restore(generator, state)
    kind = type(drawn[0])
    raise UnsupportedOperationError(
        f"drawing random numbers from a {kind.__module__}.{kind.__qualname__} inside a "
        "traced function",
        "numfuse traces the function once, so the numbers drawn then would come back at "
        "every call: numpy runs this function as written; to fuse it, draw the numbers "
        "outside and pass them as an argument.")


def others_may_draw() -> bool:
    """Whether another thread of the program may draw random numbers now: one that is no
    daemon nor numfuse's own (its compile thread draws none)."""
    current = threading.current_thread()
    return any(thread is not current and not thread.daemon and
               not thread.name.startswith("numfuse-") for thread in threading.enumerate())


def _same_state(now: Any, before: Any) -> bool:
    """Whether two generator states (dicts of numbers and arrays, or tuples) are equal."""
    if isinstance(now, dict) and isinstance(before, dict):
        return now.keys() == before.keys() and all(
            _same_state(now[key], before[key]) for key in now)
    if isinstance(now, np.ndarray) or isinstance(before, np.ndarray):
        return bool(np.array_equal(now, before))
    if isinstance(now, tuple) and isinstance(before, tuple):
        return len(now) == len(before) and all(
            _same_state(a, b) for a, b in zip(now, before, strict=True))
    return bool(now == before)


def trace_graph(fn: Callable[..., Any], specs: Sequence[ArgSpec],
                static: dict[int, Any] | None = None,
                shapes: Sequence[tuple[int, ...]] | None = None) -> Graph:
    """Run ``fn`` once on tracers for ``specs`` and return the recorded graph.

    Arguments listed in ``static`` are passed through as concrete Python values.
    ``shapes`` are the example arguments' shapes, used to work out the result shapes of
    non-fusible numpy calls (the graph itself never depends on them).
    """
    static = dict(static or {})
    # a list, dict or set argument is traced as a copy: one the function changes (a log it
    # appends to) must not keep what tracing put there (a traced value), and numpy runs it
    originals = {index: value for index, value in static.items()
                 if type(value) in (list, dict, set)}
    for index, value in originals.items():
        static[index] = _copied(value)
    inputs = tuple(input_node(index, spec) for index, spec in enumerate(specs))
    arguments = [static[index] if index in static else
                 Tracer(node, python_items=specs[index].kind == "items",
                        sequence=specs[index].kind in ("items", "sequence"),
                        item_types=specs[index].types)
                 for index, node in enumerate(inputs)]
    examples: dict[Node, tuple[int, ...]] = {}
    if shapes is not None:
        examples.update((node, tuple(shape)) for node, shape in zip(inputs, shapes, strict=True)
                        if len(shape) == node.ndim)
    generators = _generators(fn, static.values())
    token = _examples.set(examples)
    user = _user_globals.set(_own_globals(fn))
    current = _traced_now.set(fn)
    raised: list[TracingError] = []
    noting = raised_while_tracing.set(raised)
    try:
        # the warnings it gives are recorded (the filters decide at each call, see Warned)
        with warnings.catch_warnings(record=True) as given:
            warnings.simplefilter("always")
            with np.errstate(all="ignore"), _converting_tracers(), errstate.recording():
                result = fn(*arguments)
    except Exception as error:
        if raised and not isinstance(error, TracingError):
            # numfuse's error, replaced on its way out by another (numpy's C code turns
            # one raised iterating a traced value into "did not return an iterable")
            raise raised[0] from error
        raise
    finally:
        raised_while_tracing.reset(noting)
        _traced_now.reset(current)
        _user_globals.reset(user)
        _examples.reset(token)
    if raised:
        # the function caught what numfuse raised and went on: not numpy's path
        raise raised[0]
    _check_no_draws(generators)
    for index, original in originals.items():
        if _changed(static[index], original):
            raise UnsupportedOperationError(
                f"a change to a {type(original).__name__} argument (an item appended, "
                "assigned or removed)",
                "a compiled function cannot change the caller's containers: return the "
                "new values instead (numpy runs this function as written).")
    for value in static.values():
        if not isinstance(value, Tracer) and _holds_tracer(value, depth=2):
            raise UnsupportedOperationError(
                f"storing a traced value in a {type(value).__name__} argument "
                "(self.mean_ = x.mean(axis=0))",
                "the object would keep the traced value, not the array: numpy runs this "
                "function as written; to fuse it, return the array and store it outside.")
    _check_rebuildable(result)
    leaves, treedef = pytree.flatten(result)
    for leaf in leaves:
        if not isinstance(leaf, Tracer) and _holds_tracer(leaf):
            raise UnsupportedOperationError(
                f"returning a {type(leaf).__name__} that holds traced values",
                "return the arrays in a tuple, list, dict or namedtuple (and build the "
                "object from them outside the jitted function); a generator or a function "
                "made inside it cannot be returned either.")
        if isinstance(leaf, Tracer) and leaf.sequence:
            leaf._as_sequence("returning a list or tuple (or a slice of one)")
    outputs = tuple(leaf.node if isinstance(leaf, Tracer) else _leaf_const(leaf)
                    for leaf in leaves)
    first_position = {id(leaf): position for position, leaf in reversed(list(enumerate(leaves)))}
    same_as = tuple(first_position[id(leaf)] for leaf in leaves)
    return Graph(inputs, outputs, treedef, same_as=same_as,
                 warned=tuple(_warned(fn, record) for record in given
                              if not issubclass(record.category, _OWN_WARNINGS)))


_OWN_WARNINGS = (NumpyFallbackWarning, HookWarning)  # told once, by numfuse itself


def _warned(fn: Callable[..., Any], record: warnings.WarningMessage) -> Warned:
    """``record``, a warning given while ``fn`` was traced, as the graph keeps it: with
    the module its location is in (the function's own, another found by its file), or
    a registry of its own for a location in no module (given once per program under the
    "default" action)."""
    message = record.message if isinstance(record.message, Warning) else \
        record.category(record.message)
    filename = record.filename
    if in_numfuse(filename):
        return Warned(message, filename, record.lineno, None, None)
    function = inspect.unwrap(fn)
    code = getattr(function, "__code__", None)
    space = getattr(function, "__globals__", None) if code is not None and \
        code.co_filename == filename else None
    if space is None:
        found = os.path.abspath(filename)
        space = next((vars(module) for module in list(sys.modules.values())
                      if isinstance(path := getattr(module, "__file__", None), str) and
                      os.path.abspath(path) == found), None)
    if space is None:
        return Warned(message, filename, record.lineno, os.path.splitext(filename)[0], {})
    return Warned(message, filename, record.lineno, space.get("__name__", "<string>"),
                  space.setdefault("__warningregistry__", {}))

