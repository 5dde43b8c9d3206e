"""Runtime: execute a partitioned graph with its compiled kernels.

A ``Program`` is built once per signature.  It numbers every value the run needs (the
arguments, array constants and region outputs) and precomputes, for every kernel operand,
how to present it: which length-1 axes to drop and whether its core axis must be made
contiguous (a kernel declares its ``(n)`` arrays contiguous, and numba would silently read
a strided view wrongly, so a non-unit-stride operand is copied first).  Calling the program
then does no tracing and builds nothing: it walks the prepared steps.

Outputs are allocated by numpy inside the gufunc call.  Caller arrays are never written.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import kernel_lib, pytree, reductions, threads
from .calls import NumpyCall
from .errors import CallShapeError
from .graph import CONST, ELEMENTWISE, INPUT, NUMPY, Node, shape_text
from .kernel import Kernel
from .partition import Plan
from .reductions import Reduction

Prepare = Callable[[Any], Any]


def _contiguous_core(value: Any) -> Any:
    """A ``(n)`` operand must have unit stride along its last axis (copy otherwise)."""
    if value.strides[-1] != value.itemsize and value.shape[-1] > 1:
        return np.ascontiguousarray(value)
    return value


def _preparer(squeeze: tuple[int, ...], contiguous: bool, as_vector: bool) -> Prepare | None:
    """How to present one operand to its kernel; None when it passes through unchanged."""
    if as_vector:
        return lambda value: np.reshape(value, (1,))
    if squeeze and contiguous:
        return lambda value: _contiguous_core(value.squeeze(squeeze))
    if squeeze:
        return lambda value: value.squeeze(squeeze)
    if contiguous:
        return _contiguous_core
    return None


class _Step:
    """One kernel call: present the operands, call the gufunc, store the outputs.

    When ``flatten`` is set (a region with two or more non-unit axes whose scalar operands
    are true scalars), same-shape C-contiguous operands are passed as one long 1-d loop
    instead of one short core loop per row.
    """

    __slots__ = ("core", "cost", "donations", "dropped", "finish", "flatten", "folds", "gain",
                 "large", "measured", "operands", "out_dtypes", "out_slots", "placeholder",
                 "rows", "settings", "small", "ufunc", "vector")

    def __init__(self, ufunc: Any, operands: tuple[tuple[int, Prepare | None, bool], ...],
                 out_slots: tuple[int, ...], finish: Prepare | None, flatten: bool,
                 folds: tuple[_Fold | None, ...] = (), *, settings: Settings | None = None,
                 cost: float = 1e-9, out_dtypes: tuple[np.dtype, ...] = (),
                 rows: bool = False, dropped: tuple[int, ...] = (), vector: bool = False,
                 donations: tuple[tuple[int, int], ...] = (), placeholder: bool = False
                 ) -> None:
        self.ufunc = ufunc
        self.operands = operands
        self.out_slots = out_slots
        self.finish = finish
        self.flatten = flatten
        self.folds = folds  # per output: how to complete a fused reduction, or None
        self.core = next((index for index, (_slot, _prepare, core) in enumerate(operands)
                          if core), 0)
        self.settings = settings or Settings()
        self.out_dtypes = out_dtypes
        self.rows = rows  # a scalar-core operand may vary along the loop's rows
        self.dropped = dropped  # length-1 axes removed from every operand
        # (output slot, operand index): outputs the kernel wrote into an operand's buffer;
        # a placeholder output (when that is all of them) is dropped.
        self.donations = donations
        self.placeholder = placeholder
        self.vector = vector  # no non-unit axis: the kernel runs on length-1 arrays
        self.cost = cost  # seconds per loop element, measured on single-threaded calls
        self.small = int(threads.PARALLEL_MIN_SECONDS / cost)  # fewer elements: one thread
        self.measured = False  # cost is a guess until a single-threaded call measured it
        self.gain = 2.0  # how much faster split calls were than the estimate (running mean)
        self.large = 0  # calls that went through _large

    def run(self, values: list[Any], outs: Sequence[Any] | None = None) -> None:
        """Compute the outputs into ``values``; ``outs`` (one array or None per output)
        are arrays of the outputs' full shapes for the kernel to write into."""
        operands = [values[slot] if prepare is None else prepare(values[slot])
                    for slot, prepare, _core in self.operands]
        shape = self._flat_shape(operands) if self.flatten else None
        if shape is not None and outs is not None and not all(
                out is None or out.flags.c_contiguous for out in outs):
            shape = None  # an output that cannot be viewed as one long loop
        if shape is not None:
            operands = [value.reshape(-1) if core else value
                        for value, (_slot, _prepare, core) in zip(operands, self.operands,
                                                                  strict=True)]
        presented = None if outs is None else tuple(self._present(out, shape is not None)
                                                    for out in outs)
        try:
            if operands and (operands[self.core].size >= self.small or
                             (self.rows and self._loop_bound(operands) >= self.small)):
                results = self._large(operands, presented)
            elif presented is not None:
                results = self.ufunc(*operands, out=presented)
            else:
                results = self.ufunc(*operands)
        except ValueError:
            widened = _widened(values, self.operands)
            if widened is None:
                _raise_broadcast_error([values[slot] for slot, _prepare, _core in self.operands])
                raise
            self.run(widened, outs)
            for slot in self.out_slots:
                values[slot] = widened[slot]
            return
        if self.donations:
            self._donated(values, operands)
        if self.placeholder:
            results = ()
        elif len(self.out_slots) == 1:
            results = (results,)
        finish = self.finish
        if shape is None and finish is None and not self.folds:
            for slot, result in zip(self.out_slots, results, strict=False):  # common case
                values[slot] = result
            return
        for position, (slot, result) in enumerate(zip(self.out_slots, results, strict=True)):
            fold = self.folds[position] if self.folds else None
            if fold is not None:
                length = np.shape(operands[self.core])[-1] if operands else 1
                values[slot] = fold.complete(result, length, shape is not None)
                continue
            if presented is not None and presented[position] is not None:
                values[slot] = outs[position]  # type: ignore[index]
                continue
            if shape is not None:
                result = result.reshape(shape)
            values[slot] = result if finish is None else finish(result)

    def _loop_bound(self, operands: Sequence[Any]) -> int:
        """At least the loop's element count (cheap): the core operand's size times the
        largest scalar-core operand's, which may add rows (an outer broadcast)."""
        extra = max((np.size(value) for value, (_slot, _prepare, core)
                     in zip(operands, self.operands, strict=True) if not core), default=1)
        return int(operands[self.core].size * extra)

    def _donated(self, values: list[Any], operands: list[Any]) -> None:
        """Outputs written into an operand: the operand's array, full shape (or the copy
        the kernel really wrote, if presenting the operand had to copy it)."""
        for out_slot, operand in self.donations:
            written, original = operands[operand], values[self.operands[operand][0]]
            if written is original or np.may_share_memory(written, original):
                values[out_slot] = original
            else:
                values[out_slot] = np.reshape(written, np.shape(original))

    def _present(self, out: Any, flattened: bool) -> Any:
        """An output array as the kernel sees it (a view without the dropped axes), or
        None when the kernel cannot write into it: its ``(n)`` outputs must have unit
        stride, or numba would write them as if they had."""
        if out is None:
            return None
        if flattened:
            view = out.reshape(-1)
        elif self.vector:
            view = out.reshape((1,))
        else:
            view = np.squeeze(out, self.dropped) if self.dropped else out
        if view.ndim and view.strides[-1] != view.itemsize and view.shape[-1] > 1:
            return None
        return view

    def _large(self, operands: list[Any], presented: Sequence[Any] | None = None) -> Any:
        """A call that may be worth splitting across threads (see ``threads``)."""
        cores = [core for _slot, _prepare, core in self.operands]
        rows = np.broadcast_shapes(*(np.shape(value)[:-1] if core else np.shape(value)
                                     for value, core in zip(operands, cores, strict=True)))
        length = np.shape(operands[self.core])[-1]
        elements = length * math.prod(rows)
        expected = self.cost * elements
        self.large += 1
        count = threads.chunk_count(expected, elements,
                                    threads.resolve(self.settings.threads,
                                                    self.settings.default_threads))
        paying = self.gain >= threads.MIN_GAIN or self.large % threads.RETRY_EVERY == 0
        if count > 1 and self.measured and paying:
            split = _split_plan(length, rows, count)
            if split is not None:
                start = time.perf_counter()
                results = self._split(operands, cores, rows, length, presented, *split)
                observed = expected / max(time.perf_counter() - start, 1e-9)
                self.gain = 0.7 * self.gain + 0.3 * observed
                return results
        start = time.perf_counter()
        results = self.ufunc(*operands) if presented is None else \
            self.ufunc(*operands, out=presented)
        if elements >= _CALIBRATE_ELEMENTS:  # learn this kernel's cost per element
            measured = (time.perf_counter() - start) / elements
            self.cost = measured if not self.measured else 0.5 * self.cost + 0.5 * measured
            self.measured = True
            self.small = int(threads.PARALLEL_MIN_SECONDS / self.cost)
        return results

    def _split(self, operands: list[Any], cores: list[bool], rows: tuple[int, ...],
               length: int, presented: Sequence[Any] | None, along_core: bool,
               bounds: list[int]) -> Any:
        """Run the call in chunks of the core axis (or of the first row axis) on threads,
        writing into preallocated outputs; per-chunk partial reductions are combined."""
        count = len(bounds) - 1
        outputs: list[Any] = []
        given = presented or (None,) * len(self.out_dtypes)
        for dtype, fold, out in zip(self.out_dtypes, self.folds or (None,) * len(given), given,
                                    strict=True):
            if out is not None:
                outputs.append(out)
            elif self.placeholder:
                outputs.append(None if along_core else np.empty(rows, dtype))
            elif fold is None:
                outputs.append(np.empty((*rows, length), dtype))
            else:
                outputs.append(None if along_core else np.empty(rows, dtype))
        partials: list[Any] = [None] * count
        depth = len(rows)

        def piece(value: Any, core: bool, start: int, stop: int) -> Any:
            if along_core:
                return value[..., start:stop] if core else value
            dims = np.ndim(value) - (1 if core else 0)
            if dims < depth or np.shape(value)[0] == 1:
                return value  # broadcast along the split axis
            return value[start:stop]

        def work(index: int) -> None:
            start, stop = bounds[index], bounds[index + 1]
            chunk = [piece(value, core, start, stop) for value, core in zip(operands, cores,
                                                                           strict=True)]
            out = tuple(None if target is None else
                        (target[..., start:stop] if along_core else target[start:stop])
                        for target in outputs)
            result = self.ufunc(*chunk, out=out)
            partials[index] = result if isinstance(result, tuple) else (result,)

        threads.run_chunks(work, count, threads.resolve(self.settings.threads,
                                                        self.settings.default_threads))
        results = []
        for position, target in enumerate(outputs):
            if target is not None or self.placeholder:
                results.append(target)
                continue
            fold = self.folds[position]
            assert fold is not None
            ufunc = getattr(np, fold.reduction.ufunc)
            stacked = np.stack([np.asarray(part[position]) for part in partials])
            results.append(ufunc.reduce(stacked, axis=0, dtype=fold.reduction.dtype))
        return tuple(results) if len(results) > 1 else results[0]

    def _flat_shape(self, operands: list[Any]) -> tuple[int, ...] | None:
        shape = None
        for value, (_slot, _prepare, core) in zip(operands, self.operands, strict=True):
            if not core:
                continue
            if shape is None:
                shape = value.shape
            if value.shape != shape or not value.flags.c_contiguous:
                return None
        return shape


class Settings:
    """Run-time options shared by a program's steps: ``threads`` (None: automatic) and
    the default thread count (numba's setting, injected by the caller)."""

    __slots__ = ("default_threads", "threads")

    def __init__(self, threads: int | None = None,
                 default_threads: Callable[[], int] = lambda: 1) -> None:
        self.threads = threads
        self.default_threads = default_threads


_CALIBRATE_ELEMENTS = 16384
# Initial cost guesses (seconds per element), replaced by measurements.
_BASE_COST, _OP_COST, _TRANSCENDENTAL_COST = 1e-9, 0.3e-9, 4e-9
_TRANSCENDENTAL = frozenset({
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
    "power", "float_power", "cbrt", "logaddexp", "logaddexp2", "hypot",
})


def _split_plan(length: int, rows: tuple[int, ...], count: int
                ) -> tuple[bool, list[int]] | None:
    """Cut the loop along the core axis when it is long, else along the first row axis:
    (along_core, chunk bounds), or None when neither is worth it."""
    minimum = threads.MIN_CHUNK_ELEMENTS
    if length >= 2 * minimum:
        count = min(count, length // minimum)
        step = length / count
        bounds = [min(length, round(index * step / 64) * 64) for index in range(count)]
        return True, [*bounds, length]
    if rows and rows[0] >= 2:
        count = min(count, rows[0])
        step = rows[0] / count
        return False, [round(index * step) for index in range(count)] + [rows[0]]
    return None


class _Fold:
    """Completes a reduction a kernel folded into its loop (see ``reductions.finish``).

    The kernel leaves one partial result per row of its core loop, shaped like the
    region's kept (non-unit) axes minus the core axis, or 0-d when the loop was flattened;
    ``remaining`` are the partials' axes still to reduce and ``template`` numpy's result
    shape, with -1 where the size comes from the completed partials.
    """

    __slots__ = ("direct", "reduction", "remaining", "template")

    def __init__(self, reduction: Reduction, remaining: tuple[int, ...],
                 template: tuple[int, ...]) -> None:
        self.reduction = reduction
        self.remaining = remaining
        self.template = template
        # A whole 1-d reduction without division: the one partial is the result.
        self.direct = not remaining and not template and reduction.divide is None

    def complete(self, partials: Any, length: int, flattened: bool) -> Any:
        if self.direct and (length or self.reduction.ufunc not in ("maximum", "minimum")):
            if isinstance(partials, np.ndarray):
                return partials.reshape(())[()]
            return partials
        remaining = () if flattened else self.remaining
        count = length
        for axis in remaining:
            count *= partials.shape[axis]
        if flattened:  # one partial (its loop axes, if any, come from length-1 scalars)
            partials = np.reshape(partials, ())
            shape = tuple(1 for _ in self.template)
        else:
            sizes = iter([size for axis, size in enumerate(np.shape(partials))
                          if axis not in remaining])
            shape = tuple(next(sizes) if size < 0 else size for size in self.template)
        return reductions.finish(self.reduction, partials, remaining, count, shape)


class _CallStep:
    """A non-fusible numpy operation, run by numpy itself on the run-time values."""

    __slots__ = ("call", "dtype", "inputs", "out_slot", "shape")

    def __init__(self, call: NumpyCall, inputs: tuple[int, ...], out_slot: int,
                 node: Node) -> None:
        self.call = call
        self.inputs = inputs
        self.out_slot = out_slot
        self.dtype = node.dtype
        self.shape = node.shape

    def run(self, values: list[Any]) -> None:
        result = self.call.invoke([values[slot] for slot in self.inputs])
        shape = np.shape(result)
        dtype = getattr(result, "dtype", None)
        if dtype is None or (dtype != self.dtype and dtype.newbyteorder("=") != self.dtype) \
                or len(shape) != len(self.shape) or \
                any(size != fixed for size, fixed in zip(shape, self.shape, strict=True)
                    if fixed is not None):
            raise CallShapeError(
                f"{self.call.name} returned {np.asarray(result).dtype}{shape_text(shape)} "
                f"where tracing found {self.dtype}{shape_text(self.shape)}: its result "
                "depends on the values (or, compiled by numfuse.compile, on other sizes than "
                "the example's), which numfuse cannot trace; compute it outside the jitted "
                "function.")
        values[self.out_slot] = result


class Program:
    """The executable form of a plan: ``program(args) -> result`` in the traced structure."""

    def __init__(self, plan: Plan, kernels: Sequence[Kernel],
                 settings: Settings | None = None) -> None:
        self.settings = settings = settings or Settings()
        graph = plan.graph
        slots: dict[Node, int] = {node: index for index, node in enumerate(graph.inputs)}
        initial: list[Any] = []
        steps: list[_Step | _CallStep] = []
        kernel_of = {kernel.region: kernel for kernel in kernels}

        def slot_of(node: Node) -> int:
            if node not in slots:
                slots[node] = len(slots)
                initial.append(node.param("value").value if node.kind == CONST else None)
            return slots[node]

        for step in plan.steps or plan.regions:
            if isinstance(step, Node):
                inputs = tuple(slot_of(source) for source in step.inputs)
                steps.append(_CallStep(step.param("call"), inputs, slot_of(step), step))
                continue
            kernel = kernel_of[step]
            for node in (*step.inputs, *step.outputs):
                slot_of(node)
            steps.append(_make_step(kernel, slots, settings))
        self.initial = tuple(initial)
        self.steps = tuple(steps)
        # How each returned leaf is produced: from a slot as is, or through a conversion.
        self.returns = tuple(
            (slots.get(node, -1), None if _returned_as_is(node) else node)
            for node in graph.outputs
        )
        # numpy returns a distinct array for every separately computed result, even for
        # equal expressions merged by CSE; one value returned twice stays one object.
        same_as = graph.same_as or tuple(range(len(graph.outputs)))
        self.aliases = tuple((position, first) for position, first in enumerate(same_as)
                             if first != position)
        self.repeated = tuple(
            position for position, node in enumerate(graph.outputs)
            if same_as[position] == position and node.kind == ELEMENTWISE
            and node in graph.outputs[:position]
        )
        self.treedef = graph.treedef
        self.single = graph.treedef is pytree.LEAF
        self.flat_tuple = pytree.is_flat_tuple(graph.treedef, len(graph.outputs))
        self.int_guards = _int_guards(graph)
        # Returned leaves a kernel can write straight into a caller's out= array.
        self.writable = {
            position: (index, step.out_slots.index(slot))
            for position, (slot, convert) in enumerate(self.returns)
            for index, step in enumerate(self.steps)
            if convert is None and isinstance(step, _Step) and slot in step.out_slots
            and not (step.folds and step.folds[step.out_slots.index(slot)] is not None)
            and position not in self.repeated and same_as[position] == position
            and self.returns.index((slot, convert)) == position
        }
        self.fast = _fast_path(self, len(graph.inputs))

    def __call__(self, args: Sequence[Any], out: Any = None) -> Any:
        if self.int_guards:
            _check_int_arguments(self.int_guards, args)
        if out is not None:
            return self._into(args, out)
        values = [*args, *self.initial]
        for step in self.steps:
            step.run(values)
        leaves = [values[slot] if convert is None
                  else _returned(values[slot] if slot >= 0 else None, convert)
                  for slot, convert in self.returns]
        if self.repeated or self.aliases:
            for position in self.repeated:
                if isinstance(leaves[position], np.ndarray):
                    leaves[position] = leaves[position].copy()
            for position, first in self.aliases:
                leaves[position] = leaves[first]
        if self.single:
            return leaves[0]
        if self.flat_tuple:
            return tuple(leaves)
        return pytree.unflatten(self.treedef, leaves)


    def _into(self, args: Sequence[Any], out: Any) -> Any:
        """Run with the results written into ``out`` (numpy's ``out=``): an array for a
        function returning one array, a tuple of arrays for a flat tuple of results.
        Kernel outputs are written in place; anything else is copied in ('same_kind'
        casting); if an out array shares memory with an argument, every result is
        computed first and then copied, so the answer is numpy's."""
        targets = _out_targets(out, self.single, self.flat_tuple, len(self.returns))
        overlapping = any(isinstance(arg, np.ndarray) and np.may_share_memory(arg, target)
                          for arg in args for target in targets)
        outs: dict[int, list[Any]] = {}
        if not overlapping:
            for position, (index, output) in self.writable.items():
                step = self.steps[index]
                assert isinstance(step, _Step)
                if targets[position].shape and targets[position].dtype == step.out_dtypes[output]:
                    outs.setdefault(index, [None] * len(step.out_slots))[output] = \
                        targets[position]
        values = [*args, *self.initial]
        for index, step in enumerate(self.steps):
            if index in outs:
                assert isinstance(step, _Step)
                step.run(values, outs[index])
            else:
                step.run(values)
        leaves = [values[slot] if convert is None
                  else _returned(values[slot] if slot >= 0 else None, convert)
                  for slot, convert in self.returns]
        for position, first in self.aliases:
            leaves[position] = leaves[first]
        for position, target in enumerate(targets):
            if leaves[position] is not target:
                np.copyto(target, leaves[position], casting="same_kind")
        return targets[0] if self.single else tuple(targets)


def _out_targets(out: Any, single: bool, flat_tuple: bool, count: int) -> list[Any]:
    targets = [out] if single and not isinstance(out, tuple) else out
    if not (single or flat_tuple):
        raise TypeError("out= needs a function that returns one array or a flat tuple of "
                        "arrays")
    if not isinstance(targets, (tuple, list)) or len(targets) != count or not all(
            isinstance(target, np.ndarray) for target in targets):
        raise TypeError(f"out= must be {'an array' if single else f'a tuple of {count} arrays'}"
                        ", one for each result the function returns")
    for target in targets:
        if not target.flags.writeable:
            raise ValueError("out= array is read-only")
    return list(targets)


def _fast_path(program: Program, arity: int) -> Callable[..., Any] | None:
    """``program`` as one closure when it is a single kernel whose outputs are returned as
    they come (the common case): the call then costs little more than the gufunc's own."""
    if len(program.steps) != 1 or program.int_guards or program.aliases or program.repeated:
        return None
    step = program.steps[0]
    if not isinstance(step, _Step) or step.folds or step.flatten or step.finish is not None:
        return None
    if [slot for slot, _convert in program.returns] != list(step.out_slots) or any(
            convert is not None for _slot, convert in program.returns):
        return None
    if not (program.single or program.flat_tuple) or any(
            value is not None for value in program.initial) or any(
            slot >= arity for slot, _prepare, _core in step.operands):
        return None
    if not program.single and len(step.out_slots) == 1:
        return None  # a 1-tuple of results: the gufunc returns a bare array
    ufunc, core, general = step.ufunc, step.core, program.__call__
    picks = tuple((slot, prepare) for slot, prepare, _core in step.operands)
    direct = picks == tuple((slot, None) for slot in range(arity))

    def fast(args: Sequence[Any], out: Any = None) -> Any:
        if out is not None:
            return general(args, out)
        operands = args if direct else [args[slot] if prepare is None else prepare(args[slot])
                                        for slot, prepare in picks]
        if operands[core].size >= step.small or (
                step.rows and step._loop_bound(operands) >= step.small):
            return general(args)
        try:
            return ufunc(*operands)
        except ValueError:
            _raise_broadcast_error([args[slot] for slot, _prepare in picks])
            raise

    return fast


def _returned_as_is(node: Node) -> bool:
    """Arguments and kernel outputs with at least one dimension need no conversion."""
    return node.kind == INPUT or (node.kind == NUMPY and not node.weak) or (
        node.kind == ELEMENTWISE and node.ndim > 0)


# Operations that cast their operands unsafely in numpy (no OverflowError for Python ints).
_UNSAFE_CASTS = frozenset({"where", "astype"})


def _check_int_arguments(guards: tuple[tuple[int, np.dtype, int, int], ...],
                         args: Sequence[Any]) -> None:
    for index, dtype, low, high in guards:
        if not low <= args[index] <= high:
            raise OverflowError(f"Python integer {args[index]} out of bounds for {dtype}")


def _int_guards(graph: Any) -> tuple[tuple[int, np.dtype, int, int], ...]:
    """Python int arguments are weak: like numpy, refuse values the dtype they are cast
    to cannot hold (numpy raises OverflowError for ``uint8_array + 300``)."""
    guards = []
    for index, node in enumerate(graph.inputs):
        if not (node.weak and node.dtype.kind == "i"):
            continue
        targets = [dtype for user in graph.consumers.get(node, ())
                   if user.op not in _UNSAFE_CASTS
                   for source, dtype in zip(user.inputs, user.param("loop", ()), strict=False)
                   if source is node and dtype.kind in "iu"]
        if targets:
            low = max(int(np.iinfo(dtype).min) for dtype in targets)
            high = min(int(np.iinfo(dtype).max) for dtype in targets)
            narrowest = min(targets, key=lambda dtype: int(np.iinfo(dtype).max))
            guards.append((index, narrowest, low, high))
    return tuple(guards)


def _widened(values: list[Any], operands: Sequence[tuple[int, Prepare | None, bool]]
             ) -> list[Any] | None:
    """``values`` with each core operand whose last axis is 1 where numpy broadcasting
    makes it longer copied to that length, or None when there is none.  A kernel's core
    axis never broadcasts; a size that depends on the data (``x[mask]``) can be 1 at run
    time where tracing assumed any size."""
    shapes = [np.shape(values[slot]) for slot, _prepare, core in operands if core]
    try:
        length = np.broadcast_shapes(*shapes)[-1] if shapes else 1
    except (ValueError, IndexError):
        return None
    short = {slot for slot, _prepare, core in operands
             if core and np.ndim(values[slot]) and np.shape(values[slot])[-1] == 1}
    if length == 1 or not short:
        return None
    widened = list(values)
    for slot in short:
        value = values[slot]
        widened[slot] = np.broadcast_to(value, (*np.shape(value)[:-1], length)).copy()
    return widened


def _raise_broadcast_error(operands: Sequence[Any]) -> None:
    """Report a size mismatch between a kernel's operands the way numpy would."""
    shapes = [np.shape(value) for value in operands]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        described = " ".join(str(shape).replace(" ", "") for shape in shapes)
        raise ValueError(
            f"operands could not be broadcast together with shapes {described}"
        ) from None


def _returned(value: Any, node: Node) -> Any:
    """Give back what numpy would: scalars for 0-d ufunc results, Python numbers for
    arithmetic on Python numbers, fresh copies of constant arrays."""
    if node.kind == CONST:
        constant = node.param("value").value
        return constant.copy() if isinstance(constant, np.ndarray) else constant
    if node.kind == INPUT or not isinstance(value, np.ndarray):
        return value
    if value.ndim == 0:
        if node.weak:
            return value.item()
        if node.scalar:
            return value[()]
    return value


def _make_step(kernel: Kernel, slots: dict[Node, int], settings: Settings | None = None
               ) -> _Step:
    region, generated = kernel.region, kernel.generated
    ndim, dropped = generated.ndim, generated.dropped_axes
    vector = len(dropped) == ndim
    core_axis = None if vector else max(set(range(ndim)) - set(dropped))
    operands = []
    for node, core in zip(region.inputs, generated.core_inputs, strict=True):
        offset = ndim - node.ndim
        axes = {axis - offset for axis in dropped if axis - offset >= 0}
        if not core and core_axis is not None and core_axis - offset >= 0:
            axes.add(core_axis - offset)
        prepare = _preparer(tuple(sorted(axes)), core and not vector, vector)
        operands.append((slots[node], prepare, core and not vector))
    finish: Prepare | None = None
    if vector:
        shape = (1,) * ndim
        finish = lambda result: result.reshape(shape)  # noqa: E731
    elif dropped:
        finish = lambda result: np.expand_dims(result, dropped)  # noqa: E731
    kept = [axis for axis in range(ndim) if axis not in dropped]
    donated = dict(generated.donated)
    outputs = [node for position, node in enumerate(region.outputs) if position not in donated]
    folds = tuple(None if core else _fold(node.param("reduction"), kept, ndim)
                  for node, core in zip(outputs, generated.core_outputs, strict=False))
    # Flattening needs every broadcast (scalar-core) operand to be a true scalar, and
    # every fused reduction to reduce all the axes being flattened.
    flatten = len(kept) >= 2 and all(
        core or all(size == 1 for size in node.shape)
        for node, core in zip(region.inputs, generated.core_inputs, strict=True)
    ) and all(fold is None or set(kept) <= set(node.param("reduction").axes)
              for fold, node in zip(folds, outputs, strict=True))
    ufunc = kernel.gufunc
    if "power_int" in generated.helpers:
        ufunc = _raising_negative_powers(ufunc)
    cost = _BASE_COST + sum(_TRANSCENDENTAL_COST if node.op in _TRANSCENDENTAL else _OP_COST
                            for node in region.nodes)
    rows = not vector and any(
        not core and any(size != 1 for axis, size in enumerate(node.shape)
                         if axis + ndim - node.ndim != core_axis)
        for node, core in zip(region.inputs, generated.core_inputs, strict=True))
    out_dtypes = tuple(node.dtype for node in outputs)
    if generated.placeholder:
        out_dtypes = (np.dtype(np.uint8),)
    return _Step(ufunc, tuple(operands),
                 tuple(slots[node] for node in outputs), finish, flatten,
                 folds if any(fold is not None for fold in folds) else (),
                 settings=settings, cost=cost, out_dtypes=out_dtypes, rows=rows,
                 dropped=dropped, vector=vector,
                 donations=tuple((slots[region.outputs[position]], operand)
                                 for position, operand in generated.donated),
                 placeholder=generated.placeholder)


def _fold(reduction: Reduction, kept: list[int], ndim: int) -> _Fold:
    rows = kept[:-1]  # the partials' axes: the kept axes but the core one
    remaining = tuple(position for position, axis in enumerate(rows)
                      if axis in reduction.axes)
    template: list[int] = []
    for axis in range(ndim):
        if axis in reduction.axes:
            if reduction.keepdims:
                template.append(1)
        else:
            template.append(-1 if axis in rows else 1)
    return _Fold(reduction, remaining, tuple(template))


def _raising_negative_powers(ufunc: Any) -> Callable[..., Any]:
    """Raise numpy's ValueError when the kernel noted an integer negative power (only
    kernels with integer ``power`` pay for the check)."""
    errors = kernel_lib.kernel_errors

    def call(*operands: Any, **options: Any) -> Any:
        errors.negative_power = False
        results = ufunc(*operands, **options)
        if errors.negative_power:
            raise ValueError(kernel_lib.NEGATIVE_POWER_MESSAGE)
        return results

    return call


def kernel_runner(kernel: Kernel) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """Run one kernel on its own exactly as a program step would: ``run(operands)`` takes
    the values of ``kernel.region.inputs`` in order and returns the values of
    ``kernel.region.outputs`` (used to run a kernel on each block of a chunked array)."""
    return _standalone(kernel, _make_step(kernel, _own_slots(kernel)))


def _own_slots(kernel: Kernel) -> dict[Node, int]:
    """Slots for a kernel run on its own: its inputs, then its outputs."""
    region = kernel.region
    return {node: index for index, node in enumerate((*region.inputs, *region.outputs))}


def _standalone(kernel: Kernel, step: _Step) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """``run(operands) -> outputs`` for ``step`` laid out by ``_own_slots``."""
    count, outputs = len(kernel.region.inputs), (None,) * len(kernel.region.outputs)

    def run(operands: Sequence[Any]) -> tuple[Any, ...]:
        values = [*operands, *outputs]
        step.run(values)
        return tuple(values[count:])

    return run


def block_runner(kernel: Kernel) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """``kernel_runner`` for one block of a chunked array: elementwise outputs as there,
    but each fused reduction comes back as the block's own raw total (``_BlockTotal``),
    for the caller to combine across blocks and divide by the whole count."""
    generated = kernel.generated
    step = _make_step(kernel, _own_slots(kernel))
    kept = [axis for axis in range(generated.ndim) if axis not in generated.dropped_axes]
    step.folds = tuple(None if fold is None else _BlockTotal.of(fold, kept, generated.ndim)
                       for fold in step.folds)
    return _standalone(kernel, step)


class _BlockTotal(_Fold):
    """A fused reduction completed over one block only: reduced over the block's rows as
    ``_Fold.complete`` does, but with every reduced axis kept as length 1 (of the region's
    axes), never divided by the count (``mean``/``var`` divide by the whole array's), and
    the ufunc's identity where the block holds nothing to reduce (a block's max may be
    empty when the array's is not)."""

    __slots__ = ()

    @classmethod
    def of(cls, fold: _Fold, kept: list[int], ndim: int) -> _BlockTotal:
        keeping = _fold(dataclasses.replace(fold.reduction, keepdims=True), kept, ndim)
        return cls(keeping.reduction, keeping.remaining, keeping.template)

    def complete(self, partials: Any, length: int, flattened: bool) -> Any:
        remaining = () if flattened else self.remaining
        if flattened:
            return np.reshape(partials, tuple(1 for _ in self.template))
        sizes = iter([size for axis, size in enumerate(np.shape(partials))
                      if axis not in remaining])
        shape = tuple(next(sizes) if size < 0 else size for size in self.template)
        if remaining:
            reduction = self.reduction
            options = {}
            if reduction.ufunc in ("maximum", "minimum") and any(
                    partials.shape[axis] == 0 for axis in remaining):
                options["initial"] = reduction.identity()
            partials = getattr(np, reduction.ufunc).reduce(partials, axis=remaining,
                                                           dtype=reduction.dtype, **options)
        return np.reshape(partials, shape)
