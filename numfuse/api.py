"""The public entry points, wiring the stages together:

``trace -> simplify -> partition -> emit -> compile -> Program``

``jit`` compiles on the first call with each new argument signature; ``compile`` does it
now for example arguments.  Kernels are cached in memory by their generated source, so
the same region structure with the same dtypes compiles once per process, whichever
function it came from.
"""

from __future__ import annotations

import contextvars
import dataclasses
import dis
import functools
import inspect
import itertools
import logging
import os
import sys
import threading
import time
import types
import warnings
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, NamedTuple, TypeVar

import numpy as np

from . import backend, hooks, memory, pytree
from .background import default as background_default
from .background import submit as compile_later
from .codegen import KernelSource, emit, fastmath_flags
from .dtypes import DEFAULT, ArgSpec, as_operand, compilable, fast_key, is_setting, spec_of
from .errors import (
    CallShapeError,
    KernelCompileError,
    NumfuseError,
    NumpyFallbackWarning,
    ObjectValuesError,
    SignatureMismatchError,
    SizeDependentError,
    StaticArgumentError,
    UnsupportedDtypeError,
    UnsupportedOperationError,
    in_numfuse,
    outside_numfuse,
)
from .graph import Graph, verify
from .inspection import Explanation, explain, kernel_vector_report
from .kernel import Kernel, kernel_key
from .partition import Plan, partition
from .passes import simplify
from .runtime import (
    BroadcastError,
    CallPlan,
    Program,
    Settings,
    out_targets,
    raise_broadcast_error,
)
from .threads import checked as threads_checked
from .trace import Tracer, trace_graph

_kernel_cache: dict[tuple[str, tuple[int, ...]], Any] = {}
# Kinds of arguments (Jitted._calls) a jitted function keeps call plans for; calls with
# arguments of other shapes beyond these run through their signature's Compiled.
CALL_CACHE_SIZE = 256
_kernel_lock = threading.Lock()
# Every Jitted, so that a forked child can give each fresh locks (``_after_fork_in_child``).
_JITTED: weakref.WeakSet[Jitted] = weakref.WeakSet()
_log = logging.getLogger("numfuse")
_T = TypeVar("_T")


def _plan(fn: Callable[..., Any], specs: Sequence[ArgSpec], static: dict[int, Any],
          shapes: Sequence[tuple[int, ...]] | None = None, fuse_reductions: bool = True,
          fastmath: frozenset[str] = frozenset()) -> tuple[Plan, list[KernelSource]]:
    graph = simplify(trace_graph(fn, specs, static, shapes), check=verify)
    plan = partition(graph, fuse_reductions)
    sources = [emit(region, fastmath) for region in plan.regions]
    region_of = {node: region.index for region in plan.regions
                 for node in (*region.prelude, *region.nodes)}
    layouts = {region.index: source.layout for region, source in zip(plan.regions, sources,
                                                                      strict=True)}
    return dataclasses.replace(plan, graph=graph.annotate(region_of, layouts)), sources


class Compiled:
    """A function traced and compiled for one argument signature.

    ``graph`` is the simplified graph (``str()`` shows the kernels), ``kernels`` the
    compiled kernels in execution order.  Calling it with arguments of another signature
    raises ``SignatureMismatchError`` (a ``TypeError``) naming the argument.
    ``fuse_reductions=False`` keeps every reduction a numpy call (for comparisons);
    ``fastmath`` is as for ``jit``.
    """

    def __init__(self, fn: Callable[..., Any], specs: Sequence[ArgSpec],
                 static: dict[int, Any] | None = None,
                 shapes: Sequence[tuple[int, ...]] | None = None, cache: bool = True,
                 threads: int | None = None, fuse_reductions: bool = True,
                 fastmath: Any = False,
                 planned: tuple[Plan, list[KernelSource]] | None = None) -> None:
        self.fn = fn
        self.specs = tuple(specs)
        self.static = dict(static or {})
        self.fastmath = fastmath_flags(fastmath)
        plan, sources = planned if planned is not None else _plan(
            fn, self.specs, self.static, shapes, fuse_reductions, self.fastmath)
        self.plan = plan
        self.graph: Graph = plan.graph
        self.kernels: tuple[Kernel, ...] = _build_kernels(_name(fn), plan, sources, cache)
        # threads: None chooses per call (see numfuse.threads); changeable later.
        self.settings = Settings(threads_checked(threads), backend.thread_count)
        self.program = Program(plan, self.kernels, self.settings)
        # Run on already-converted operands that match this signature (the hot path).
        self.run: Callable[..., Any] = self.program.fast or self.program
        self._dynamic = [index for index in range(len(self.specs)) if index not in self.static]
        self._labels = argument_labels(fn, len(self.specs))
        # Compiled (by ``compile``) for container arguments of this structure (dicts, lists
        # and tuples of arrays): calls pass such containers, whose leaves are the
        # signature's arguments.
        self.structure: tuple[Any, ...] | None = None

    def __call__(self, *args: Any, out: Any = None) -> Any:
        """Run on ``args``; ``out`` (an array, or a tuple of arrays for a tuple of results)
        receives the results as numpy's ``out=`` does, kernels writing into it directly."""
        if self.structure is not None:  # compiled for container arguments of this structure
            structure, leaves = _flatten_structured(args)
            if structure != self.structure:
                raise SignatureMismatchError(
                    f"{_name(self.fn)} was compiled for dict, list or tuple arguments of other "
                    "keys, lengths or nesting; call numfuse.compile again for these arguments.")
            args = tuple(leaves)
        if _holds_dask_array(args, {}):
            if out is not None:
                raise TypeError(_DASK_OUT)
            from .dask import call_compiled

            return call_compiled(self, args)
        return self.program(self.check_arguments(args), out)

    def check_arguments(self, args: Sequence[Any]) -> list[Any]:
        """The operands for ``args``; raises ``SignatureMismatchError`` unless they have
        this Compiled's signature."""
        labels = self._labels if len(args) == len(self._labels) else \
            argument_labels(self.fn, len(args))
        operands = [value if index in self.static else as_operand(value, labels[index])
                    for index, value in enumerate(args)]
        if len(operands) != len(self.specs):
            raise SignatureMismatchError(
                f"{_name(self.fn)} was compiled for {len(self.specs)} arguments and called "
                f"with {len(operands)}; call numfuse.compile again for the new arguments."
            )
        for index in self._dynamic:
            spec = _sized(spec_of(operands[index], labels[index]), operands[index],
                          self.specs[index].sizes is not None)
            if spec != self.specs[index]:
                raise SignatureMismatchError(
                    f"{labels[index]} of {_name(self.fn)} is a {spec.describe()}, but this "
                    f"Compiled was made for a {self.specs[index].describe()}; "
                    f"{_difference(self.specs[index], spec)}. Call numfuse.compile with the "
                    "new arguments, or use numfuse.jit to compile per signature."
                )
        for index, value in self.static.items():
            given = operands[index]
            if given is not value and (type(given) is not type(value) or
                                       _value_key(given) != _value_key(value)):
                raise SignatureMismatchError(
                    f"static {labels[index]} of {_name(self.fn)} was {value!r} when compiled "
                    f"and is {operands[index]!r} now; compile again for the new value."
                )
        return operands

    def __repr__(self) -> str:
        args = ", ".join(spec.describe() for spec in self.specs)
        return f"<numfuse.Compiled {_name(self.fn)}({args}): {len(self.kernels)} kernel(s)>"

    def explain(self, *example_args: Any, vectorisation: bool = True) -> Explanation:
        """What fusion did: regions, outputs and why, boundaries and why, the temporary
        arrays avoided (in bytes for ``example_args`` when given) and, unless
        ``vectorisation=False``, each kernel's vectorisation report."""
        return explain(self.graph, self.plan.regions, self.kernels, _name(self.fn),
                       ", ".join(spec.describe() for spec in self.specs),
                       example_args or None, vectorisation)

    def _repr_html_(self) -> str:
        from .display import compiled_html

        return compiled_html(self)


def _build_kernels(function: str, plan: Plan, sources: Sequence[KernelSource],
                   cache: bool = True) -> tuple[Kernel, ...]:
    """Compile (or reuse) each region's kernel; send a compile event per new kernel.
    ``cache=False`` keeps new kernels out of the disk cache."""
    level = hooks.debug_level()
    if level:
        print(f"numfuse: {function}: graph and regions\n{plan.graph}", file=sys.stderr)
    kernels, events = [], []
    for region, source in zip(plan.regions, sources, strict=True):
        with _kernel_lock:
            key = kernel_key(source)
            gufunc = _kernel_cache.get(key)
            compile_time = None
            if gufunc is None:
                start = time.perf_counter()
                try:
                    gufunc = backend.compile_gufunc(source, cache)
                except Exception as error:
                    raise KernelCompileError(
                        f"numfuse could not compile kernel {source.name} {source.layout} of "
                        f"{function} ({type(error).__name__}: {error}); please report it "
                        f"with the kernel's source:\n{source.source}") from error
                compile_time = time.perf_counter() - start
                _kernel_cache[key] = gufunc
        kernel = Kernel(region, source, gufunc, backend)
        kernels.append(kernel)
        if compile_time is not None:
            _log.debug("compiled kernel %s %s for %s in %.3f s", source.name, source.layout,
                       function, compile_time)
            events.append(hooks.CompileEvent(kernel, function, compile_time,
                                             backend.loaded_from_disk(gufunc)))
        if level:
            _debug_kernel(kernel, compile_time, level)
    for event in events:  # outside the lock: a hook may compile other functions
        hooks.emit(event)
    return tuple(kernels)


def _debug_kernel(kernel: Kernel, compile_time: float | None, level: int) -> None:
    origin = "cached" if compile_time is None else f"compiled in {compile_time:.3f} s"
    print(f"numfuse: region {kernel.region.index}: kernel {kernel.name} {kernel.layout} "
          f"({origin})\n{kernel.source}", file=sys.stderr)
    if level >= 2:
        print(f"numfuse: {kernel_vector_report(kernel).summary()}", file=sys.stderr)


def _difference(expected: ArgSpec, got: ArgSpec) -> str:
    if expected.sizes is not None and got.sizes != expected.sizes and \
            (expected.kind, expected.dtype) == (got.kind, got.dtype):
        return (f"the shape differs ({expected.sizes} vs {got.sizes}); the function reads "
                "array sizes, so it is compiled per shape")
    if expected.kind != got.kind:
        return f"expected a {expected.kind} argument, got a {got.kind}"
    if expected.dtype != got.dtype:
        return f"the dtype differs ({expected.dtype} vs {got.dtype})"
    if expected.ndim != got.ndim:
        return f"the number of dimensions differs ({expected.ndim} vs {got.ndim})"
    ones = [axis for axis, (a, b) in enumerate(zip(expected.ones, got.ones, strict=True))
            if a != b]
    return f"the length-1 (broadcast) dimensions differ at axes {ones}"


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))


def argument_labels(fn: Any, count: int) -> list[str]:
    """How messages name the first ``count`` arguments of ``fn``: by position and, when
    its signature says, by parameter (``argument 1 ('y')``; ``argument 2 ('xs[1]')`` for
    the second item of ``*xs``)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no signature to read (some builtins)
        parameters = []
    labels = []
    for index in range(count):
        name = None
        for position, parameter in enumerate(parameters):
            if parameter.kind == inspect.Parameter.VAR_POSITIONAL:
                name = f"{parameter.name}[{index - position}]" if index >= position else None
                break
            if position == index and parameter.kind != inspect.Parameter.VAR_KEYWORD:
                name = parameter.name
                break
        labels.append(f"argument {index} ({name!r})" if name is not None
                      else f"argument {index}")
    return labels


class Jitted:
    """A function compiled on demand, once per argument signature.

    ``static_argnums`` lists positional arguments passed to the function as concrete
    Python values (part of the cache key: by value when hashable, else by their contents
    or identity).  As a method it
    binds its instance as a static first argument (``__get__``; by identity when the
    instance has no hash).
    """

    def __init__(self, fn: Callable[..., Any], static_argnums: int | Sequence[int] = (),
                 cache: bool = True, threads: int | None = None, fastmath: Any = False,
                 background: bool = False) -> None:
        # How the function binds as an attribute of a class (``__get__``): "instance" (a
        # method: the instance is its static first argument), "class" (a classmethod
        # jitted: the class is) or "static" (a staticmethod jitted: nothing is bound).
        self._binding = "instance"
        if isinstance(fn, (staticmethod, classmethod)):
            self._binding = "static" if isinstance(fn, staticmethod) else "class"
            fn = fn.__func__
        elif not hasattr(type(fn), "__get__"):
            # a ufunc, a functools.partial, a callable instance: as a class attribute
            # Python binds nothing to them, nor to their jitted function
            self._binding = "static"
        self.fn = fn
        self.static_argnums = argument_numbers(static_argnums, "static_argnums")
        # The static argument that is the instance of a method (set once bound): keyed by
        # its hash and ==, or by identity when it has no hash (a dataclass with eq).
        self._instance_argument: int | None = None
        self._owner: type | None = None  # the class whose body defined it (__set_name__)
        # Why numpy ran the function as written (_numpy_runs), each warned about once.
        self._warned: set[tuple[str, str]] = set()
        # Signatures whose function computes with Python objects (ObjectValuesError): run
        # as written.
        self._objects: set[tuple[Any, ...]] = set()
        # whether numpy may run the function as written when numfuse cannot compile it
        # (not a gradient's, which only tracing computes)
        self.numpy_runs = True
        # fallbacks to numpy not yet reported: (key, warning)
        self._unwarned: list[tuple[tuple[Any, ...], str, type[Warning]]] = []
        # True: new signatures compile on the compile thread; their calls run with numpy
        # until the kernels are ready (numfuse.background).
        self.background = background
        self._pending: dict[tuple[Any, ...], Future[Compiled]] = {}
        # Scalar arguments found to be used as Python values (x[:n]): static from then on.
        self.auto_static: frozenset[int] = frozenset()
        self.cache = cache  # False: compiled kernels are not saved to the disk cache
        # None: numba's thread count from the main thread, else 1
        self.threads = threads_checked(threads)
        self.fastmath = fastmath_flags(fastmath)  # LLVM fast-math flags; none by default
        self.compiled: dict[tuple[Any, ...], Compiled] = {}
        self._by_key: dict[tuple[Any, ...], Compiled] = {}
        # The call cache: how to run arguments of one exact kind (runtime.CallPlan), keyed
        # by each plain ndarray's shape and dtype and each Python float/int/complex's type
        # (any other argument: no key), filled by calls that found their Compiled in
        # _by_key.  Equal keys mean one signature and one operand layout (strides aside:
        # kernels read strided operands); an array's shape comes first, and a type never
        # equals a shape, so a dtype is only compared with a dtype (dtype("f8") == float).
        self._calls: dict[tuple[Any, ...], CallPlan] = {}
        # The plan of the latest call through the call cache with its guards (``_guard``:
        # whether arguments are of its kind, tested without building their key, and that
        # test fused with the plan's direct gufunc call); the guards of the plans kept, by
        # key.  Set only under _lock by a call that saw the current generation.
        self._last: Guards | None = None
        self._guards: dict[tuple[Any, ...], Guards] = {}
        # Counts the changes of how arguments are specialised (static, per shape), each of
        # which empties _by_key and _calls: a runner made before one is not kept.
        self._generation = 0
        # Reentrant: the function may call itself while it is traced (on other values);
        # the signatures being compiled (``_building``) tell a call of one of them, which
        # would compile it again forever.
        self._lock = threading.RLock()
        self._building: set[tuple[Any, ...]] = set()
        # How to make it again when pickled, for one made by another function (grad).
        self.rebuild: tuple[Callable[..., Any], tuple[Any, ...]] | None = None
        _JITTED.add(self)
        self._by_structure: dict[Any, Jitted] = {}  # per structure of container arguments
        # Set once the function turns out to read array sizes: it then compiles per shape.
        self.per_shape = False
        self._signature = _call_signature(fn)
        self._n_params = len(self._signature.parameters)
        self._labels = argument_labels(fn, self._n_params)
        # as many positional arguments as parameters bind one to each only when every
        # parameter takes one (``def f(x, *, k=2.0)``: ``f(x, 3.0)`` is Python's TypeError)
        self._n_positional = self._n_params if all(
            param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD)
            for param in self._signature.parameters.values()) else -1
        self._kinds = [param.kind for param in self._signature.parameters.values()]
        # out= is numfuse's (numpy's out=) unless the function has a parameter of that name.
        self._out_keyword = "out" not in self._signature.parameters and \
            inspect.Parameter.VAR_KEYWORD not in self._kinds
        self._variadic = any(kind in (inspect.Parameter.VAR_POSITIONAL,
                                      inspect.Parameter.VAR_KEYWORD) for kind in self._kinds)
        self._traced = fn if self._variadic else _by_parameter(fn, self._signature)
        # Defaults whose contents can change in place (a dict, a list, an options object),
        # given as keyword arguments when left out: the function sees them as they are now,
        # as numpy's does (an array default: ``_bind``).
        self._live_defaults = [
            (index if param.kind is param.POSITIONAL_OR_KEYWORD else None, name,
             param.default)
            for index, (name, param) in enumerate(self._signature.parameters.items())
            if param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)
            and type(param.default) is not np.ndarray and _changes_in_place(param.default)]
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]
        # Whether the function compares values with ``is`` (``if X is Y``): one array
        # given as two arguments is then numpy's to run (tracing sees two values).
        self._identity = _compares_identity(fn)
        if self._identity:
            return  # (no generated call: every call passes __call__'s check)
        # A class of its own, whose ``__call__`` becomes the generated call of the latest
        # kind of arguments (``_latest``): one Python call for a small call's dispatch.
        self.__class__ = type(Jitted.__name__, (Jitted,), {"__module__": Jitted.__module__,
                                                           "__qualname__": Jitted.__qualname__})

    def __set_name__(self, owner: type, name: str) -> None:
        """Defined in a class body: called through the class with an instance of it
        first (``Model.forward(model, x)``), it is a method (``_notice_instance``)."""
        if self._binding == "instance":
            self._owner = owner

    def _notice_instance(self, args: Sequence[Any]) -> None:
        """Make the first argument static when it is an instance of the class the
        function was defined in (a method called through its class)."""
        if self._instance_argument is None and self._owner is not None and args and \
                isinstance(args[0], self._owner):
            self._as_method()

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """A method binds its instance as a static first argument (as
        ``static_argnums=(0,)`` would); a jitted classmethod binds the class."""
        if self._binding == "static":
            return self
        if self._binding == "class":
            return types.MethodType(self, owner if owner is not None else type(instance))
        if instance is None:
            return self
        self._as_method()
        return types.MethodType(self, instance)

    def _as_method(self) -> None:
        """Make the first argument, the instance, static."""
        with self._lock:
            if self._instance_argument is None:
                self._instance_argument = 0
                self.static_argnums = tuple(sorted({0, *self.static_argnums}))
                self._forget_calls()

    def _forget_calls(self) -> None:
        """Empty the signature and call caches: arguments are now specialised otherwise."""
        self._generation += 1
        self._by_key.clear()
        self._calls.clear()
        self._guards.clear()
        self._latest(None)

    def _data_instance(self, args: tuple[Any, ...]) -> set[int]:
        """The instance argument's position when it holds an array or a number: the
        function bound as a method is also called directly (a helper offered as a class
        attribute), and that argument is then data, not static."""
        index = self._instance_argument
        if index is None or index >= len(args) or not isinstance(
                args[index], (np.ndarray, np.generic, int, float, complex, list)):
            return set()
        return {index}

    def _static_key(self, index: int, value: Any) -> Any:
        """What identifies a static argument's value among compilations."""
        if index == self._instance_argument:  # (its attributes: read when traced)
            try:
                hash(value)
            except TypeError:
                return ("static", type(value), _Identity(value))
            if type(value).__eq__ is object.__eq__:
                return ("static", type(value), value)
            # compared by value (a frozen dataclass): its fields' values too, as for other
            # static values (Scale(2) == Scale(2.0), but an int and a float compute otherwise)
            return ("static", type(value), _value_key(value))
        return ("static", type(value), _value_key(value))

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """All arguments in parameter order (keyword-only ones last); ``DEFAULT`` for each
        one the caller left out, which the function then sees left out (an array default
        is passed instead)."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{_name(self.fn)}(): {error}") from None
        if self._variadic:
            if bound.kwargs:  # calls route these through _with_keywords
                raise TypeError(
                    f"{_name(self.fn)}(): keyword arguments {', '.join(bound.kwargs)} of a "
                    "function with *args or **kwargs have no place among its compiled "
                    "arguments; call the jitted function with them instead.")
            return bound.args
        # an array default is passed as an argument: the function sees it as it is now
        # (numpy's function sees a default array changed in place since the last call)
        return tuple(bound.arguments.get(name, parameter.default
                                          if type(parameter.default) is np.ndarray
                                          else DEFAULT)
                     for name, parameter in self._signature.parameters.items())

    def specialize(self, *args: Any, **kwargs: Any) -> tuple[Compiled, list[Any]]:
        """The ``Compiled`` for these arguments (compiling it if new) and the operands."""
        compiled, operands = self._specialize(args, kwargs, wait=True)
        assert compiled is not None
        return compiled, operands

    def _specialize(self, args: tuple[Any, ...], kwargs: dict[str, Any], wait: bool,
                    fallback: bool | None = None) -> tuple[Compiled | None, list[Any]]:
        """``specialize``; with ``background`` and not ``wait``, None while the kernels of
        a new signature are compiling, or when numfuse cannot compile the function for
        these arguments and numpy runs it as written (``_fall_back``; by default only when
        not ``wait``)."""
        if kwargs or len(args) != self._n_positional:
            args = self._bind(args, kwargs)
        self._notice_instance(args)
        allowed = not wait if fallback is None else fallback
        try:
            return self._specialize_bound(args, wait, allowed)
        except Exception as error:
            if not allowed or not self.numpy_runs or not _numpy_may_run(error):
                raise
            return self._fall_back(args, error)

    def _keyed(self, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[Any],
                                                     tuple[bool, frozenset[int]], set[int]]:
        """The key of the compilation for the bound ``args`` as this object specialises
        now, their operands, that specialisation (per shape?, static arguments) and the
        arguments passed as static values."""
        tried = self.per_shape, self.auto_static  # what this key is specialised for
        # an argument made static for a Python value (axis=k) stays an operand when an
        # array or list comes in its place (np.percentile(x, q) with q = [25, 75])
        # and a tuple of ints is always static: numpy reads it as numbers (an index x[t]
        # is x[0, 1], not x[[0, 1]]; a shape, axes), never as an array
        fixed = set(self.static_argnums) - self._data_instance(args) | {
            index for index, value in enumerate(args)
            if _int_tuple(value) or _mixed_numbers(value)} | {
            index for index in tried[1]
            if index >= len(args) or _int_sequence(args[index]) or
            not isinstance(args[index], (np.ndarray, list, tuple))}
        operands = [value if index in fixed or is_setting(value)
                    else as_operand(value, self._describe(index))
                    for index, value in enumerate(args)]
        key = tuple(
            self._static_key(index, value) if index in fixed or is_setting(value)
            else _sized(_items_of(spec_of(value, self._describe(index)), args[index]),
                        value, tried[0])
            for index, value in enumerate(operands)
        )
        return key, operands, tried, fixed

    def _fall_back(self, args: tuple[Any, ...], error: Exception
                   ) -> tuple[Compiled | None, list[Any]]:
        """numfuse cannot compile the function for arguments of this kind (``error``):
        numpy runs it as written for them from now on, with a ``NumpyFallbackWarning``
        (raised as ``error`` instead where that warning is made an error)."""
        key, operands, _tried, _fixed = self._keyed(args)
        reason = str(error).split("\n", 1)[0].rstrip(" :")
        message = (f"{_name(self.fn)} cannot be compiled for arguments of these kinds "
                   f"({type(error).__name__}: {reason}): numpy runs the function as written "
                   "for them (its own result, not fused). numfuse.compile(fn, *args) raises "
                   "the error with its advice.")
        # the warning is given once numpy has run (not when numpy raises an error of its
        # own); the filters in force decide now whether it is an error
        with warnings.catch_warnings(record=True):
            try:
                warnings.warn(message, NumpyFallbackWarning, stacklevel=outside_numfuse())
            except NumpyFallbackWarning:
                if isinstance(error, (TypeError, ValueError, IndexError, ArithmeticError)) \
                        and not isinstance(error, NumfuseError):
                    # numpy's own error on the stand-in values tracing used: numpy's error
                    # on these values, if it raises one, is the one to raise
                    self._traced(*args)
                raise error from None
        self._objects.add(key)
        self._unwarned.append((key, message, NumpyFallbackWarning))
        return None, operands

    def _specialize_bound(self, args: tuple[Any, ...], wait: bool, numpy_runs: bool = False
                          ) -> tuple[Compiled | None, list[Any]]:
        """``_specialize`` of bound arguments, raising what keeps numfuse from compiling
        (``numpy_runs``: arguments of a kind numpy runs the function for give None)."""
        key, operands, tried, fixed = self._keyed(args)
        compiled = self.compiled.get(key)
        if compiled is None:
            if (not wait or numpy_runs) and key in self._objects:
                return None, operands
            try:
                compiled = self._compile(key, operands, wait or not self.background)
            except (SizeDependentError, StaticArgumentError) as error:
                self._adapt(error, tried)
                return self._specialize_bound(args, wait, numpy_runs)
            except UnsupportedDtypeError as error:
                if (wait and not numpy_runs) or not self.numpy_runs:
                    raise
                # numpy's object loops, its dates or strings: the call runs the function
                # as written (warning once it has run)
                self._objects.add(key)
                reason = (f"computes with values numpy keeps as Python objects ({error})",
                          "Write the value as a float (2.0**70) or convert it to an array "
                          "of a numeric dtype to fuse it.") \
                    if isinstance(error, ObjectValuesError) else (
                    f"computes with values of a dtype numfuse cannot compile ({error})",
                    "Compute that part outside the jitted function to fuse the rest.")
                if reason not in self._warned:
                    self._warned.add(reason)
                    self._unwarned.append((key, self._running_numpy(*reason),
                                           NumpyFallbackWarning))
                return None, operands
            except (TypeError, ValueError, IndexError, CallShapeError) as error:
                # A list of ints traced as an array where numpy wants the numbers (a
                # shape, axes, pad widths): traced again with such lists static.
                tuples = {index for index, value in enumerate(args)
                          if _int_sequence(value) and index not in fixed}
                if not tuples:
                    raise
                self.auto_static = self.auto_static | tuples
                with self._lock:
                    self._forget_calls()
                try:
                    return self._specialize_bound(args, wait, numpy_runs)
                except Exception:
                    self.auto_static = self.auto_static - tuples
                    raise error from None
        return compiled, operands

    def _adapt(self, error: SizeDependentError | StaticArgumentError | CallShapeError,
               tried: tuple[bool, frozenset[int]] | None = None) -> None:
        """Specialise further as ``retry_policy`` says after ``error`` (or raise it), the
        specialisation ``tried`` (per shape?, static arguments; default: the current one)
        having failed.  Another thread may have specialised further since: both stand."""
        per_shape, static = retry_policy(error, *(tried or (self.per_shape,
                                                            self.auto_static)))
        with self._lock:
            self.per_shape = self.per_shape or per_shape
            self.auto_static = self.auto_static | static
            self._forget_calls()
        detail = (f" ({', '.join(self._describe(index) for index in sorted(error.arguments))})"
                  if isinstance(error, StaticArgumentError) else "")
        reason = next(text for kind, text in _ADAPTED.items() if isinstance(error, kind))
        _log.info("%s %s%s", _name(self.fn), reason, detail)

    def _describe(self, index: int) -> str:
        """``argument 1 ('y')``, as messages name an argument."""
        if index >= len(self._labels):
            self._labels = argument_labels(self.fn, index + 1)
        return self._labels[index]

    def _compile(self, key: tuple[Any, ...], operands: list[Any],
                 wait: bool = True) -> Compiled | None:
        """Compile for ``key`` once, even when several threads ask at the same time.

        Without ``wait`` the function is traced here and its kernels are built on the
        compile thread: None until they are ready (a compile error is raised here, at the
        first call after it happened, and at every later call of that signature)."""
        with self._lock:
            compiled = self.compiled.get(key)
            if compiled is not None:
                return compiled
            pending = self._pending.get(key)
            if pending is None:
                _log.info("%s", self._compile_reason(key))
                specs = [part if isinstance(part, ArgSpec) else spec_of(0) for part in key]
                static = {index: operands[index] for index, part in enumerate(key)
                          if not isinstance(part, ArgSpec)}
                shapes = [np.shape(value) if isinstance(part, ArgSpec) else ()
                          for part, value in zip(key, operands, strict=True)]
                if wait:
                    if key in self._building:
                        raise UnsupportedOperationError(
                            f"{_name(self.fn)} calling itself, while it is traced, with "
                            f"arguments of the kind it is traced for ({_describe_key(key)})",
                            "recurse on a static argument (static_argnums) that reaches a "
                            "base case, or loop instead of recursing.")
                    self._building.add(key)
                    try:
                        compiled = self.compiled[key] = self._build(specs, static, shapes)
                    finally:
                        self._building.discard(key)
                    return compiled
                planned = _plan(self._traced, specs, static, shapes, fastmath=self.fastmath)
                pending = self._pending[key] = compile_later(
                    lambda: self._build(specs, static, shapes, planned))
        if not wait and not pending.done():
            return None
        return self._settle(key, pending)

    def _settle(self, key: tuple[Any, ...], pending: Future[Compiled]) -> Compiled:
        """The finished background compile of ``key``, from now on in ``compiled``."""
        compiled = pending.result()  # the compile's exception, if it failed
        with self._lock:
            if self._pending.pop(key, None) is not None:
                self.compiled[key] = compiled
                _log.info("%s: kernels ready, later calls run them", _name(self.fn))
                hooks.emit_call(hooks.CallEvent(_name(self.fn), "kernels",
                                                _describe_key(key)))
        return compiled

    def _build(self, specs: list[ArgSpec], static: dict[int, Any],
               shapes: list[tuple[int, ...]],
               planned: tuple[Plan, list[KernelSource]] | None = None) -> Compiled:
        return Compiled(self._traced, specs, static, shapes, self.cache, self.threads,
                        fastmath=self.fastmath, planned=planned)

    def wait(self) -> None:
        """Block until every signature compiling in the background is compiled (raising
        the first compile error)."""
        for key, pending in list(self._pending.items()):
            self._settle(key, pending)

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        if self._identity and self.numpy_runs and _one_array_twice(args, kwargs):
            return self._as_written(args, kwargs, (
                "was called with one array as two arguments, and compares values with `is`, "
                "which the traced function could not", "Pass a copy (y.copy()) to fuse it."))
        if not kwargs:
            # Arguments of a kind that ran before (the call cache, see ``_calls``): their
            # plan has everything decided.  Arguments of the latest such kind never get
            # here: the generated ``__call__`` of their kind (``_guard``) took them.
            generation = self._generation
            key = _exact_key(args)
            plan = self._calls.get(key) if key is not None else None
            if plan is not None:
                guards = self._guards.get(key)  # type: ignore[arg-type]
                if guards is not None and self._last is not guards:
                    with self._lock:
                        if generation == self._generation:
                            self._latest(guards)
                return self._run_plan(plan, args)
            if len(args) == self._n_positional and not self.static_argnums \
                    and not self.auto_static and not self.per_shape:
                result = self._signature_call(args, key)
                if result is not _GENERAL:
                    return result
        elif len(kwargs) == 1 and "out" in kwargs and self._out_keyword:
            # numpy's out= with arguments of a kind in the call cache: its program at once
            key = _exact_key(args)
            guards = self._guards.get(key) if key is not None else None
            if guards is not None:
                return guards.call(self, *args, **kwargs)
        return self._general_call(args, kwargs)

    def _latest(self, guards: Guards | None) -> None:
        """Make ``guards`` the latest kind of arguments (None: none): its generated call
        becomes this object's ``__call__`` (its own class's, see ``__init__``).  Under
        ``_lock``."""
        self._last = guards
        own = type(self)
        if own is Jitted:  # not made by __init__: no class of its own
            return
        if guards is not None:
            own.__call__ = guards.call  # type: ignore[method-assign]
        elif "__call__" in own.__dict__:
            del own.__call__

    def _run_plan(self, plan: CallPlan, args: tuple[Any, ...]) -> Any:
        """Run the call cache's ``plan`` for ``args``, of its kind."""
        return self._guarded(plan.run, args, args)

    def _guarded(self, run: Callable[[Any], Any], values: Any, args: tuple[Any, ...]) -> Any:
        """``run(values)``, a run of the call of the positional ``args``: compiled per
        shape from now on when a size did not follow the arguments as traced, numpy's
        error when the arguments do not broadcast, numpy's run for a Python int beyond
        int64 (``_numpy_runs``)."""
        try:
            return run(values)
        except CallShapeError as error:
            if _numpy_runs(args, {}) is not None:  # a Python int beyond int64: numpy's
                return self._general_call(args, {})  # call made a uint64 or object array
            return self._per_shape(args, {}, error)
        except BroadcastError as error:
            self._raise_numpys_error(args, {}, error)
            raise
        except OverflowError:
            return self._general_call(args, {})
        except TypeError:
            if _numpy_runs(args, {}) is not None:
                return self._general_call(args, {})
            raise

    def _into(self, program: Program, args: tuple[Any, ...], options: dict[str, Any]) -> Any:
        """A generated call's run of ``program`` for the positional ``args`` of its kind
        with ``options`` (keyword arguments): numpy's ``out=`` written by the program
        itself (``Program._into``), with the general path's handling of its errors;
        anything else through the general path."""
        if len(options) != 1 or "out" not in options or not self._out_keyword:
            return _generally(self, *args, **options)
        try:
            return program(args, options["out"])
        except CallShapeError as error:
            return self._per_shape(args, options, error)
        except OverflowError:  # a Python int beyond 64 bits: _numpy_runs
            return self._general_call(args, options)

    def _direct_failed(self, args: tuple[Any, ...], error: Exception) -> Any:
        """The gufunc of a direct call (``Guards.call``) raised ``error``: numpy's error
        for the function as written, or the general path."""
        if isinstance(error, OverflowError):  # a Python int beyond 64 bits: _numpy_runs
            return self._general_call(args, {})
        self._raise_numpys_error(args, {}, error)  # type: ignore[arg-type]
        raise_broadcast_error(args)
        raise error

    def _signature_call(self, args: tuple[Any, ...], exact: tuple[Any, ...] | None) -> Any:
        """A call with every argument positional and none static: the Compiled of its
        signature (``fast_key``), compiled if new, and its plan for arguments of the kind
        ``exact`` describes kept in the call cache; ``_GENERAL`` when the arguments need
        the general path."""
        key = tuple(map(fast_key, args))
        generation = self._generation
        compiled = self._by_key.get(key)
        if compiled is None:
            if None in key or _numpy_runs(args, {}) is not None:
                return _GENERAL
            found, operands = self._specialize(args, {}, wait=False)
            if found is None:
                return self._with_numpy(args, {})
            if generation != self._generation:  # it became static or per shape
                return self._guarded(found.run, operands, args)
            self._by_key[key] = compiled = found
        if exact is not None and len(self._calls) < CALL_CACHE_SIZE:
            plan = compiled.program.call_plan(args)
            guards = _guard(exact, plan, compiled.program, self._out_keyword)
            with self._lock:
                if generation == self._generation:
                    self._calls[exact] = plan
                    self._guards[exact] = guards
        return self._guarded(compiled.run, args, args)

    def _general_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if any(isinstance(value, Tracer) for value in (*args, *kwargs.values())):
            return self.fn(*args, **kwargs)  # called while tracing: inline it
        if _holds_dask_array(args, kwargs):
            if kwargs.get("out") is not None and self._out_keyword:
                raise TypeError(_DASK_OUT)
            from .dask import call_jitted

            return call_jitted(self, args, kwargs)
        for index, name, default in self._live_defaults:
            if (index is None or index >= len(args)) and name not in kwargs:
                kwargs = {**kwargs, name: default}
        if kwargs and self._variadic:
            bound = self._keywords(args, kwargs)
            if bound is not None:
                return self._with_keywords(bound, kwargs)
        if any(_structured(value) for name, value in
               itertools.chain(enumerate(args), kwargs.items())
               if name != "out" or not self._out_keyword):
            return self._with_containers(args, kwargs)
        reason = _numpy_runs(args, kwargs)
        if reason is not None:
            if not self.numpy_runs:
                raise TypeError(f"{_name(self.fn)} {reason[0]}: a gradient is only "
                                f"traced, never run by numpy. {reason[1]}")
            return self._as_written(args, kwargs, reason)
        try:
            return self._run(args, kwargs)
        except CallShapeError as error:
            return self._per_shape(args, kwargs, error)
        except BroadcastError as error:
            self._raise_numpys_error(args, kwargs, error)
            raise

    def _as_written(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                    reason: tuple[str, str]) -> Any:
        """The function run by numpy as written, its results stored into numfuse's
        ``out=`` when given (a function with no parameter of that name); then the warning
        of ``reason``, once (none when numpy raises an error of its own)."""
        if "out" in kwargs and self._out_keyword:
            given = dict(kwargs)
            out = given.pop("out")
            result = _copied_into(self.fn(*args, **given), out)
        else:
            result = self.fn(*args, **kwargs)
        self._warn_once(reason)
        return result

    def _raise_numpys_error(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                            error: ValueError) -> None:
        """Arguments whose sizes a kernel could not broadcast: raise the error numpy
        raises for the function run as written (the operation that fails first, in numpy's
        words, its warnings before it: a ``ValueError``, or the ``IndexError`` of a mask
        of another shape), else return (numfuse's ``error`` stands)."""
        if "out" in kwargs and self._out_keyword:
            return
        try:
            self.fn(*args, **kwargs)
        except (ValueError, IndexError) as numpys:
            raise numpys from None
        except Exception:  # not numpy's broadcast error: numfuse's stands
            return
        _log.debug("%s: numpy computed where a kernel raised %s", _name(self.fn), error)

    def _warn_once(self, reason: tuple[str, str]) -> None:
        """Warn that numpy runs the function as written, once per reason (per ndarray
        subclass, for object arrays), at the caller's line."""
        if reason in self._warned:
            return
        self._warned.add(reason)
        warnings.warn(self._running_numpy(*reason), NumpyFallbackWarning,
                      stacklevel=outside_numfuse())

    def _running_numpy(self, what: str, advice: str) -> str:
        return (f"{_name(self.fn)} {what}: numpy runs the function as written (its own "
                f"result, not fused). {advice}")

    def _keywords(self, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> inspect.BoundArguments | None:
        """For a function with ``*args`` or ``**kwargs``: the binding of a call with
        keyword arguments that bind to no positional parameter (keyword-only ones, and
        those ``**kwargs`` gathers: its ``kwargs``), or None when there are none
        (numfuse's ``out=`` aside)."""
        given = {name: value for name, value in kwargs.items()
                 if name != "out" or not self._out_keyword}
        try:
            bound = self._signature.bind(*args, **given)
        except TypeError as error:
            raise TypeError(f"{_name(self.fn)}(): {error}") from None
        return bound if bound.kwargs else None

    def _with_keywords(self, bound: inspect.BoundArguments, kwargs: dict[str, Any]) -> Any:
        """A call of a function with ``*args`` or ``**kwargs`` bound to keywords that no
        positional parameter takes (``_keywords``): the values of the positional
        arguments, then of the keywords, are the arguments of a jitted function per
        number of positional arguments and keyword names, which passes them on as the
        call did."""
        positional, keywords = bound.args, bound.kwargs
        count, names, fn = len(positional), tuple(keywords), self.fn

        def flat(*values: Any) -> Any:
            return fn(*values[:count], **dict(zip(names, values[count:], strict=True)))

        inner = self._inner(("keywords", count, names), flat,
                            {index: index for index in range(count)})
        values = (*positional, *keywords.values())
        if "out" in kwargs and self._out_keyword:
            return inner(*values, out=kwargs["out"])
        return inner(*values)

    def _with_containers(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Dict arguments (``params={"w": w, "b": b}``): their values are arguments of a
        jitted function per dict structure (keys and nesting), which rebuilds the dicts; so
        are the items of lists and tuples holding arrays (``_structured``)."""
        out = kwargs.pop("out", None) if "out" in kwargs and self._out_keyword else None
        inner, _structure, leaves = self._flat(args, kwargs)
        # numpy's runs of the inner function (``_flat``) take these containers themselves
        token = _CONTAINERS.set((leaves, self._bind(args, kwargs)))
        try:
            return inner(*leaves) if out is None else inner(*leaves, out=out)
        finally:
            _CONTAINERS.reset(token)

    def _flat(self, args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> tuple[Jitted, tuple[Any, ...], list[Any]]:
        """The jitted function of the leaves of container arguments for their structure
        (see ``_with_containers``), the structure, and the leaves."""
        bound = self._bind(args, kwargs)
        structure, leaves = _flatten_structured(bound)
        traced = self._traced

        def flat(*values: Any) -> Any:
            given = _CONTAINERS.get()
            if given is not None and len(given[0]) == len(values) and all(
                    value is leaf for value, leaf in zip(values, given[0], strict=True)):
                return traced(*given[1])  # numpy runs it: on the caller's containers
            rebuilt = _unflatten_structured(structure, values)
            result = traced(*rebuilt)
            if _rebuilt_changed(rebuilt, structure, values):
                raise UnsupportedOperationError(
                    "a change to a dict or list argument (an item assigned, added or "
                    "removed)",
                    "a compiled function cannot change the caller's containers: return "
                    "the new values instead (numpy runs this function as written).")
            return result

        inner = self._inner(structure, flat, _leaf_positions(structure))
        return inner, structure, leaves

    def _inner(self, structure: tuple[Any, ...], flat: Callable[..., Any],
               positions: dict[int, int]) -> Jitted:
        """The jitted function of this one's arguments regrouped as ``structure`` says
        (``_with_keywords``, ``_flat``): ``flat`` jitted with this one's options, once per
        structure; ``positions`` maps an argument's index to its position among the inner
        function's (for the static ones and a method's instance)."""
        inner = self._by_structure.get(structure)
        if inner is None:
            functools.update_wrapper(flat, self.fn)
            flat.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
                [inspect.Parameter("values", inspect.Parameter.VAR_POSITIONAL)])
            inner = Jitted(flat, static_argnums=[positions[index] for index in
                                                 self.static_argnums if index in positions],
                           cache=self.cache, threads=self.threads, fastmath=self.fastmath,
                           background=self.background)
            if self._instance_argument in positions:
                inner._instance_argument = positions[self._instance_argument]
            inner.numpy_runs = self.numpy_runs
            self._by_structure[structure] = inner
        return inner

    def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if "out" in kwargs and self._out_keyword:
            kwargs = dict(kwargs)
            out = kwargs.pop("out")
            found, operands = self._specialize(args, kwargs, wait=True, fallback=True)
            if found is None:  # numpy runs it (see _fall_back), its results copied into out
                return _copied_into(self._with_numpy(args, kwargs), out)
            return found.run(operands, out)
        found, operands = self._specialize(args, kwargs, wait=False)
        if found is None:
            return self._with_numpy(args, kwargs)
        return found.run(operands)

    def _with_numpy(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run the function as written while its kernels compile in the background, or
        when numfuse cannot compile it (``_fall_back``, reported once numpy has run)."""
        _log.debug("%s: ran with numpy", _name(self.fn))
        hooks.emit_call(hooks.CallEvent(_name(self.fn), "numpy", ", ".join(
            spec_of(value).describe() if not is_setting(value) and not isinstance(
                value, (tuple, list, dict)) else repr(value) for value in args)))
        try:
            result = self.fn(*args, **kwargs)
        except Exception:
            # numpy's own error for these values: the next call tries to compile again
            while self._unwarned:
                self._objects.discard(self._unwarned.pop()[0])
            raise
        while self._unwarned:
            _key, message, category = self._unwarned.pop(0)
            warnings.warn(message, category, stacklevel=outside_numfuse())
        return result

    def _per_shape(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                   error: CallShapeError) -> Any:
        """A numpy call's result size did not follow the argument sizes as tracing found
        (``x[:3]`` of a shorter ``x``): compile per shape from now on and run again; when
        it does not follow them per shape either, the sizes come from a list of ints
        (``x.reshape(b[0], -1)``): such lists are static values from now on."""
        sequences = frozenset(index for index, value in enumerate(args)
                              if _int_sequence(value)) - self.auto_static
        try:
            if not (sequences and not kwargs and len(args) == self._n_positional):
                self._adapt(error)
                return self._run(args, kwargs)
            if not self.per_shape:
                self._adapt(error)
                try:
                    return self._run(args, kwargs)
                except CallShapeError:
                    pass
            with self._lock:
                self.auto_static = self.auto_static | sequences
                self._forget_calls()
            return self._run(args, kwargs)
        except CallShapeError as again:
            # a size tracing could not foresee even per shape (a mask as long as the
            # distinct values of an argument indexing another): numpy's call
            if not self.numpy_runs:
                raise
            key = self._keyed(args)[0]
            with self._lock:
                self.compiled.pop(key, None)
                self._forget_calls()
            self._fall_back(args, again)  # numpy's for arguments of this kind from now on
            return self._with_numpy(args, kwargs)

    def __reduce__(self) -> Any:
        """Pickle by name when importable as such, else as the function and options,
        rebuilt without compilations (workers of dask.distributed compile on first use);
        one made by another function (``numfuse.grad``) as that call (``rebuild``)."""
        if self.rebuild is not None:
            return self.rebuild
        module = sys.modules.get(getattr(self, "__module__", ""))
        if module is not None and module.__name__ != "__main__" and \
                _lookup(module, _name(self)) is self:
            return _name(self)
        if module is not None and _lookup(module, _name(self)) is self and \
                getattr(self.fn, "__qualname__", None) == _name(self):
            # a script's ``@numfuse.jit def f``: pickle finds the function by its name, the
            # jitted object's now, so it is named as that object's attribute (``f.fn``),
            # which a process started by multiprocessing finds (cloudpickle, as for any
            # function of a script, pickles it by value)
            self.fn.__qualname__ = f"{_name(self)}.fn"
        return Jitted, (self.fn, self.static_argnums, self.cache, self.threads,
                        self.fastmath, self.background)

    def __repr__(self) -> str:
        return f"<numfuse.jit {_name(self.fn)}: {len(self.compiled)} signature(s)>"

    def explain(self, *args: Any, vectorisation: bool = True, **kwargs: Any) -> Explanation:
        """``Compiled.explain`` for these arguments (compiling for them if needed)."""
        if any(_structured(value) for value in (*args, *kwargs.values())):
            inner, _structure, leaves = self._flat(args, kwargs)
            return inner.explain(*leaves, vectorisation=vectorisation)
        compiled, operands = self.specialize(*args, **kwargs)
        return compiled.explain(*operands, vectorisation=vectorisation)

    def _compile_reason(self, key: tuple[Any, ...]) -> str:
        """Why ``key`` compiles: the first call, or how it differs from the nearest
        signature already compiled (by argument name)."""
        head = f"compiling {_name(self.fn)}"
        if not self.compiled:
            return f"{head}: first call"
        nearest = min(self.compiled, key=lambda known: sum(
            1 for a, b in zip(known, key, strict=False) if a != b) + abs(len(known) - len(key)))
        if len(nearest) != len(key):
            return f"{head}: called with {len(key)} arguments, compiled for {len(nearest)}"
        changes = []
        for index, (before, now) in enumerate(zip(nearest, key, strict=True)):
            if before == now:
                continue
            if isinstance(before, ArgSpec) and isinstance(now, ArgSpec):
                change = (_difference(before, now) if before.kind == now.kind
                          else f"was a {before.describe()}, now a {now.describe()}")
            else:
                change = f"the static value differs ({before[-1]!r} vs {now[-1]!r})"
            changes.append(f"{self._describe(index)}: {change}")
        return (f"{head}: new signature, {'; '.join(changes)} "
                f"(nearest of {len(self.compiled)} compiled signature(s))")


class _Identity:
    """An unhashable static value (a method's instance) compared by identity."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)

    def __repr__(self) -> str:
        return repr(self.value)


_ndarray = np.ndarray
_MISSING = object()
_MISS = object()  # a direct guard's "not these arguments, or not a direct call"


class Guards(NamedTuple):
    """What ``_guard`` writes for one kind of arguments of a ``Jitted`` (see there)."""

    guard: Callable[..., bool]
    plan: CallPlan
    direct: Callable[..., Any]
    call: Callable[..., Any]


def _generally(jitted: Jitted, /, *args: Any, **kwargs: Any) -> Any:
    """``Jitted.__call__`` of the arguments a generated call was given (``_MISSING``
    stands for an argument not given)."""
    return Jitted.__call__(jitted, *[value for value in args if value is not _MISSING],
                           **kwargs)


def _int_tuple(value: Any) -> bool:
    """A tuple (or namedtuple) of Python ints (or of such tuples): a shape, an axis, pad
    widths."""
    return (type(value) is tuple or _namedtuple(value)) and all(
        type(item) is int or _int_tuple(item) for item in value)


def _namedtuple(value: Any) -> bool:
    return pytree.namedtuple_class(type(value))


# The most items a list of Python numbers of mixed types may hold to be a static value
MIXED_STATIC_ITEMS = 32


def _mixed_numbers(value: Any) -> bool:
    """A short list or tuple of Python numbers of mixed types whose items traced values
    cannot stand for one by one (nested ``[(0, 1.5), (-1, 0.5)]``, ``[True, 2]``,
    ``[1.5, 1j]``, ``(1.5, 2**53 + 1)``): a static value, so that each item the function
    takes out is the Python number it is (``_items_of`` types the flat lists of ints and
    floats a float64 array holds exactly)."""
    if type(value) not in (list, tuple):
        return False
    leaves = pytree.leaves(value)
    kinds = {type(item) for item in leaves}
    if len(kinds) < 2 or not kinds <= {bool, int, float, complex} or \
            len(leaves) > MIXED_STATIC_ITEMS:
        return False
    if all(type(item) in (int, float) for item in value):
        # typed item by item (``_items_of``) while the float64 array holds each int
        return any(type(item) is int and abs(item) > 2**53 for item in value)
    return True


def _items_of(spec: ArgSpec, value: Any) -> ArgSpec:
    """The signature of an argument numpy makes an array of: of kind ``"items"`` when it
    is a list or tuple of Python numbers of one type, whose items are Python numbers
    (weak) when the function takes them out (``lo, hi = bounds``, ``coeffs[0]``), of kind
    ``"sequence"`` when it is another list or tuple (Python's operators on it are a
    list's)."""
    if type(value) in (list, tuple) and spec.kind == "array":
        kinds = {type(item) for item in pytree.leaves(value)}
        if len(kinds) == 1 and kinds <= {bool, int, float, complex}:
            return spec._replace(kind="items")
        if spec.ndim == 1 and kinds <= {int, float} and all(
                type(item) is float or abs(item) <= 2**53 for item in value):
            # (0, 1.5): each item the Python number it is (``lo, hi = bounds`` beside a
            # float32 array stays float32), of the float64 array numpy makes of them
            # (which holds each int exactly up to 2**53)
            return spec._replace(kind="items",
                                 types=tuple(type(item).__name__ for item in value))
        return spec._replace(kind="sequence")
    return spec


def _int_sequence(value: Any) -> bool:
    """A tuple or list of Python ints (or of such tuples and lists)."""
    return type(value) in (tuple, list) and all(type(item) is int or _int_sequence(item)
                                                for item in value)


# A static value's arrays up to this size are told apart by their contents (an options
# object's weights changed in place); larger ones by identity.
_ARRAY_KEY_BYTES = 1 << 16


def _changes_in_place(value: Any) -> bool:
    """Whether a value's contents can change while it stays the same object: an array,
    a list, dict or set, an object with fields, or a tuple holding one."""
    if value is None or isinstance(value, (int, float, complex, str, bytes, np.generic,
                                           type, types.FunctionType, types.ModuleType)):
        return False
    if type(value) is tuple or type(value) is frozenset:
        return any(_changes_in_place(item) for item in value)
    return isinstance(value, (np.ndarray, list, dict, set)) or bool(pytree.fields(value))


def _value_key(value: Any, _open: frozenset[int] = frozenset()) -> Any:
    """What tells a static value apart from others (hashable): floats by their bits
    (``-0.0`` is not ``0.0``, a NaN is itself), numpy scalars by their dtype too
    (``np.int8(3)`` is not ``np.int64(3)``, a datetime's unit counts), lists as tuples
    marked apart, a dict by its items, a small array by its dtype and contents (an object
    array by its items' keys), a slice by its parts, an object by its fields' values too,
    a bound method by its instance's, a function by identity, an unhashable one by ``==``
    (``_Equal``).  An object met again inside itself (a cycle) is keyed by identity."""
    if type(value) is float:
        return value.hex()
    if type(value) is complex:
        return (value.real.hex(), value.imag.hex())
    if type(value) is bool:  # (True == 1, but a bool and an int compute otherwise)
        return (bool, value)
    if isinstance(value, np.generic) and value.dtype.kind != "O":
        return (np.generic, value.dtype, value.tobytes())
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, np.ufunc, type,
                          Jitted)):
        return _Identity(value)
    if id(value) in _open:
        return _Identity(value)
    inner = _open | {id(value)}
    if type(value) in (list, tuple):
        items = tuple(_value_key(item, inner) for item in value)
        return (list, items) if type(value) is list else items
    if isinstance(value, slice):
        return (slice, _value_key(value.start, inner), _value_key(value.stop, inner),
                _value_key(value.step, inner))
    if isinstance(value, (set, frozenset)):
        return (type(value), frozenset(_value_key(item, inner) for item in value))
    if type(value) is dict:  # (its items now: a change in place is a new value)
        return (dict, tuple((_value_key(key, inner), _value_key(item, inner))
                            for key, item in value.items()))
    if type(value) is np.ndarray and value.nbytes <= _ARRAY_KEY_BYTES:
        if value.dtype.hasobject:
            return (np.ndarray, value.dtype, value.shape,
                    tuple(_value_key(item, inner) for item in value.ravel().tolist()))
        return (np.ndarray, value.dtype, value.shape, value.tobytes())
    if isinstance(value, types.MethodType):  # (its instance's fields count)
        return (types.MethodType, _Identity(value.__func__), _value_key(value.__self__, inner))
    state = pytree.fields(value)
    if state:
        # an options object: its fields' values too (Opt(2) == Opt(2.0), but an int
        # and a float compute otherwise)
        value = (value, _value_key(tuple(sorted(state.items(), key=lambda item: item[0])),
                                   inner))
    try:
        hash(value)
    except TypeError:
        return _Equal(value)
    return value


class _Equal:
    """An unhashable static value (a dataclass of options) compared by ``==`` (by
    identity where ``==`` gives no bool)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Equal) or type(other.value) is not type(self.value):
            return False
        try:
            return bool(other.value == self.value)
        except Exception:  # (arrays among its fields)
            return other.value is self.value

    def __hash__(self) -> int:
        return hash(type(self.value))

    def __repr__(self) -> str:
        return repr(self.value)


def _exact_key(args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The key of ``Jitted._calls`` for ``args``: each plain ndarray's shape and dtype,
    each Python number's type; None when an argument is anything else (no plan kept)."""
    key: tuple[Any, ...] = ()
    for value in args:
        kind = type(value)
        if kind is _ndarray:
            key += (value.shape, value.dtype)
        elif kind is float or kind is int or kind is complex:
            key += (kind,)
        else:
            return None
    return key


def _guard(key: tuple[Any, ...], plan: CallPlan, program: Program,
           out_keyword: bool = True) -> Guards:
    """The guards of the plan of arguments of the kind ``key`` (a key of
    ``Jitted._calls``) describes: ``guard(*args)`` tells whether arguments are of exactly
    that kind — as many, each plain ndarray of its shape and dtype (the same dtype
    object: an equal one fails the guard and is looked up by its key), each Python number
    of its type —, without building their key; ``direct(*args)`` is, for such arguments
    when the plan's loop is one the thread policy does not split and the memory pool does
    not serve, ``plan.gufunc`` of the kernel's operands (the small call's whole work; see
    ``CallPlan``), and ``_MISS`` otherwise; ``call(jitted, *args, **kwargs)``, the
    ``__call__`` of a ``Jitted`` whose latest kind this is: ``direct``'s gufunc call, else
    the plan's ``run`` for such arguments, ``program`` writing into numpy's ``out=`` for
    such arguments with that keyword (``Jitted._into``; when ``out_keyword``, the
    function having no parameter of that name) — the gufunc writing into it directly when
    it fits the plan's ``outputs`` and the loop is not split —, else ``Jitted.__call__``.
    They are written out
    as expressions (``exec``): about a third of the key's cost, and one Python call for a
    small call's dispatch."""
    tests: list[str] = []
    constants: dict[str, Any] = {"ndarray": _ndarray, "MISSING": _MISSING, "MISS": _MISS,
                                 "gufunc": plan.gufunc, "policy": plan.policy,
                                 "memory": memory, "LOOP": plan.loop, "plan": plan,
                                 "run_plan": Jitted._run_plan, "generally": _generally,
                                 "failed": Jitted._direct_failed, "into": Jitted._into,
                                 "program": program}
    parts = iter(key)
    count = 0
    for part in parts:
        name = f"a{count}"
        if isinstance(part, tuple):  # an array's shape, then its dtype
            constants[f"s{count}"], constants[f"d{count}"] = part, next(parts)
            tests.append(f"type({name}) is ndarray and {name}.shape == s{count} "
                         f"and {name}.dtype is d{count}")
        else:  # a Python number's type
            constants[f"k{count}"] = part
            tests.append(f"type({name}) is k{count}")
        count += 1
    names = [f"a{index}" for index in range(count)]
    parameters = "".join(f"{name}=MISSING, " for name in names)
    if plan.operands is None:
        arguments = ", ".join(names)
    else:  # the kernel's operands: arguments picked and reshaped as the plan says
        picked = []
        for position, (slot, shape) in enumerate(plan.operands):
            constants[f"r{position}"] = shape
            picked.append(f"a{slot}" if shape is None else f"a{slot}.reshape(r{position})")
        arguments = ", ".join(picked)
    test = " and ".join(["not rest", *tests])
    small = "LOOP < policy.small and LOOP < memory.pooled_from"
    if plan.unit_strides is not None:  # a whole reduction: operands of unit stride
        small = " and ".join([small, *(f"a{slot}.strides[-1] == {itemsize}"
                                       for slot, itemsize in plan.unit_strides)])
    given = "".join(f"{name}, " for name in names)
    # out= arrays the gufunc can write into as they are: the results' own shapes and
    # dtypes, C-contiguous (numpy's gufunc copies an operand that overlaps one of them)
    fits = "False"
    if plan.outputs is not None and out_keyword:
        targets = ["out"] if program.single else \
            [f"out[{index}]" for index in range(len(plan.outputs))]
        checks = [] if program.single else [f"type(out) is tuple and len(out) == "
                                            f"{len(plan.outputs)}"]
        for index, ((shape, dtype), target) in enumerate(zip(plan.outputs, targets,
                                                             strict=True)):
            constants[f"os{index}"], constants[f"od{index}"] = shape, dtype
            checks.append(f"type({target}) is ndarray and {target}.shape == os{index} and "
                          f"{target}.dtype is od{index} and {target}.flags.c_contiguous")
        fits = " and ".join(checks)
    exec(f"def guard({parameters}*rest):\n"
         f"    return {test}\n"
         f"def direct({parameters}*rest):\n"
         f"    if {test} and {small}:\n"
         f"        return gufunc({arguments})\n"
         f"    return MISS\n"
         f"def call(self, {parameters}/, *rest, **options):\n"
         f"    if not options and {test}:\n"
         f"        if {small}:\n"
         f"            try:\n"
         f"                return gufunc({arguments})\n"
         f"            except (ValueError, OverflowError) as error:\n"
         f"                return failed(self, ({given}), error)\n"
         f"        return run_plan(self, plan, ({given}))\n"
         f"    if options and {test}:\n"
         f"        out = options.get('out')\n"
         f"        if len(options) == 1 and LOOP < policy.small and {fits}:\n"
         f"            try:\n"
         f"                return gufunc({arguments}{', ' if arguments else ''}out=out)\n"
         f"            except (ValueError, OverflowError):\n"
         f"                pass  # numpy's error, or the general path's, from the program\n"
         f"        return into(self, program, ({given}), options)\n"
         f"    return generally(self, {given}*rest, **options)\n", constants)
    return Guards(constants["guard"], plan, constants["direct"], constants["call"])


_GENERAL: Any = object()  # Jitted._signature_call's "take the general path"


def _describe_key(key: tuple[Any, ...]) -> str:
    return ", ".join(part.describe() if isinstance(part, ArgSpec) else repr(part[-1])
                     for part in key)


def _lookup(module: Any, qualname: str) -> Any:
    target = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target


# The leaves of the call ``Jitted._with_containers`` is making and its bound arguments,
# holding the caller's own containers.
_CONTAINERS: contextvars.ContextVar[tuple[list[Any], tuple[Any, ...]] | None] = \
    contextvars.ContextVar("numfuse_containers", default=None)


def _compares_identity(fn: Any) -> bool:
    """Whether ``fn``'s code (its nested functions' too) compares two values with ``is``
    or ``is not`` (not with a constant: ``x is None`` is no comparison of arguments)."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    pending = [code] if isinstance(code, types.CodeType) else []
    while pending:
        code = pending.pop()
        pending.extend(const for const in code.co_consts if isinstance(const, types.CodeType))
        previous = None
        for instruction in dis.get_instructions(code):
            if instruction.opname == "IS_OP" and previous != "LOAD_CONST":
                return True
            previous = instruction.opname
    return False


def _one_array_twice(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether one ndarray is given as two of the arguments."""
    seen: set[int] = set()
    for value in (*args, *kwargs.values()):
        if isinstance(value, np.ndarray):
            if id(value) in seen:
                return True
            seen.add(id(value))
    return False


_DASK_OUT = ("out= takes numpy arrays to write the results into; the results of dask "
             "arguments are dask arrays, computed when asked: assign them instead (or "
             "compute the arguments first).")


def _holds_dask_array(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """True if an argument is a dask array (never imports dask itself)."""
    module = sys.modules.get("dask.array")
    array_type = getattr(module, "Array", None)
    return array_type is not None and any(
        isinstance(value, array_type) for value in (*args, *kwargs.values()))


def _structured(value: Any) -> bool:
    """Whether an argument is a container of arguments: a dict, a namedtuple, or a list or
    tuple holding an array or a dict (an MLP's weights; ``(np.float32(2), x)``).  Its leaves are the
    arguments; a list or tuple of numbers stays one argument (an array)."""
    if isinstance(value, dict) or (_namedtuple(value) and not _int_tuple(value)):
        return True  # (a namedtuple is read by field names, never as an array)
    return isinstance(value, (list, tuple)) and any(
        isinstance(item, np.ndarray) or _structured(item) for item in value)


def _unstructured(value: Any) -> bool:
    return not _structured(value)


def _flatten_structured(values: Sequence[Any]) -> tuple[tuple[Any, ...], list[Any]]:
    """(structure, leaves) of arguments: the treedef of each argument, flattening dicts
    and the lists and tuples holding arrays (anything else is a leaf), and all their
    leaves in order."""
    flat = [pytree.flatten(value, _unstructured) for value in values]
    return tuple(treedef for _, treedef in flat), [leaf for leaves, _ in flat for leaf in leaves]


def _rebuilt_changed(rebuilt: Sequence[Any], structure: tuple[Any, ...],
                     leaves: Sequence[Any]) -> bool:
    """Whether the function changed the containers ``rebuilt`` of ``structure`` from
    ``leaves`` (traced values: they stand for the arrays)."""
    def unstructured(value: Any) -> bool:
        if isinstance(value, dict):
            return False
        return not (isinstance(value, (list, tuple)) and any(
            isinstance(item, (np.ndarray, Tracer)) or not unstructured(item)
            for item in value))

    flat = [pytree.flatten(value, unstructured) for value in rebuilt]
    found = [leaf for items, _ in flat for leaf in items]
    return tuple(treedef for _, treedef in flat) != structure or len(found) != len(leaves) \
        or any(value is not leaf for value, leaf in zip(found, leaves, strict=True))


def _unflatten_structured(structure: tuple[Any, ...], leaves: Sequence[Any]) -> list[Any]:
    supply = iter(leaves)
    return [pytree.unflatten(treedef, supply) for treedef in structure]


def _leaf_positions(structure: tuple[Any, ...]) -> dict[int, int]:
    """Where each argument that is not a dict lands among the leaves."""
    positions: dict[int, int] = {}
    count = 0
    for index, treedef in enumerate(structure):
        if treedef is pytree.LEAF:
            positions[index] = count
        count += pytree.size(treedef)
    return positions


def argument_numbers(numbers: Any, name: str) -> tuple[int, ...]:
    """``static_argnums`` as a tuple of ints: an int, or a sequence of them (as jax's)."""
    if isinstance(numbers, (int, np.integer)) and not isinstance(numbers, bool):
        return (int(numbers),)
    try:
        items = tuple(numbers)
    except TypeError:
        items = (numbers,)
    if not all(isinstance(item, (int, np.integer)) and not isinstance(item, bool)
               for item in items):
        raise TypeError(f"{name} must be an int or a sequence of ints, not {numbers!r}")
    return tuple(int(item) for item in items)


def _copied_into(result: Any, out: Any) -> Any:
    """``result`` (of the function run with numpy) stored into ``out`` as the jitted
    call's ``out=`` stores its results (numpy's casting and broadcasting)."""
    single = not isinstance(result, tuple)
    results = [result] if single else list(result)
    targets = out_targets(out, single, all(isinstance(item, np.ndarray) for item in results),
                           len(results))
    for target, value in zip(targets, results, strict=True):
        np.copyto(target, value, casting="same_kind")
    return targets[0] if single else tuple(targets)


def _numpy_may_run(error: Exception) -> bool:
    """Whether numpy should run the function as written after ``error`` kept numfuse from
    compiling it: always but for an argument of another signature than a ``Compiled``'s
    or of a dtype numfuse has no kernel for.
    An error numpy meets too (the function's own ``raise``, a numpy error on these
    values) is then numpy's to raise, without the fallback's warning (``_with_numpy``)."""
    if isinstance(error, UnsupportedDtypeError) and not isinstance(error, ObjectValuesError):
        return False  # an argument's dtype: the error says how to convert it
    return not isinstance(error, SignatureMismatchError)


def _numpy_runs(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[str, str] | None:
    """Why numpy runs the function as written for these arguments (what they hold, and
    how to fuse it instead), or None: an argument of an ndarray subclass with semantics
    of its own (``np.matrix``'s ``*`` multiplies matrices, a masked array skips masked
    elements; ``np.memmap`` computes as an ndarray does), another type defining numpy's
    operations (a pandas Series aligns on its index), an array of dtype object
    (numpy's object loops apply Python's operators to each element), a Python int
    beyond 64 bits, or a random generator (its draws would be frozen)."""
    for value in (*args, *kwargs.values()):
        kind = type(value)
        if kind is not np.ndarray and isinstance(value, np.ndarray) and \
                not isinstance(value, np.memmap):
            return (f"was called with a {kind.__module__}.{kind.__qualname__}, an ndarray "
                    "subclass whose "
                    "operations numfuse cannot trace",
                    "Pass np.asarray(value) to fuse it as a plain array.")
        if kind is not np.ndarray and not isinstance(value, (np.ndarray, np.generic, Tracer)) \
                and (getattr(kind, "__array_ufunc__", None) is not None
                     or hasattr(kind, "__array_function__")):
            return (f"was called with a {kind.__module__}.{kind.__qualname__}, which defines "
                    "numpy's operations its own way (__array_ufunc__: a pandas Series aligns "
                    "on its index)",
                    "Pass np.asarray(value) (or series.to_numpy()) to fuse it.")
        if isinstance(value, (np.ndarray, np.generic)) and not compilable(value.dtype):
            return (f"was called with {'an array' if value.ndim else 'a value'} of dtype "
                    f"{value.dtype}, which numfuse cannot compile (numpy's object, string, "
                    "date and structured dtypes)",
                    "Convert it to a numeric dtype (x.astype(np.float64)) to fuse it.")
        if type(value) is int and not -(2**63) <= value < 2**64:
            return ("was called with a Python integer beyond 64 bits, which numpy keeps as "
                    "a Python object (or converts to a float)",
                    "Pass it as a float to fuse it.")
        if type(value) is int and value >= 2**63:  # kernels take Python ints as int64
            return ("was called with a Python integer beyond int64, which numpy computes "
                    "with as a uint64 (or converts to a float)",
                    "Pass it as a float, or as an array of dtype uint64, to fuse it.")
        if isinstance(value, (np.random.Generator, np.random.RandomState,
                              np.random.BitGenerator)):
            return (f"was called with a {kind.__qualname__}, whose draws a compiled function "
                    "would make once, while traced, and repeat at every call",
                    "Draw the numbers outside and pass them in to fuse it.")
        if isinstance(value, (list, tuple)) and not is_setting(value) and \
                not _int_tuple(value) and _holds_objects(value):
            return ("was called with a list or tuple numpy converts to an array of dtype "
                    "object (Python ints beyond 64 bits, or other objects) or to no array "
                    "(lists of different lengths)",
                    "Pass an array of a numeric dtype (np.asarray(values, np.float64)) "
                    "to fuse it.")
    return None


def _holds_objects(values: list[Any] | tuple[Any, ...]) -> bool:
    """Whether numpy makes an array of dtype object of ``values``, or none at all (a
    ragged list, ``[[1, 2], [3]]``, which ``np.concatenate`` takes as it is).  A sequence
    holding arrays (``out=(a, b)``) is not converted to find out."""
    if any(isinstance(value, np.ndarray) for value in values):
        return False
    try:
        return bool(np.asarray(values).dtype.hasobject)
    except ValueError:  # ragged: numpy's own functions may take it as a list of arrays
        return True
    except (TypeError, OverflowError):
        return False


def _call_signature(fn: Callable[..., Any]) -> inspect.Signature:
    """How calls of ``fn`` bind: its signature, or, for a wrapper (``functools.wraps``)
    taking ``*args``/``**kwargs``, the wrapper's own, so that it gets its arguments as the
    call gave them (the wrapped function's signature would pass its keywords by position,
    and a wrapper reading ``kwargs`` would not see them)."""
    try:
        own = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):  # numpy's dispatchers have only the wrapped one's
        try:
            return inspect.signature(fn)
        except ValueError:  # a builtin with no signature (max): it takes what it is given
            return inspect.Signature([
                inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
                inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])
    code = getattr(fn, "__code__", None)
    # numfuse's own wrapper (value_and_grad's): as is
    own_wrapper = code is not None and in_numfuse(code.co_filename)
    if hasattr(fn, "__wrapped__") and not own_wrapper and any(
            parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
            for parameter in own.parameters.values()):
        return own
    return inspect.signature(fn)


def _by_parameter(fn: Callable[..., Any], signature: inspect.Signature) -> Callable[..., Any]:
    """Call ``fn`` with one positional argument per parameter (keyword-only ones last, as
    ``Jitted._bind`` orders them), passing each the way its parameter takes it and leaving
    out those that are ``DEFAULT`` or missing at the end."""
    names = list(signature.parameters)

    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        given = {name: value for name, value in zip(names, args, strict=False)
                 if value is not DEFAULT}  # numfuse.compile may give fewer: defaults
        bound = inspect.BoundArguments(signature, given)  # type: ignore[arg-type]
        return fn(*bound.args, **bound.kwargs)

    return call


def jit(fn: Callable[..., Any] | None = None, *, static_argnums: int | Sequence[int] = (),
        cache: bool = True, threads: int | None = None, fastmath: Any = False,
        background: bool | None = None) -> Any:
    """Decorate a numpy function so it runs as fused kernels: ``@jit`` or ``@jit(...)``.

    ``cache=False`` keeps its kernels out of the disk cache.  ``threads`` caps the threads
    a large call may use (default: numba's thread count when called from the main thread,
    one thread from any other; see ``numfuse.threads``).  ``fastmath=True`` lets LLVM
    contract and reassociate float operations (results then differ from numpy's in the
    last bits); NaN and infinity checks keep working (``codegen.fastmath_flags``).
    ``background=True`` never waits for the compiler: a call with a new signature traces
    the function, starts compiling its kernels on a worker thread and runs the function
    with numpy, as do later calls until the kernels are ready (``Jitted.wait()`` blocks
    until then; ``numfuse.hooks.register_calls`` reports the path each call took).  The
    default is ``NUMFUSE_BACKGROUND`` (off unless set to 1).
    """
    fastmath_flags(fastmath)  # refuse unknown or NaN-breaking flags now
    if background is None:
        background = background_default()

    def decorate(function: Callable[..., Any]) -> Jitted:
        return Jitted(function, static_argnums=static_argnums, cache=cache, threads=threads,
                      fastmath=fastmath, background=background)

    return decorate if fn is None else decorate(fn)


def _example_signature(fn: Any, example_args: Sequence[Any]
                       ) -> tuple[Callable[..., Any], list[ArgSpec], dict[int, Any],
                                  list[tuple[int, ...]]]:
    """The function to trace, the argument signatures and the static arguments."""
    if isinstance(fn, Jitted):
        fn._notice_instance(example_args)
    static_argnums = {*fn.static_argnums, *fn.auto_static} if isinstance(fn, Jitted) else set()
    function = fn._traced if isinstance(fn, Jitted) else fn
    static = {index: value for index, value in enumerate(example_args)
              if index in static_argnums or is_setting(value)}
    labels = argument_labels(function, len(example_args))
    specs = [spec_of(0) if index in static
             else spec_of(as_operand(value, labels[index]), labels[index])
             for index, value in enumerate(example_args)]
    shapes = [() if index in static else np.shape(value)
              for index, value in enumerate(example_args)]
    return function, specs, static, shapes


def compile(fn: Callable[..., Any], *example_args: Any, cache: bool | None = None,
            threads: int | None = None, fastmath: Any = None) -> Compiled:
    """Trace and compile ``fn`` now for the signatures of ``example_args``.

    A function that reads array sizes (``x.shape``, ``len(x)``) is compiled for the exact
    shapes of ``example_args``.  ``cache=False`` keeps the kernels out of the disk cache;
    ``threads`` and ``fastmath`` are as for ``jit`` (defaults: a ``Jitted``'s own settings).
    """
    _log.info("compiling %s: numfuse.compile called", _name(fn))
    if any(_structured(value) for value in example_args):
        # container arguments: the function of their leaves, called with containers of
        # this structure
        inner, structure, leaves = _of_leaves(fn, example_args)
        compiled = compile(inner, *leaves, cache=cache, threads=threads, fastmath=fastmath)
        compiled.structure = structure
        return compiled
    _refuse_numpys_kinds(fn, example_args)
    function, specs, static, shapes = _example_signature(fn, example_args)
    if cache is None:
        cache = fn.cache if isinstance(fn, Jitted) else True
    if threads is None and isinstance(fn, Jitted):
        threads = fn.threads
    if fastmath is None:
        fastmath = fn.fastmath if isinstance(fn, Jitted) else False
    return _retrying(lambda specs, static: Compiled(function, specs, static, shapes, cache,
                                                    threads, fastmath=fastmath),
                     specs, static, shapes, example_args)


def _refuse_numpys_kinds(fn: Callable[..., Any], example_args: tuple[Any, ...]) -> None:
    """Raise for an example argument of a kind ``jit`` runs numpy for (``_numpy_runs``):
    ``ObjectValuesError`` for a Python int beyond int64, else ``UnsupportedOperationError``
    (an ndarray subclass, a type with numpy's operations of its own, a random generator:
    compiled, the function would compute as if given a plain array).  Arrays, numpy
    scalars and lists are refused by their signatures, which name the argument."""
    for value in example_args:
        if type(value) is np.ndarray or isinstance(value, (np.generic, list, tuple)):
            continue  # (the signature names the argument and its dtype)
        reason = _numpy_runs((value,), {})
        if reason is None:
            continue
        if type(value) is int:
            raise ObjectValuesError(f"{_name(fn)} {reason[0]}. {reason[1]}")
        raise UnsupportedOperationError(f"{_name(fn)} {reason[0]}",
                                        f"{reason[1]} (jit runs such calls with numpy)")


def _of_leaves(fn: Callable[..., Any], example_args: tuple[Any, ...]
               ) -> tuple[Jitted, tuple[Any, ...], list[Any]]:
    """For ``compile``/``trace`` of container arguments: ``Jitted._flat`` of ``fn``."""
    return (fn if isinstance(fn, Jitted) else Jitted(fn))._flat(example_args, {})


def trace(fn: Callable[..., Any], *example_args: Any) -> Graph:
    """The simplified graph of ``fn`` for ``example_args``, annotated with its kernels
    (the leaves of container arguments are its inputs, in order)."""
    if any(_structured(value) for value in example_args):
        inner, _structure, leaves = _of_leaves(fn, example_args)
        return trace(inner, *leaves)
    function, specs, static, shapes = _example_signature(fn, example_args)
    plan, _sources = _retrying(lambda specs, static: _plan(function, specs, static, shapes),
                               specs, static, shapes, example_args)
    return plan.graph


def retry_policy(error: SizeDependentError | StaticArgumentError | CallShapeError,
                 per_shape: bool, static: frozenset[int]) -> tuple[bool, frozenset[int]]:
    """What to compile for after ``error``: (per shape?, arguments static by value).

    The function read array sizes while tracing, or a numpy call's result size did not
    follow the argument sizes as tracing found: compile per shape.  It used a scalar
    argument's value (``axis=n``): make that argument static.  The error is raised again
    when this specialisation already had what it asks for."""
    if isinstance(error, (SizeDependentError, CallShapeError)) and not per_shape:
        return True, static
    if isinstance(error, StaticArgumentError) and set(error.arguments) - static:
        return per_shape, static | frozenset(error.arguments)
    raise error


_ADAPTED = {
    SizeDependentError: "reads array sizes: compiling it per shape",
    CallShapeError: "has a result size tracing did not foresee: compiling it per shape",
    StaticArgumentError: "uses the value of a scalar argument: compiling per value",
}


def _retrying(build: Callable[[list[ArgSpec], dict[int, Any]], _T], specs: list[ArgSpec],
              static: dict[int, Any], shapes: Sequence[tuple[int, ...]],
              example_args: Sequence[Any]) -> _T:
    """``build(specs, static)``, specialised further as ``retry_policy`` says until it
    succeeds."""
    per_shape, fixed = False, frozenset(static)
    while True:
        try:
            return build(_with_sizes(specs, shapes) if per_shape else specs,
                         {**static, **{index: example_args[index] for index in fixed
                                       if index not in static}})
        except (SizeDependentError, StaticArgumentError) as error:
            per_shape, fixed = retry_policy(error, per_shape, fixed)


def _sized(spec: ArgSpec, value: Any, per_shape: bool) -> ArgSpec:
    """The spec with its exact shape when compiling per shape."""
    return spec._replace(sizes=np.shape(value)) if per_shape and spec.kind in (
        "array", "items", "sequence") else spec


def _with_sizes(specs: Sequence[ArgSpec], shapes: Sequence[tuple[int, ...]]) -> list[ArgSpec]:
    return [spec._replace(sizes=tuple(shape)) if spec.kind in ("array", "items", "sequence")
            else spec
            for spec, shape in zip(specs, shapes, strict=True)]


def _after_fork_in_child() -> None:
    """A forked child has only the thread that forked: the locks other threads held (a
    Jitted compiling) are fresh, and compiles under way in the parent's background thread
    start again when called for."""
    _kernel_lock.release()
    for jitted in list(_JITTED):
        jitted._lock = threading.RLock()
        jitted._building.clear()
        jitted._pending.clear()


# A fork while another thread compiles a kernel waits for that kernel (the kernel lock is
# held across the fork).
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_kernel_lock.acquire, after_in_parent=_kernel_lock.release,
                        after_in_child=_after_fork_in_child)
