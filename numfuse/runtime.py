"""Runtime: execute a partitioned graph with its compiled kernels.

A ``Program`` is built once per signature.  It numbers every value the run needs (the
arguments, array constants and step outputs: its *slots*) and turns the plan into steps:
a ``CallStep`` for each non-fusible numpy call and a ``KernelStep`` for each kernel.
Calling the program then does no tracing and builds nothing: it walks the steps.

A kernel step is made of pieces with one job each:

* ``KernelOperands`` prepares the operands: drops the region's length-1 axes, makes each
  ``(n)`` operand contiguous along its core axis (a kernel reads a strided one through
  small buffers, granule by granule; a copy lets it run its contiguous loop, and keeps a
  fused reduction's order of additions), flattens same-shape operands into one long
  loop, and gives the results back their full shape;
* ``ReductionCompletion`` completes a reduction fused into the kernel from its per-row
  partials;
* a *runner* runs the step.  ``LocalRunner`` runs it on the numpy values of this process
  with pluggable gufunc calls: one call in the calling thread (``KernelStep.call``), or
  those of ``threads.ThreadPolicy``, which programs use, cutting large calls into chunks
  that several threads run.  ``numfuse.dask`` has a runner of its own.

``Program.interpret`` is the one loop over a plan's steps, whatever runs them; numpy-call
steps (``CallStep``) and the assembly of the results are the same for every runner.
Two shortcuts skip it for a program of one kernel on its arguments: ``Program.fast``
(any arguments of the signature), and a ``CallPlan`` (``Program.call_plan``) for
arguments of one exact kind, kept by ``api.Jitted``'s call cache, with what can be
decided once for their shapes decided (often nothing is left but the gufunc call).

Floating-point errors: a kernel's gufunc call (and a numpy call) raises numpy's warnings
or ``FloatingPointError`` under the ``np.errstate`` in force, the caller's.  A step whose
work the traced function put under error handling of its own (``np.errstate``, warnings
filters inside the function: ``Node.errstate``) runs inside it (``Governed``); the other
steps, the common case, pay nothing for it.

Large outputs come from the memory pool (``memory.empty``, see ``_pooled_outputs``),
smaller ones are allocated by numpy inside the gufunc call.  Caller arrays are never
written.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, NoReturn, Protocol

import numpy as np

from . import kernel_lib, memory, pytree, reductions, threads
from .calls import TRACED, CallOutput, NumpyCall, Written, setitem_scalar
from .errors import CallShapeError
from .graph import CONST, ELEMENTWISE, INPUT, NUMPY, ErrState, Node, shape_text, toposort
from .kernel import Kernel
from .ops import OPS
from .partition import Plan
from .reductions import Reduction
from .registry import fresh_result

Prepare = Callable[[Any], Any]


# ---------------------------------------------------------------- operand preparation


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


class KernelOperands:
    """How one kernel's operands are presented to its gufunc, and its results given back.

    ``operands`` has one ``(slot, prepare, core)`` per region input, in order: the slot of
    the value, how to present it (None: as it is; the runner applies it) and whether it is
    a ``(n)`` operand, whose last axis is the loop's core axis and has unit stride once
    prepared.  ``core`` is the
    position of the first ``(n)`` operand (0 when there is none).  ``dropped`` are the
    region's length-1 axes, absent from every presented operand and output; ``vector``
    means all its axes are (the kernel runs on 1-element arrays).  ``rows`` means a ``()``
    operand may vary along the loop's rows (an outer broadcast), so the core operand's size
    may undercount the loop.  ``flatten`` means same-shape C-contiguous ``(n)`` operands may
    run as one long 1-d loop instead of one short core loop per row.  ``restore`` puts the
    dropped axes back into a result (None when there are none).
    """

    __slots__ = ("core", "dropped", "flatten", "operands", "passes", "ranks", "restore",
                 "rows", "vector")

    def __init__(self, operands: tuple[tuple[int, Prepare | None, bool], ...],
                 dropped: tuple[int, ...], *, vector: bool, rows: bool, flatten: bool,
                 restore: Prepare | None, passes: Passes | None = None,
                 ranks: tuple[int, ...] | None = None) -> None:
        self.operands = operands
        # the number of core dimensions of each operand: 1 for ``(n)``, 2 for ``(m,n)``
        self.ranks = ranks if ranks is not None else tuple(
            int(core) for _slot, _prepare, core in operands)
        core = [index for index, (_slot, _prepare, core) in enumerate(operands) if core]
        self.core = max(core, key=lambda index: self.ranks[index], default=0)
        self.dropped = dropped
        self.vector = vector
        self.rows = rows
        self.flatten = flatten
        self.restore = restore
        self.passes = passes

    @classmethod
    def of(cls, kernel: Kernel, slots: dict[Node, int],
           fused: Sequence[Reduction]) -> KernelOperands:
        """The presentation of ``kernel``'s operands read from ``slots``; ``fused`` are the
        reductions fused into it (flattening needs each to reduce every flattened axis)."""
        region, generated = kernel.region, kernel.generated
        if generated.reduced:
            passes = Passes(kernel)
            return cls(tuple((slots[node], prepare, core) for node, prepare, core in zip(
                region.inputs, passes.inputs, generated.core_inputs, strict=True)),
                generated.dropped_axes, vector=False, rows=False, flatten=False,
                restore=None, passes=passes, ranks=tuple(
                    int(core) + int(rows) for core, rows in zip(
                        generated.core_inputs, generated.rows_inputs, strict=True)))
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
        restore: Prepare | None = None
        if vector:
            shape = (1,) * ndim
            restore = lambda result: result.reshape(shape)  # noqa: E731
        elif dropped:
            restore = lambda result: np.expand_dims(result, dropped)  # noqa: E731
        kept = _kept_axes(generated.ndim, dropped)
        # Flattening needs every broadcast (scalar-core) operand to be a true scalar, and
        # every fused reduction to reduce all the axes being flattened.
        flatten = len(kept) >= 2 and all(
            core or all(size == 1 for size in node.shape)
            for node, core in zip(region.inputs, generated.core_inputs, strict=True)
        ) and all(set(kept) <= set(reduction.axes) for reduction in fused)
        rows = not vector and any(
            not core and any(size != 1 for axis, size in enumerate(node.shape)
                             if axis + ndim - node.ndim != core_axis)
            for node, core in zip(region.inputs, generated.core_inputs, strict=True))
        return cls(tuple(operands), dropped, vector=vector, rows=rows, flatten=flatten,
                   restore=restore)

    def flattened(self, operands: list[Any]) -> tuple[list[Any], tuple[int, ...]] | None:
        """``operands`` with each ``(n)`` operand as one 1-d loop, and the shape they share,
        when they all have that shape and are C-contiguous; None when they cannot."""
        shape = None
        for value, (_slot, _prepare, core) in zip(operands, self.operands, strict=True):
            if not core:
                continue
            if shape is None:
                shape = value.shape
            if value.shape != shape or not value.flags.c_contiguous:
                return None
        if shape is None:
            return None
        return [value.reshape(-1) if core else value for value, (_slot, _prepare, core)
                in zip(operands, self.operands, strict=True)], shape

    def present(self, out: Any, flattened: bool) -> Any:
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

    def loop_bound(self, operands: Sequence[Any]) -> int:
        """At least the loop's element count (cheap): the core operand's size times the
        largest scalar-core operand's, which may add rows (an outer broadcast)."""
        extra = max((np.size(value) for value, (_slot, _prepare, core)
                     in zip(operands, self.operands, strict=True) if not core), default=1)
        return int(operands[self.core].size * extra)


class Passes:
    """How the operands of a kernel of passes (``codegen.emit_passes``) are presented to
    it, and its outputs made.

    The region's axes are arranged as the gufunc sees them: the other (outer) axes
    first, the accumulated axes merged into one row axis ``m`` (a view wherever numpy can
    make one), the core axis last; length-1 axes are dropped.  ``inputs`` has the
    preparation of each input (None: passed as it is).  Outputs are allocated here in
    numpy's shapes, C-contiguous, and the kernel writes them through views arranged the
    same way (``outputs``).  ``counted`` are the accumulations that may need numpy's
    error or warning for the number of rows (max/min or mean of none, ``var``'s ddof).
    """

    __slots__ = ("counted", "dtypes", "inputs", "limit", "ndim", "outputs", "reduced",
                 "shapes")

    def __init__(self, kernel: Kernel) -> None:
        region, generated = kernel.region, kernel.generated
        self.ndim = ndim = generated.ndim
        self.reduced = generated.reduced
        arrange = _Arrangement(ndim, generated.dropped_axes, generated.reduced)
        # an input lies along the loop's trailing axes, as numpy broadcasts it (a
        # reduction's result computed elsewhere too: x.sum(axis=1) - x.sum(axis=0));
        # only an output reduced here lies along the axes it did not reduce
        self.inputs = tuple(
            None if node.ndim == 0 else
            arrange.preparer(tuple(range(ndim - node.ndim, ndim)), rows, core)
            for node, rows, core in zip(region.inputs, generated.rows_inputs,
                                        generated.core_inputs, strict=True))
        self.dtypes = tuple(node.dtype for node in region.outputs)
        self.shapes: tuple[Callable[[tuple[int, ...]], tuple[int, ...]], ...] = tuple(
            _output_shape(node, ndim) for node in region.outputs)
        self.outputs = tuple(arrange.preparer(_loop_axes(node, ndim), rows, True)
                             for node, rows in zip(region.outputs, generated.rows_outputs,
                                                   strict=True))
        self.counted = tuple(node.reduction for node in region.nodes
                             if node.kind == NUMPY and node.reduction is not None and (
                                 node.reduction.ufunc in ("maximum", "minimum")
                                 or node.reduction.divide is not None))
        # the largest row count for which one of them may warn or raise
        self.limit = max((reduction.ddof if reduction.divide == "ddof" else 0
                          for reduction in self.counted), default=-1)

    def allocate(self, inputs: Sequence[Any]) -> tuple[list[Any], tuple[Any, ...]]:
        """The outputs for these (unprepared) inputs, and their views for the kernel;
        numpy's warning or error first when there are too few rows."""
        shapes = [shape for shape in map(np.shape, inputs) if shape]
        first = shapes[0] if shapes else ()
        loop = first if all(shape == first for shape in shapes) else \
            np.broadcast_shapes(*shapes)
        if len(loop) < self.ndim:
            loop = (1,) * (self.ndim - len(loop)) + tuple(loop)
        if self.limit >= 0:
            count = math.prod(loop[axis] for axis in self.reduced)
            if count <= self.limit:
                for reduction in self.counted:
                    reductions.check_count(reduction, count)
        outputs = [memory.empty(shape(loop), dtype)
                   for shape, dtype in zip(self.shapes, self.dtypes, strict=True)]
        return outputs, tuple(present(output) for present, output in zip(self.outputs, outputs,
                                                                        strict=True))


def _loop_axes(node: Node, ndim: int) -> tuple[int, ...]:
    """The loop axis each axis of the output ``node``'s value lies along: its trailing
    axes, or, for a reduction's result without keepdims, those it did not reduce."""
    reduction = node.reduction
    if node.kind == NUMPY and reduction is not None and not reduction.keepdims:
        return tuple(axis for axis in range(ndim) if axis not in reduction.axes)
    return tuple(range(ndim - node.ndim, ndim))


class _Arrangement:
    """The axes of a region as a kernel of passes sees them (see ``Passes``): the outer
    axes, the reduced ones, the core axis, in this order; length-1 axes dropped."""

    def __init__(self, ndim: int, dropped: tuple[int, ...], reduced: tuple[int, ...]) -> None:
        self.dropped = set(dropped)
        self.core = max(axis for axis in range(ndim) if axis not in dropped)
        self.reduced = set(reduced)
        outer = [axis for axis in range(ndim)
                 if axis not in self.dropped and axis not in self.reduced and axis != self.core]
        self.order = (*outer, *reduced, self.core)

    def preparer(self, axes: tuple[int, ...], rows: bool, core: bool) -> Prepare:
        """How to present a value whose axes lie along the loop's ``axes`` and that varies
        along the rows and/or the core axis: its length-1 axes squeezed out (dropped ones,
        reduced ones when constant along the rows, the core one when constant along it),
        the rest in the kernel's order, the reduced ones merged into one.  Only what
        changes the value is done: a C-contiguous matrix reduced along its first axis
        passes as it is."""
        squeezed = tuple(position for position, axis in enumerate(axes)
                         if axis in self.dropped or (axis in self.reduced and not rows)
                         or (axis == self.core and not core))
        kept = [axis for position, axis in enumerate(axes) if position not in squeezed]
        order = sorted(range(len(kept)), key=lambda position: self.order.index(kept[position]))
        transpose = tuple(order) if order != list(range(len(kept))) else None
        merged = sum(axis in self.reduced for axis in kept)
        merge = rows and merged > 1
        tail = 1 + int(core)  # the merged row axis, then the core axis if there is one

        def prepare(value: Any) -> Any:
            if squeezed:
                value = np.squeeze(value, squeezed)
            if transpose is not None:
                value = np.transpose(value, transpose)
            if merge:
                shape = value.shape
                cut = len(shape) - merged - (tail - 1)
                value = value.reshape((*shape[:cut], math.prod(shape[cut:cut + merged]),
                                       *shape[len(shape) - tail + 1:]))
            if core and value.strides[-1] != value.itemsize and value.shape[-1] > 1:
                value = np.ascontiguousarray(value)
            return value

        return prepare


def _output_shape(node: Node, ndim: int) -> Callable[[tuple[int, ...]], tuple[int, ...]]:
    """numpy's shape of the output ``node`` of a kernel of passes, from the loop's."""
    reduction = node.reduction
    if node.kind == NUMPY and reduction is not None:
        axes, keepdims = reduction.axes, reduction.keepdims
        return lambda loop: tuple(1 if axis in axes else size for axis, size in enumerate(loop)
                                  if keepdims or axis not in axes)
    offset, pattern = ndim - node.ndim, node.shape
    return lambda loop: tuple(1 if size == 1 else loop[axis + offset]
                              for axis, size in enumerate(pattern))


def _kept_axes(ndim: int, dropped: tuple[int, ...]) -> list[int]:
    """The region's axes that are not length 1: those of the kernel's loop."""
    return [axis for axis in range(ndim) if axis not in dropped]


# ------------------------------------------------------ completion of fused reductions


class ReductionCompletion:
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

    @classmethod
    def of(cls, reduction: Reduction, kept: Sequence[int], ndim: int) -> ReductionCompletion:
        """The completion of ``reduction`` fused into a loop over the region axes ``kept``
        (of ``ndim``; the last kept axis is the core axis)."""
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
        return cls(reduction, remaining, tuple(template))

    def complete(self, partials: Any, length: int, flattened: bool) -> Any:
        """numpy's result from the kernel's ``partials`` of rows ``length`` elements long
        (a single 0-d partial when the loop was ``flattened``).  The partials are the
        kernel's own fresh output: completing may divide them in place."""
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
            shape = self._shape(partials, remaining)
        return reductions.finish(self.reduction, partials, remaining, count, shape)

    def combine(self, chunks: Sequence[Any]) -> Any:
        """The partials of a loop cut into chunks along its core axis: each chunk's
        partials, combined with the reduction's ufunc."""
        stacked = np.stack([np.asarray(partials) for partials in chunks])
        return getattr(np, self.reduction.ufunc).reduce(stacked, axis=0,
                                                       dtype=self.reduction.dtype)

    def _shape(self, partials: Any, remaining: tuple[int, ...]) -> tuple[int, ...]:
        """The template filled with the sizes of the partials' axes not reduced."""
        sizes = iter([size for axis, size in enumerate(np.shape(partials))
                      if axis not in remaining])
        return tuple(next(sizes) if size < 0 else size for size in self.template)


class BlockTotal(ReductionCompletion):
    """A fused reduction completed over one block of a chunked array only: reduced over
    the block's rows as ``ReductionCompletion.complete`` does, but with every reduced axis
    kept as length 1 (of the region's axes), never divided by the count (``mean``/``var``
    divide by the whole array's), and the ufunc's identity where the block holds nothing
    to reduce (a block's max may be empty when the array's is not)."""

    __slots__ = ()

    @classmethod
    def of(cls, reduction: Reduction, kept: Sequence[int], ndim: int) -> BlockTotal:
        keeping = ReductionCompletion.of(dataclasses.replace(reduction, keepdims=True),
                                         kept, ndim)
        return cls(keeping.reduction, keeping.remaining, keeping.template)

    def complete(self, partials: Any, length: int, flattened: bool) -> Any:
        if flattened:
            return np.reshape(partials, tuple(1 for _ in self.template))
        shape = self._shape(partials, self.remaining)
        if self.remaining:
            reduction = self.reduction
            options = {}
            if reduction.ufunc in ("maximum", "minimum") and any(
                    partials.shape[axis] == 0 for axis in self.remaining):
                options["initial"] = reduction.identity()
            partials = getattr(np, reduction.ufunc).reduce(partials, axis=self.remaining,
                                                           dtype=reduction.dtype, **options)
        return np.reshape(partials, shape)


# ----------------------------------------------------------------------- kernel steps


class KernelStep:
    """One kernel call of a plan: what it reads and writes, how its operands are presented
    and how its outputs are completed; a runner runs it.

    ``out_slots`` are the slots of the gufunc's outputs (the region's outputs but those
    written into an operand's buffer); ``donations`` pairs the slot of each of those
    written into a buffer with the position of the operand it was written into; a
    ``placeholder`` kernel writes nothing but such outputs and has one ignored ``()``
    output.  ``completions`` has one ``ReductionCompletion`` or None
    per gufunc output, or is empty when the kernel fuses no reduction.  ``out_dtypes`` are
    the gufunc outputs' dtypes.  ``inputs``/``outputs`` are the slots of the region's
    inputs/outputs in order.  ``completion`` makes the completions
    (``ReductionCompletion.of``; ``BlockTotal.of`` for a block of a chunked array).
    ``errstate`` is the region's floating-point error handling (None: the caller's).
    """

    __slots__ = ("checked", "completions", "donations", "errstate", "inputs", "kernel",
                 "operands", "out_dtypes", "out_slots", "outputs", "placeholder", "ufunc")

    def __init__(self, kernel: Kernel, slots: dict[Node, int],
                 completion: Callable[[Reduction, Sequence[int], int], ReductionCompletion]
                 = ReductionCompletion.of) -> None:
        region, generated = kernel.region, kernel.generated
        self.kernel = kernel
        donated = dict(generated.donated)
        outputs = [node for position, node in enumerate(region.outputs)
                   if position not in donated]
        fused = [None if core else node.reduction
                 for node, core in zip(outputs, generated.core_outputs, strict=False)]
        self.operands = KernelOperands.of(kernel, slots, [reduction for reduction in fused
                                                           if reduction is not None])
        kept = _kept_axes(generated.ndim, generated.dropped_axes)
        completions = tuple(None if reduction is None else
                            completion(reduction, kept, generated.ndim) for reduction in fused)
        self.completions = completions if any(completions) else ()
        self.inputs = tuple(slot for slot, _prepare, _core in self.operands.operands)
        self.out_slots = tuple(slots[node] for node in outputs)
        self.outputs = tuple(slots[node] for node in region.outputs)
        self.donations = tuple((slots[region.outputs[position]], operand)
                               for position, operand in generated.donated)
        self.placeholder = generated.placeholder
        self.errstate = region.errstate
        self.out_dtypes = (np.dtype(np.uint8),) if generated.placeholder else tuple(
            node.dtype for node in outputs)
        ufunc = kernel.gufunc
        if any(node.ndim >= 3 for node in outputs):
            # numpy allocates a gufunc's outputs in its operands' memory order ("K"): one
            # reading an array whose leading axes are permuted (img.transpose(1, 0, 2))
            # would give a result that is not C-contiguous, as numfuse's results are (and
            # numpy's copies: .copy(), np.ascontiguousarray)
            ufunc = functools.partial(ufunc, order="C")
        self.checked = "power_int" in generated.helpers  # (its calls checked afterwards)
        if self.checked:
            ufunc = _raising_negative_powers(ufunc)
        self.ufunc = ufunc

    def call(self, operands: list[Any], outs: Sequence[Any] | None) -> Any:
        """One gufunc call in the calling thread (see ``GufuncCalls``)."""
        if outs is None:
            return self.ufunc(*operands)
        return self.ufunc(*operands, out=outs)


def _pooled_outputs(step: KernelStep, operands: Sequence[Any]) -> tuple[Any, ...] | None:
    """The gufunc outputs of a call on ``operands`` from the memory pool, or None (numpy
    allocates them in the call) when they are too small for it.  Only ``(n)`` outputs are
    made here: per-row partials are left to numpy (None in the tuple)."""
    layout = step.operands
    if not operands or (layout.loop_bound(operands) if layout.rows
                        else operands[layout.core].size) < memory.pooled_from:
        return None
    specs = _output_specs(step, operands)
    return None if specs is None else _outputs_of(specs)


OutputSpec = tuple[tuple[int, ...], np.dtype] | None  # an output's shape and dtype


def _output_specs(step: KernelStep, operands: Sequence[Any]) -> tuple[OutputSpec, ...] | None:
    """The shape and dtype of each ``(n)`` output of a call on ``operands`` (None for
    the others: per-row partials), or None when the kernel has none or is a
    placeholder."""
    layout = step.operands
    if not operands or not layout.operands[layout.core][2] or step.placeholder or \
            not any(step.kernel.generated.core_outputs):
        return None
    loops = {value.shape[:value.ndim - rank] for value, rank
             in zip(operands, layout.ranks, strict=True) if isinstance(value, np.ndarray)}
    shape = (*(loops.pop() if len(loops) == 1 else np.broadcast_shapes(*loops)),
             operands[layout.core].shape[-1])
    return tuple((shape, np.dtype(dtype)) if is_core else None for dtype, is_core
                 in zip(step.out_dtypes, step.kernel.generated.core_outputs, strict=True))


def _fitting(step: KernelStep, operands: Sequence[Any],
             outs: Sequence[Any]) -> list[Any]:
    """``outs`` (arrays for the step's outputs to be written into, numpy's ``out=``) but
    those of another shape than the output's, None: the output is then made and copied
    into its array by the caller, with numpy's broadcasting and errors (a (3, 5) array
    for a (5, 3) result had been written as if it were one)."""
    specs = _output_specs(step, operands)
    if specs is None:
        return list(outs)
    restore = step.operands.restore
    fitting = []
    for out, spec in zip(outs, specs, strict=True):
        if out is not None and spec is not None:
            shape = spec[0] if restore is None else \
                restore(np.broadcast_to(np.empty((), spec[1]), spec[0])).shape
            if out.shape != shape:
                out = None
        fitting.append(out)
    return fitting


def _outputs_of(specs: tuple[OutputSpec, ...]) -> tuple[Any, ...]:
    return tuple(None if spec is None else memory.empty(*spec) for spec in specs)


class Runner(Protocol):
    """Runs one step of an interpretation (see ``Program.interpret``): reads its operands
    from ``values`` and stores its outputs there.  A ``CallStep`` is its own runner."""

    def run(self, values: list[Any]) -> None: ...


class GufuncCalls(Protocol):
    """What makes a kernel step's gufunc calls for a ``LocalRunner``."""

    def call(self, operands: list[Any], outs: Sequence[Any] | None) -> Any:
        """The gufunc's result(s) for ``operands``; ``outs`` (or None) are the arrays to
        write into, one or None per gufunc output."""


class LocalRunner:
    """Runs a kernel step on the numpy values of this process: prepares the operands,
    makes the gufunc call through ``calls`` and stores the outputs, completing fused
    reductions.  ``calls`` is the step itself (one call in the calling thread) or a
    ``threads.ThreadPolicy`` (which may split a call over threads)."""

    __slots__ = ("call", "calls", "direct", "step")

    def __init__(self, step: KernelStep, calls: GufuncCalls | None = None) -> None:
        self.step = step
        self.calls = calls or step
        self.call = self.calls.call  # bound once: the hot path calls it directly
        layout = step.operands
        # a kernel whose operands go to the gufunc as prepared and whose outputs are its
        # results as they are: small calls of it (one thread, numpy's allocation) need
        # none of the general path (a loop of small steps pays it at every step)
        self.direct = layout.passes is None and not layout.flatten and \
            layout.restore is None and not layout.rows and not step.donations and \
            not step.placeholder and not step.completions and \
            bool(layout.operands) and layout.operands[layout.core][2]

    def run(self, values: list[Any], outs: Sequence[Any] | None = None) -> None:
        """Compute the step's outputs into ``values``; ``outs`` (one array or None per
        gufunc output) are arrays of the outputs' full shapes for the kernel to write
        into."""
        step = self.step
        layout = step.operands
        if self.direct and outs is None:
            operands = [values[slot] if prepare is None else prepare(values[slot])
                        for slot, prepare, _core in layout.operands]
            if operands[layout.core].size < min(memory.pooled_from,
                                                getattr(self.calls, "small", sys.maxsize)):
                try:
                    results = step.ufunc(*operands)
                except ValueError:
                    pass  # (the general path tells why)
                else:
                    if len(step.out_slots) == 1:
                        values[step.out_slots[0]] = results
                    else:
                        for slot, result in zip(step.out_slots, results, strict=True):
                            values[slot] = result
                    return
        if layout.passes is not None:
            self._passes(values, layout.passes)
            return
        operands = [values[slot] if prepare is None else prepare(values[slot])
                    for slot, prepare, _core in layout.operands]
        if outs is not None:
            outs = _fitting(step, operands, outs)
        shape = None  # the loop's shape when its operands run as one long 1-d loop
        if layout.flatten and (outs is None or all(out is None or out.flags.c_contiguous
                                                   for out in outs)):
            flat = layout.flattened(operands)
            if flat is not None:
                operands, shape = flat
        presented = None if outs is None else tuple(layout.present(out, shape is not None)
                                                    for out in outs)
        try:
            results = self.call(operands, presented if outs is not None else
                                _pooled_outputs(step, operands))
        except ValueError:
            widened = _widened(values, layout.operands)
            if widened is None:
                _raise_broadcast_error([values[slot] for slot in step.inputs])
                raise
            self.run(widened, outs)
            for slot in step.out_slots:
                values[slot] = widened[slot]
            return
        if step.donations:
            self._donated(values, operands)
        if step.placeholder:
            results = ()
        elif len(step.out_slots) == 1:
            results = (results,)
        if shape is None and layout.restore is None and not step.completions:
            for slot, result in zip(step.out_slots, results, strict=False):  # common case
                values[slot] = result
            return
        self._store(values, results, operands, shape, outs, presented)

    def _passes(self, values: list[Any], passes: Passes) -> None:
        """Run a kernel of passes: its outputs are made here, in numpy's shapes, and the
        kernel writes them through views."""
        step = self.step
        inputs = [values[slot] for slot in step.inputs]
        try:
            outputs, views = passes.allocate(inputs)
        except ValueError:
            _raise_broadcast_error(inputs)
            raise
        operands = [value if prepare is None else prepare(value)
                    for value, (_slot, prepare, _core) in zip(inputs, step.operands.operands,
                                                               strict=True)]
        self.call(operands, views)
        for slot, output in zip(step.out_slots, outputs, strict=True):
            values[slot] = output

    def _store(self, values: list[Any], results: Sequence[Any], operands: list[Any],
               shape: tuple[int, ...] | None, outs: Sequence[Any] | None,
               presented: Sequence[Any] | None) -> None:
        """Store the results of a call that was flattened (``shape``: the loop's shape),
        dropped axes, wrote into ``outs`` or fused reductions."""
        step = self.step
        layout = step.operands
        for position, (slot, result) in enumerate(zip(step.out_slots, results, strict=True)):
            completion = step.completions[position] if step.completions else None
            if completion is not None:
                length = np.shape(operands[layout.core])[-1] if operands else 1
                values[slot] = completion.complete(result, length, shape is not None)
                continue
            if presented is not None and presented[position] is not None:
                values[slot] = outs[position]  # type: ignore[index]
                continue
            if shape is not None:
                result = result.reshape(shape)
            values[slot] = result if layout.restore is None else layout.restore(result)

    def _donated(self, values: list[Any], operands: list[Any]) -> None:
        """Outputs written into an operand: the operand's array, full shape (or the copy
        the kernel really wrote, if presenting the operand had to copy it)."""
        for out_slot, operand in self.step.donations:
            written, original = operands[operand], values[self.step.inputs[operand]]
            if written is original or np.may_share_memory(written, original):
                values[out_slot] = original
            else:
                values[out_slot] = np.reshape(written, np.shape(original))


class Governed:
    """Runs a step under the floating-point error handling the traced function set for its
    work (``ErrState.applied``: the caller's state with the function's changes on top)."""

    __slots__ = ("errstate", "runner")

    def __init__(self, runner: CallStep | LocalRunner, errstate: ErrState) -> None:
        self.runner = runner
        self.errstate = errstate

    def run(self, values: list[Any], outs: Sequence[Any] | None = None) -> None:
        with self.errstate.applied():
            if outs is None:
                self.runner.run(values)
            else:
                assert isinstance(self.runner, LocalRunner)
                self.runner.run(values, outs)


def governed(runner: CallStep | LocalRunner, errstate: ErrState | None
             ) -> CallStep | LocalRunner | Governed:
    """``runner`` itself, or run under ``errstate`` when the function set one."""
    return runner if errstate is None else Governed(runner, errstate)


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


def _widened(values: list[Any], operands: Sequence[tuple[int, Prepare | None, bool]]
             ) -> list[Any] | None:
    """``values`` with each core operand that has an axis of 1 where numpy broadcasting
    makes it longer copied to that length, or None when there is none.  A kernel's core
    axis never broadcasts; a size that depends on the data (``x[mask]``) can be 1 at run
    time where tracing assumed any size."""
    shapes = [np.shape(values[slot]) for slot, _prepare, core in operands if core]
    try:
        full = np.broadcast_shapes(*shapes) if shapes else ()
    except ValueError:
        return None
    widened = list(values)
    found = False
    for slot, _prepare, core in operands:
        shape = np.shape(values[slot])
        if not core or not shape:
            continue
        target = tuple(wide if size == 1 else size
                       for size, wide in zip(shape, full[len(full) - len(shape):], strict=True))
        if target != shape:
            widened[slot] = np.broadcast_to(values[slot], target).copy()
            found = True
    return widened if found else None


class BroadcastError(ValueError):
    """A kernel's operands do not broadcast together (``api.Jitted`` replaces it with
    the error numpy raises for the function, from the operation that fails first)."""


def _raise_broadcast_error(operands: Sequence[Any]) -> None:
    """Report a size mismatch between a kernel's operands the way numpy would."""
    shapes = [np.shape(value) for value in operands]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        described = " ".join(str(shape).replace(" ", "") for shape in shapes)
        raise BroadcastError(
            f"operands could not be broadcast together with shapes {described}"
        ) from None


def kernel_runner(kernel: Kernel) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """Run one kernel on its own exactly as a program step would: ``run(operands)`` takes
    the values of ``kernel.region.inputs`` in order and returns the values of
    ``kernel.region.outputs`` (used to run a kernel on each block of a chunked array)."""
    return _standalone(kernel, ReductionCompletion.of)


def block_runner(kernel: Kernel) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """``kernel_runner`` for one block of a chunked array: elementwise outputs as there,
    but each fused reduction comes back as the block's own raw total (``BlockTotal``),
    for the caller to combine across blocks and divide by the whole count."""
    return _standalone(kernel, BlockTotal.of)


def _standalone(kernel: Kernel,
                completion: Callable[[Reduction, Sequence[int], int], ReductionCompletion]
                ) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """``run(operands) -> outputs`` for ``kernel`` run in the calling thread, its values
    laid out as its inputs, then its outputs."""
    region = kernel.region
    slots = {node: index for index, node in enumerate((*region.inputs, *region.outputs))}
    runner = governed(LocalRunner(KernelStep(kernel, slots, completion)), region.errstate)
    count, outputs = len(region.inputs), (None,) * len(region.outputs)

    def run(operands: Sequence[Any]) -> tuple[Any, ...]:
        values = [*operands, *outputs]
        runner.run(values)
        return tuple(values[count:])

    return run


# ------------------------------------------------------------------ numpy-call steps


class CallStep:
    """A non-fusible numpy operation, run by numpy itself on the run-time values (and so
    by dask, through numpy's dispatch, on dask arrays); its result must have the dtype and
    the fixed sizes tracing found."""

    __slots__ = ("call", "dtype", "errstate", "fits", "fixed", "in_place", "inputs", "op",
                 "out_slot", "pythons", "shape", "shared", "view", "whole", "written")

    def __init__(self, call: NumpyCall, inputs: tuple[int, ...], out_slot: int,
                 node: Node, in_place: bool = False) -> None:
        self.call = call
        self.inputs = inputs
        self.out_slot = out_slot
        self.op = node.op
        self.dtype = node.dtype
        self.shape = node.shape
        self.fixed = tuple((axis, size) for axis, size in enumerate(node.shape)
                           if size is not None)  # the sizes tracing fixed
        # whether a result's shape has the dimensions and fixed sizes tracing found (one
        # expression: checked at every run of the step)
        fits = pytree.compiled("shape", " and ".join(
            [f"len(shape) == {len(node.shape)}",
             *(f"shape[{axis}] == {size}" for axis, size in self.fixed)]), {})
        assert fits is not None  # (a flat expression)
        self.fits = fits
        self.errstate = node.errstate
        self.shared: int | None = None
        self.whole: NumpyCall | None = None
        # the operands that are Python numbers in the function (a list argument's item,
        # a computed Python number): given to numpy as Python numbers, weak as they are
        # there (a 0-d array is strong: np.clip(uint8 array, 0-d int64) gives int64)
        self.pythons = tuple(position for position, source in enumerate(node.inputs)
                             if source.weak and source.ndim == 0)
        # basic indexing by a constant key (``u[1:-1]``, ``x[0]``, ``y[:, None]``) keeps the
        # dtype and the number of dimensions: run as the indexing alone, checking only
        # the sizes tracing fixed (``y[:32]`` of a shorter ``y`` is shorter)
        key = call.args[1] if call.fn is operator.getitem and len(call.args) == 2 and \
            call.args[0] is TRACED and not call.kwargs and len(inputs) == 1 else None
        self.view = key if key is not None and _basic_key(key) else None
        # ``x[key] = v`` by a constant basic key into the function's own array: numpy's
        # setitem into a copy (``Written``), run as that alone, into the array itself
        # when nothing reads it afterwards (``in_place``, see ``_writes_in_place``)
        # (the array written keeps its shape: the one its own step gave, checked there)
        self.in_place = in_place
        self.written = _item_write(call)

    def share(self, slot: int) -> None:
        """Run as one item of several results (``CallOutput``) whose other items' steps
        read the same call: the call runs once per run of the program, by the first of
        them, its results kept in the slot ``slot`` for the others."""
        assert isinstance(self.call.fn, CallOutput)
        self.shared = slot
        self.whole = NumpyCall(self.call.fn.fn, self.call.name, self.call.args,
                               self.call.kwargs)

    def run(self, values: list[Any]) -> None:
        if self.view is not None:
            result = values[self.inputs[0]][self.view]
            if self.fixed and not self.fits(np.shape(result)):
                self._wrong(result)
            values[self.out_slot] = result
            return
        if self.written is not None:
            write, key, traced, value = self.written
            array = values[self.inputs[0]] if self.in_place else \
                np.array(values[self.inputs[0]], copy=True, subok=False)
            if traced:
                value = values[self.inputs[1]]
                if self.pythons and isinstance(value, (np.ndarray, np.generic)):
                    value = value.item()
            write(array, key, value)
            values[self.out_slot] = array
            return
        operands = [values[slot] for slot in self.inputs]
        for position in self.pythons:
            if isinstance(operands[position], (np.ndarray, np.generic)):
                operands[position] = operands[position].item()
        if self.whole is not None:
            assert self.shared is not None and isinstance(self.call.fn, CallOutput)
            results = values[self.shared]
            if results is None:
                results = values[self.shared] = self.whole.invoke(operands)
            result = self.call.fn.item(results)
        else:
            result = self.call.invoke(operands)
        if type(result) is np.ndarray and result.dtype is self.dtype and \
                self.fits(result.shape):  # the common case
            values[self.out_slot] = result
            return
        shape = result.shape if type(result) is np.ndarray else np.shape(result)
        dtype = getattr(result, "dtype", None)
        if (dtype is not self.dtype and (  # (numpy's dtypes are one object per type)
                dtype is None or (dtype != self.dtype and
                                  dtype.newbyteorder("=") != self.dtype))) \
                or len(shape) != len(self.shape) or \
                any(shape[axis] != fixed for axis, fixed in self.fixed):
            self._wrong(result)
        values[self.out_slot] = result

    def _wrong(self, result: Any) -> NoReturn:
        """Raise that the call's result is not what tracing found."""
        shape = np.shape(result)
        dtype = getattr(result, "dtype", None)
        described = dtype if dtype is not None else np.asarray(result).dtype
        raise CallShapeError(
                f"{self.call.name} returned {described}{shape_text(shape)} "
                f"where tracing found {self.dtype}{shape_text(self.shape)}: its result "
                "depends on the values (or, compiled by numfuse.compile, on other sizes than "
                "the example's), which numfuse cannot trace; compute it outside the jitted "
                "function.")


def _writes_in_place(plan: Plan) -> frozenset[Node]:
    """The writes ``x[key] = v`` (numpy's setitem into a copy, ``Written``) that may write
    into the array itself: one the program made (a kernel's output, or a new array a
    numpy call made), which nothing reads after the write, nor any value that may be a
    view of it, and which is not returned.  A loop writing rows into a preallocated array
    copied the whole array at each write (200 rows of 10,000: 1 s where numpy takes 1 ms)."""
    steps = plan.steps or plan.regions
    last_read: dict[Node, int] = {}
    views: dict[Node, list[Node]] = {}  # a value: the numpy results that may be its views
    for index, step in enumerate(steps):
        for source in step.inputs:
            last_read[source] = index
            if isinstance(step, Node) and not _new_array(step):
                views.setdefault(source, []).append(step)
    returned = set(plan.graph.outputs)
    chosen = []
    for index, step in enumerate(steps):
        if not (isinstance(step, Node) and _item_write(step.call) is not None and
                (step.inputs[0].kind == ELEMENTWISE or
                 (step.inputs[0].kind == NUMPY and _new_array(step.inputs[0])))):
            continue
        pending, seen, free = [step.inputs[0]], set(), True
        while pending and free:
            node = pending.pop()
            if node in seen:
                continue
            seen.add(node)
            free = node not in returned and last_read.get(node, -1) <= index
            pending.extend(views.get(node, ()))
        if free:
            chosen.append(step)
    return frozenset(chosen)


def _item_write(call: NumpyCall) -> tuple[Callable[..., Any], Any, bool, Any] | None:
    """``x[key] = v`` by a constant basic key (``Written`` setitem): the write, the key,
    whether ``v`` is traced (the call's second input) and ``v`` if not; else None."""
    fn, args = call.fn, call.args
    if isinstance(fn, Written) and fn.fn in (operator.setitem, setitem_scalar) and \
            len(args) == 3 and args[0] is TRACED and not call.kwargs and \
            _basic_key(args[1]) and call.count() == 1 + (args[2] is TRACED):
        return fn.fn, args[1], args[2] is TRACED, args[2]
    return None


def _new_array(node: Node) -> bool:
    """Whether the numpy call ``node`` makes a new array (never a view of an operand)."""
    fn = node.call.fn
    return isinstance(fn, Written) or fresh_result(fn, node.call.args, node.call.kwargs)


def _basic_key(key: Any) -> bool:
    """Whether indexing by ``key`` is numpy's basic indexing by constants: ints, slices of
    ints, None and Ellipsis (a view, or an item, of the array's dtype)."""
    items = key if type(key) is tuple else (key,)
    return all(item is None or item is Ellipsis or type(item) is int or
               (type(item) is slice and all(bound is None or type(bound) is int
                                            for bound in (item.start, item.stop, item.step)))
               for item in items)


# ----------------------------------------------------------------------- the program


class Settings:
    """Run-time options shared by the thread policies of a program's kernel steps:
    ``threads`` (None: automatic) and the default thread count (numba's setting, injected
    by the caller)."""

    __slots__ = ("default_threads", "threads")

    def __init__(self, threads: int | None = None,
                 default_threads: Callable[[], int] = lambda: 1) -> None:
        self.threads = threads
        self.default_threads = default_threads


class Program:
    """The executable form of a plan: ``program(args) -> result`` in the traced structure.

    ``steps`` are the plan's steps in order, reading and writing the slots of one list of
    values: the arguments, then ``initial`` (array constants, and None for each step
    output).  ``runners`` has what runs each step in a call of the program: a ``CallStep``
    runs itself, a ``KernelStep`` a ``LocalRunner`` calling its gufunc through a
    ``threads.ThreadPolicy``.  Other runners (dask's) run the same steps through the same
    ``interpret``, which assembles the results the same way.
    """

    def __init__(self, plan: Plan, kernels: Sequence[Kernel],
                 settings: Settings | None = None) -> None:
        self.settings = settings = settings or Settings()
        graph = plan.graph
        slots: dict[Node, int] = {node: index for index, node in enumerate(graph.inputs)}
        initial: list[Any] = []
        steps: list[KernelStep | CallStep] = []
        kernel_of = {kernel.region: kernel for kernel in kernels}

        def slot_of(node: Node) -> int:
            if node not in slots:
                slots[node] = len(slots)
                initial.append(node.value.value if node.kind == CONST else None)
            return slots[node]

        # the items of a call returning several results, by call and operands: they share
        # a slot holding its results (``CallStep.shared``)
        items: dict[tuple[Any, ...], list[CallStep]] = {}

        in_place = _writes_in_place(plan)
        for step in plan.steps or plan.regions:
            if isinstance(step, Node):
                inputs = tuple(slot_of(source) for source in step.inputs)
                call = CallStep(step.call, inputs, slot_of(step), step, step in in_place)
                steps.append(call)
                if isinstance(step.call.fn, CallOutput):
                    key = (step.call.fn.fn, step.call.arguments, inputs)
                    items.setdefault(key, []).append(call)
                continue
            for node in (*step.inputs, *step.outputs):
                slot_of(node)
            steps.append(KernelStep(kernel_of[step], slots))
        for together in items.values():
            if len(together) > 1:
                slot = len(graph.inputs) + len(initial)
                initial.append(None)
                for item in together:
                    item.share(slot)
        self.initial = tuple(initial)
        self.steps = tuple(steps)
        self.runners: tuple[CallStep | LocalRunner | Governed, ...] = tuple(
            governed(step if isinstance(step, CallStep) else
                     LocalRunner(step, threads.ThreadPolicy(step, settings)), step.errstate)
            for step in steps)
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
        self.warned = graph.warned  # given at each call, first (see ``graph.Warned``)
        # Returned leaves a kernel can write straight into a caller's out= array.
        self.writable = {
            position: (index, step.out_slots.index(slot))
            for position, (slot, convert) in enumerate(self.returns)
            for index, step in enumerate(self.steps)
            if convert is None and isinstance(step, KernelStep) and slot in step.out_slots
            and step.operands.passes is None
            and not (step.completions and step.completions[step.out_slots.index(slot)]
                     is not None)
            and position not in self.repeated and same_as[position] == position
            and self.returns.index((slot, convert)) == position
        }
        self.fast = _fast_path(self, len(graph.inputs))

    def call_plan(self, args: Sequence[Any]) -> CallPlan:
        """How to run this program on arguments of exactly the types, dtypes and shapes
        of ``args``, with what can be decided for them decided now (``_call_plan``); else
        through the program's own ``fast`` path or ``interpret``."""
        found = _call_plan(self, args)
        if found is not None:
            return found
        run = self.fast or self.interpret
        return CallPlan(run, _NO_SHORTCUT, 0, run)

    def interpret(self, args: Sequence[Any], out: Any = None,
                  runners: Sequence[Runner] | None = None,
                  writes: Mapping[int, Sequence[Any]] | None = None) -> Any:
        """The results of the plan for ``args`` in the traced structure, or written into
        ``out`` (numpy's ``out=``, see ``_into``): the one interpreter of plans.  It runs
        every step in order over one list of values, ``runners[i]`` running step ``i``
        (default: the program's own ``runners``), then assembles the results.  ``writes``
        (from ``_into``) maps a step's index to the arrays its ``LocalRunner`` writes the
        step's outputs into."""
        if self.int_guards:
            _check_int_arguments(self.int_guards, args)
        if out is not None:
            return self._into(args, out)
        for warned in self.warned:
            warned.give()
        values = [*args, *self.initial]
        if writes:
            for index, runner in enumerate(runners or self.runners):
                if index in writes:
                    assert isinstance(runner, (LocalRunner, Governed))
                    runner.run(values, writes[index])
                else:
                    runner.run(values)
        else:
            for runner in runners or self.runners:
                runner.run(values)
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

    __call__ = interpret  # calling a program interprets it with its own runners

    def _into(self, args: Sequence[Any], out: Any) -> Any:
        """Run with the results written into ``out`` (numpy's ``out=``): an array for a
        function returning one array, a tuple of arrays for a flat tuple of results.
        Kernel outputs are written in place; anything else is copied in ('same_kind'
        casting); if an out array shares memory with an argument, every result is
        computed first and then copied, so the answer is numpy's."""
        targets = out_targets(out, self.single, self.flat_tuple, len(self.returns))
        overlapping = any(isinstance(arg, np.ndarray) and np.may_share_memory(arg, target)
                          for arg in args for target in targets)
        outs: dict[int, list[Any]] = {}
        if not overlapping:
            for position, (index, output) in self.writable.items():
                step = self.steps[index]
                assert isinstance(step, KernelStep)
                if targets[position].shape and targets[position].dtype == step.out_dtypes[output]:
                    outs.setdefault(index, [None] * len(step.out_slots))[output] = \
                        targets[position]
        results = self.interpret(args, writes=outs)
        for target, result in zip(targets, [results] if self.single else results, strict=True):
            if result is not target:
                np.copyto(target, result, casting="same_kind")
        return targets[0] if self.single else tuple(targets)


def out_targets(out: Any, single: bool, flat_tuple: bool, count: int) -> list[Any]:
    """The arrays of a call's ``out=`` for its ``count`` results (one result, or a flat
    tuple of them), checked."""
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


def _single_kernel(program: Program, arity: int) -> tuple[KernelStep, threads.ThreadPolicy] | None:
    """The kernel step and its thread policy when ``program`` is that one step alone, run
    on the arguments (no constants) through a ``threads.ThreadPolicy``, its gufunc's
    outputs the results as they come (but for fused reductions to complete and a nesting
    of the results, ``_structured``); None otherwise."""
    if len(program.steps) != 1 or program.int_guards or program.warned or program.aliases or \
            program.repeated:
        return None
    runner = program.runners[0]
    if not isinstance(runner, LocalRunner) or not isinstance(runner.calls, threads.ThreadPolicy):
        return None
    step = runner.step
    if step.operands.passes is not None:
        return None
    if [slot for slot, _convert in program.returns] != list(step.out_slots) or any(
            convert is not None for _slot, convert in program.returns):
        return None
    if any(value is not None for value in program.initial) or any(
            slot >= arity for slot in step.inputs):
        return None
    if not program.single and len(step.out_slots) == 1:
        return None  # a 1-tuple of results: the gufunc returns a bare array
    return step, runner.calls


def _structured(program: Program) -> Callable[[Sequence[Any]], Any] | None:
    """How a single kernel's results (a tuple, in the order of ``program.returns``) become
    the function's: None when they are already (one result, or a flat tuple), else the
    nesting of the traced structure (``value_and_grad``'s ``(value, (g1, g2))``)."""
    if program.single or program.flat_tuple:
        return None
    return pytree.builder(program.treedef)


def _fast_path(program: Program, arity: int) -> Callable[..., Any] | None:
    """``program`` as one closure when it is a single kernel step whose gufunc outputs are
    the results as they come, fused reductions completed (the common case): the
    interpreter, the step's runner and its thread policy with nothing left to decide, so
    the call costs little more than the gufunc's own.  A call the policy treats as large
    goes to the policy (which may split it over threads, or chunk a fused reduction);
    ``out=`` goes through the program itself."""
    found = _single_kernel(program, arity)
    if found is None:
        return None
    step, policy = found
    layout = step.operands
    if layout.flatten or layout.restore is not None:
        return None
    ufunc, core, completions, general = step.ufunc, layout.core, step.completions, program.interpret
    # A single result that is a completed reduction (the gufunc returns its partials).
    whole = completions[0] if program.single and completions else None
    picks = tuple((slot, prepare) for slot, prepare, _core in layout.operands)
    direct = picks == tuple((slot, None) for slot in range(arity))
    structured = _structured(program)

    def fast(args: Sequence[Any], out: Any = None) -> Any:
        if out is not None:
            return general(args, out)
        operands = args if direct else [args[slot] if prepare is None else prepare(args[slot])
                                        for slot, prepare in picks]
        large = operands[core].size >= policy.small or (
            layout.rows and layout.loop_bound(operands) >= policy.small)
        try:
            pooled = _pooled_outputs(step, operands)
            if large:
                results = policy.call(list(operands), pooled)
            else:
                results = ufunc(*operands) if pooled is None else ufunc(*operands, out=pooled)
        except ValueError:
            if large:  # a core operand numpy broadcasts (see ``_widened``), or the error
                return general(args)
            _raise_broadcast_error([args[slot] for slot, _prepare in picks])
            raise
        if not completions:
            return results if structured is None else structured(results)
        length = np.shape(operands[core])[-1]
        if whole is not None:
            return whole.complete(results, length, False)
        completed = tuple(result if completion is None
                          else completion.complete(result, length, False)
                          for result, completion in zip(results, completions, strict=True))
        return completed if structured is None else structured(completed)

    return fast


class CallPlan(NamedTuple):
    """How a program runs on arguments of one exact kind (``Program.call_plan``):
    ``run(args)`` runs any call; while ``loop < policy.small`` (a loop the thread policy
    never splits) and the outputs are too small for the memory pool, the whole call may
    be ``gufunc`` of the kernel's operands instead, its outputs being the results (the
    call cache's direct call, ``api._guard``): the arguments as they are, or when
    ``operands`` is given, the argument at each of its slots, reshaped to its shape when
    that is not None.  ``outputs``, when given, are the shape and dtype of each result of
    such a call: arrays of exactly those, C-contiguous, can be its ``out=``."""

    gufunc: Callable[..., Any]  # ``run`` when there is no such shortcut (never called)
    policy: Any  # what holds ``small``: a ``threads.ThreadPolicy`` or ``_NO_SHORTCUT``
    loop: int
    run: Callable[[Sequence[Any]], Any]
    operands: tuple[tuple[int, tuple[int, ...] | None], ...] | None = None
    outputs: tuple[tuple[tuple[int, ...], np.dtype], ...] | None = None
    # A fused reduction of the whole of its input, whose one partial is the value: the
    # shortcut applies when the argument at each slot has unit stride (``(slot,
    # itemsize)``; another order of its elements would add them in another order).
    unit_strides: tuple[tuple[int, int], ...] | None = None


class _NoShortcut:
    """The ``policy`` of a ``CallPlan`` without the shortcut: no loop is below ``small``."""

    small = 0


_NO_SHORTCUT = _NoShortcut()


def _presented_shapes(layout: KernelOperands, args: Sequence[Any]
                      ) -> list[tuple[int, ...] | None]:
    """For each operand of a kernel, the shape it is presented in (its argument with
    length-1 axes dropped), or None when that is the argument's own."""
    shapes: list[tuple[int, ...] | None] = []
    for slot, prepare, _core in layout.operands:
        value = args[slot]
        presented = value if prepare is None else prepare(value)
        shapes.append(None if np.shape(presented) == np.shape(value) else np.shape(presented))
    return shapes


def _call_plan(program: Program, args: Sequence[Any]) -> CallPlan | None:
    """``program`` for arguments of exactly the types, dtypes and shapes of ``args`` (the
    key of ``Jitted``'s call cache; any strides), or None when it is not a single kernel
    (see ``_fast_path``).

    What ``_fast_path`` decides per call is decided here once: the operands' shapes as
    the kernel sees them (length-1 axes dropped: a reshape, never a copy), the loop's
    size, a fused reduction's row length.  Left per call: whether the loop is large for
    the thread policy (its threshold moves as the kernel's cost is measured).  A strided
    ``(n)`` operand is passed as it is, not copied: the kernel reads it through buffers
    (``lowering.loops``), computing every element as from a contiguous copy; but a fused
    reduction's partials would be added in another order, so a kernel with one takes
    ``_fast_path`` (which copies) for a strided call."""
    found = _single_kernel(program, len(args))
    if found is None:
        return None
    step, policy = found
    layout = step.operands
    if layout.flatten or layout.restore is not None or not layout.operands:
        return None
    shapes = _presented_shapes(layout, args)
    presented = [args[slot] if shape is None else np.reshape(args[slot], shape)
                 for (slot, _prepare, _core), shape in zip(layout.operands, shapes, strict=True)]
    core = presented[layout.core]
    loop = max(np.size(core), layout.loop_bound(presented)) if layout.rows else np.size(core)
    slots = tuple(slot for slot, _prepare, _core in layout.operands)
    operands = _operands_of(slots, shapes, len(args))
    specs = _output_specs(step, presented)
    shortcut = not step.completions and _structured(program) is None
    outputs = None if specs is None or None in specs else specs
    if operands is None and shortcut:
        return CallPlan(step.ufunc, policy, int(loop),
                        program.fast or program.interpret if specs is None else
                        _pooled_run(program, step, policy, slots, specs, int(loop)),
                        outputs=outputs)  # type: ignore[arg-type]
    run = _shaped_run(program, step, policy, slots, operands, presented, specs, int(loop))
    strides = _value_of_partial(program, step, presented)
    if operands is None and strides is not None:  # the partial is the value
        return CallPlan(step.ufunc, policy, int(loop), run,
                        unit_strides=tuple((slots[position], itemsize)
                                           for position, itemsize in strides))
    if shortcut:  # the kernel's results as they come, of reshaped arguments
        return CallPlan(step.ufunc, policy, int(loop), run, tuple(zip(slots, shapes, strict=True)),
                        outputs)  # type: ignore[arg-type]
    return CallPlan(run, _NO_SHORTCUT, int(loop), run)


def _value_of_partial(program: Program, step: KernelStep, presented: Sequence[Any]
                      ) -> tuple[tuple[int, int], ...] | None:
    """For a kernel whose one result is a fused reduction of all its input and whose one
    partial is that value (``ReductionCompletion.complete``), the ``(n)`` operands that
    must have unit stride (position, itemsize) for a plain call to be the whole call;
    None for other kernels."""
    layout, completions = step.operands, step.completions
    if not (program.single and len(completions) == 1 and completions[0] is not None) or \
            layout.rows or any(np.ndim(value) > 1 for value in presented):
        return None
    core = presented[layout.core]
    length = np.shape(core)[-1] if np.ndim(core) else 1
    if not _passes_partial(completions[0], length):
        return None
    return _needing_unit_stride(layout, presented)


def _needing_unit_stride(layout: KernelOperands, presented: Sequence[Any]
                         ) -> tuple[tuple[int, int], ...]:
    """(position, itemsize) of each ``(n)`` operand a fused reduction needs contiguous:
    its elements in another order would be added in another order."""
    return tuple((position, np.dtype(value.dtype).itemsize)
                 for position, (value, (_slot, _prepare, core_operand))
                 in enumerate(zip(presented, layout.operands, strict=True))
                 if core_operand and np.shape(value)[-1:] != (1,) and np.ndim(value))


def _shaped_run(program: Program, step: KernelStep, policy: threads.ThreadPolicy,
                slots: tuple[int, ...],
                operands: Callable[[Sequence[Any]], Sequence[Any]] | None,
                presented: Sequence[Any], specs: tuple[OutputSpec, ...] | None,
                loop: int) -> Callable[[Sequence[Any]], Any]:
    """``run(args)`` of a ``CallPlan`` whose kernel reads reshaped or reordered
    arguments (``operands``; None: the arguments) or completes fused reductions;
    ``presented`` are the operands of the arguments the plan was made for, ``specs``
    their ``(n)`` outputs (``_output_specs``), ``loop`` its loop's size."""
    layout = step.operands
    core = presented[layout.core]
    length = np.shape(core)[-1] if np.ndim(core) else 1
    ufunc, completions, general = step.ufunc, step.completions, program.interpret
    whole = completions[0] if program.single and completions else None
    # The result is the one partial as it is (ReductionCompletion.complete, decided now).
    value_of_partial = whole is not None and _passes_partial(whole, length)
    # every result is the gufunc's own (a partial that is the value, or an output)
    as_they_come = all(completion is None or _passes_partial(completion, length)
                       for completion in completions)
    fast = program.fast or general
    structured = _structured(program)
    contiguous = _needing_unit_stride(layout, presented) if completions else ()

    def shaped(args: Sequence[Any]) -> Any:
        values = args if operands is None else operands(args)
        for position, itemsize in contiguous:
            if values[position].strides[-1] != itemsize:
                return fast(args)
        large = loop >= policy.small  # a call the thread policy may split
        outs = None if specs is None or loop < memory.pooled_from else _outputs_of(specs)
        try:
            if large:
                results = policy.call(list(values), outs)
            else:
                results = ufunc(*values) if outs is None else ufunc(*values, out=outs)
        except ValueError:
            if large:  # as in ``_fast_path``
                return general(args)
            _raise_broadcast_error([args[slot] for slot in slots])
            raise
        if not completions:
            return results if structured is None else structured(results)
        if value_of_partial:
            return results.reshape(())[()] if isinstance(results, np.ndarray) else results
        if whole is not None:
            return whole.complete(results, length, False)
        if as_they_come and outs is None and not large:
            # a whole 1-d reduction's one partial, a 0-d output of a call without out=,
            # comes back as a numpy scalar: the value
            completed = results
        else:
            completed = tuple(result if completion is None
                              else completion.complete(result, length, False)
                              for result, completion in zip(results, completions, strict=True))
        return completed if structured is None else structured(completed)

    return shaped


def _pooled_run(program: Program, step: KernelStep, policy: threads.ThreadPolicy,
                slots: tuple[int, ...], specs: tuple[OutputSpec, ...],
                loop: int) -> Callable[[Sequence[Any]], Any]:
    """``run(args)`` of a ``CallPlan`` whose kernel reads the arguments as they are and
    makes ``(n)`` outputs (``specs``, see ``_output_specs``), for loops too large for its
    ``gufunc`` shortcut: the kernel, its outputs from the memory pool, called alone or
    through the thread policy."""
    ufunc, general = step.ufunc, program.interpret
    single = len(specs) == 1

    def pooled(args: Sequence[Any]) -> Any:
        outs = _outputs_of(specs)
        large = loop >= policy.small  # a call the thread policy may split
        try:
            results = policy.call(list(args), outs) if large else ufunc(*args, out=outs)
        except ValueError:
            if large:  # as in ``_fast_path``
                return general(args)
            _raise_broadcast_error([args[slot] for slot in slots])
            raise
        return results[0] if single and isinstance(results, tuple) else results

    return pooled


def _passes_partial(completion: ReductionCompletion, length: int) -> bool:
    """Whether the one partial a kernel leaves for ``completion`` is the value, for rows
    of ``length`` (see ``ReductionCompletion.complete``)."""
    return completion.direct and (length > 0 or completion.reduction.ufunc
                                  not in ("maximum", "minimum"))


def _operands_of(slots: tuple[int, ...], shapes: Sequence[tuple[int, ...] | None],
                 arity: int) -> Callable[[Sequence[Any]], Sequence[Any]] | None:
    """How a kernel's operands are read from the arguments: the argument at each of
    ``slots``, reshaped to its entry of ``shapes`` when not None; None when the operands
    are the arguments as they are."""
    reshapes = tuple((position, shape) for position, shape in enumerate(shapes)
                     if shape is not None)
    if not reshapes:
        if slots == tuple(range(arity)):
            return None
        if len(slots) > 1:
            return operator.itemgetter(*slots)  # one C call picking them in order
        only = slots[0]
        return lambda args: (args[only],)

    def read(args: Sequence[Any]) -> Sequence[Any]:
        values = [args[slot] for slot in slots]
        for position, shape in reshapes:
            values[position] = values[position].reshape(shape)
        return values

    return read


def raise_broadcast_error(operands: Sequence[Any]) -> None:
    """Report a size mismatch between a kernel's operands the way numpy would (nothing
    when they broadcast: the error was another)."""
    _raise_broadcast_error(operands)


def _returned_as_is(node: Node) -> bool:
    """Arguments and kernel outputs with at least one dimension need no conversion."""
    return node.kind == INPUT or (node.kind == NUMPY and not node.weak) or (
        node.kind == ELEMENTWISE and node.ndim > 0)


# Operations that cast their operands unsafely in numpy (no OverflowError for Python ints).
_UNSAFE_CASTS = frozenset({"where", "astype"})


class IntGuard(NamedTuple):
    """A Python int the function is called with, or computes from such ints, that numpy
    casts to an integer dtype (the narrowest of its uses): numpy raises OverflowError for
    a value beyond ``low``..``high``.  ``argument`` is the argument's position and ``key``
    an item of a list argument; a computed int is ``node``, evaluated from the arguments."""

    argument: int
    key: int | None
    dtype: np.dtype
    low: int
    high: int
    node: Node | None = None


def _check_int_arguments(guards: tuple[IntGuard, ...], args: Sequence[Any]) -> None:
    for guard in guards:
        if guard.node is not None:
            value = int(_python_int(guard.node, args))
        else:
            value = args[guard.argument] if guard.key is None else \
                int(args[guard.argument][guard.key])  # (a list's item)
        if not guard.low <= value <= guard.high:
            raise OverflowError(f"Python integer {value} out of bounds for {guard.dtype}")


def _python_int(node: Node, args: Sequence[Any]) -> Any:
    """The value of ``node``, arithmetic on Python int arguments, as its kernel computes
    it (in int64, wrapping)."""
    if node.kind == INPUT:
        return np.int64(args[node.index])
    if node.kind == CONST:
        return node.value.value
    with np.errstate(all="ignore"):
        return OPS[node.op].reference(*(_python_int(source, args) for source in node.inputs))


def _int_guards(graph: Any) -> tuple[IntGuard, ...]:
    """Python int arguments, and the items of a list of them, are weak: like numpy,
    refuse values the dtype they are cast to cannot hold (numpy raises OverflowError for
    ``uint8_array + 300``, for ``uint8_array + b[0]`` with ``b = [300]``, and for
    ``int16_array + s * 2`` with ``s = 20000``)."""
    guards = []
    for index, node in enumerate(graph.inputs):
        if node.dtype.kind != "i":
            continue
        # a Python int argument, or an item taken out of a list of Python ints (weak)
        weak = [(node, None)] if node.weak else [
            (user, user.call.args[1]) for user in graph.consumers.get(node, ())
            if user.weak and user.kind == NUMPY and user.op == "getitem" and
            type(user.call.args[1]) is int]
        for item, key in weak:
            guard = _int_guard(graph, item, index, key)
            if guard is not None:
                guards.append(guard)
    for node in graph.nodes:  # ints computed from Python int arguments
        if node.kind == ELEMENTWISE and node.weak and node.dtype.kind == "i" and \
                node.ndim == 0 and all(
                    source.kind == CONST or (source.kind == ELEMENTWISE and source.weak) or
                    (source.kind == INPUT and source.weak and source.dtype.kind == "i")
                    for source in toposort([node])):
            guard = _int_guard(graph, node, -1, None)
            if guard is not None and guard.dtype != np.int64:  # (int64: wraps as numpy's)
                guards.append(guard._replace(node=node))
    return tuple(guards)


def _int_guard(graph: Any, item: Node, index: int, key: int | None) -> IntGuard | None:
    """The guard of the Python int ``item`` from its uses in integer loops, if any."""
    targets = [dtype for user in graph.consumers.get(item, ())
               if user.op not in _UNSAFE_CASTS
               for source, dtype in zip(user.inputs, getattr(user, "loop", ()), strict=False)
               if source is item and dtype.kind in "iu"]
    if not targets:
        return None
    low = max(int(np.iinfo(dtype).min) for dtype in targets)
    high = min(int(np.iinfo(dtype).max) for dtype in targets)
    narrowest = min(targets, key=lambda dtype: int(np.iinfo(dtype).max))
    return IntGuard(index, key, narrowest, low, high)


def _returned(value: Any, node: Node) -> Any:
    """Give back what numpy would: scalars for 0-d ufunc results, Python numbers for
    arithmetic on Python numbers, fresh copies of constant arrays."""
    if node.kind == CONST:
        constant = node.value.value
        return constant.copy() if isinstance(constant, np.ndarray) else constant
    if node.weak and isinstance(value, np.generic):
        return value.item()  # a Python number's item of a list argument, as it is there
    if node.kind == INPUT or not isinstance(value, np.ndarray):
        return value
    if value.ndim == 0:
        if node.weak:
            return value.item()
        if node.scalar:
            return value[()]
    return value
