"""Running jitted functions on dask arrays.

A ``Jitted`` or ``Compiled`` called with a dask array among its arguments builds a dask
graph instead of computing: nothing runs until the user calls ``compute``/``persist``.
The function is compiled for the same signature a numpy array of that dtype, number of
dimensions and length-1 dimensions would have (one ``Compiled`` serves both), then its
program is interpreted on dask values (``runtime.Program.interpret``) with a dask runner
for its kernel steps; the numpy-call steps and the result assembly are the program's own:

* a kernel step (``DaskKernel``) runs block by block with ``dask.array.blockwise``: dask
  aligns the operands' chunks and broadcasts them as it does for ``x + y``, and each block
  task calls the region's kernel on numpy blocks exactly as the numpy runtime calls it on
  whole arrays (``runtime.kernel_runner``: the same operand preparation and gufunc call);
* a non-fusible numpy call (``np.sum``, ``@``, ``reshape``, indexing, ...) is replayed on
  the dask values, so numpy's ``__array_function__`` protocol hands it to dask's own
  implementation (tree reductions for ``sum``/``mean``, ...).  A numpy function dask does not
  implement raises ``UnsupportedOperationError`` rather than computing eagerly
  (``LazyCall``);
* a reduction fused into a kernel (``partition.epilogue``) stays fused: each block task
  returns the block's elementwise outputs and, for each reduction, the block's raw total
  with the reduced axes kept as length 1 (``runtime.block_runner``); dask's tree reduction
  of the same ufunc then combines the blocks' totals, and keepdims and the division by the
  count of ``mean``/``var`` are applied to its lazy result.  So the elementwise work of a
  block and its reduction are one loop that materialises nothing the size of the block.

The block tasks pickle (a kernel pickles as its region and generated source and is
compiled again, once per process, on a ``dask.distributed`` worker).

Floating-point errors are raised when dask computes, under the ``np.errstate`` of the
thread computing; a block task of a kernel whose work the function put under error
handling of its own (``np.errstate``/warnings filters inside it) runs under that.  A numpy
call handed to dask computes under dask's state only.

This module imports dask; ``numfuse`` imports it only when a dask array is passed.
"""

from __future__ import annotations

import functools
import math
import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    import dask.array as da
except ImportError as error:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "numfuse's dask support needs dask: install the extra with "
        "`pip install 'numfuse[dask]'` (dask[array], distributed and xarray)."
    ) from error

from . import reductions
from .errors import UnsupportedOperationError, outside_numfuse
from .graph import ELEMENTWISE, Node
from .kernel import Kernel
from .reductions import Reduction
from .runtime import (
    CallStep,
    KernelStep,
    LocalRunner,
    Runner,
    block_runner,
    governed,
    kernel_runner,
)

__all__ = ["DaskKernel", "KernelBlocks", "LazyCall", "call_compiled", "call_jitted", "run"]



def call_jitted(jitted: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``jitted(*args, **kwargs)`` where some arguments are dask arrays: dask results."""
    stand_ins: dict[int, Any] = {}
    args = tuple(_stand_in(value, stand_ins) for value in args)
    kwargs = {name: _stand_in(value, stand_ins) for name, value in kwargs.items()}
    compiled, operands = jitted.specialize(*args, **kwargs)
    return run(compiled, [stand_ins.get(id(value), value) for value in operands])


def call_compiled(compiled: Any, args: Sequence[Any]) -> Any:
    """``compiled(*args)`` where some arguments are dask arrays: dask results."""
    stand_ins: dict[int, Any] = {}
    checked = compiled.check_arguments([_stand_in(value, stand_ins) for value in args])
    return run(compiled, [stand_ins.get(id(value), value) for value in checked])


def _stand_in(value: Any, stand_ins: dict[int, Any]) -> Any:
    """A zero-stride numpy array with the dask array's dtype and shape, which has the same
    signature; ``stand_ins`` maps it back to the dask array."""
    if not isinstance(value, da.Array):
        return value
    if any(math.isnan(size) for size in value.shape):
        raise ValueError(
            f"a dask array of shape {value.shape} has unknown (nan) sizes, and numfuse needs "
            "the sizes to broadcast like numpy; call x.compute_chunk_sizes() first."
        )
    stand_in = np.broadcast_to(np.empty((), value.dtype), value.shape)
    stand_ins[id(stand_in)] = value
    return stand_in


def run(compiled: Any, operands: Sequence[Any]) -> Any:
    """Run ``compiled``'s program on ``operands`` (dask arrays, numpy arrays and scalars of
    its signature); the results are dask arrays wherever an array operand fed them."""
    program = compiled.program
    runners: tuple[Runner, ...] = tuple(
        DaskKernel(step) if isinstance(step, KernelStep) else LazyCall(step)
        for step in program.steps)
    return program.interpret(operands, runners=runners)


class LazyCall:
    """Runs a numpy-call step on dask values, which numpy hands to dask; refuses a numpy
    function dask does not implement, for which dask would compute its inputs."""

    __slots__ = ("step",)

    def __init__(self, step: CallStep) -> None:
        self.step = step

    def run(self, values: list[Any]) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", ".*is not implemented by Dask array",
                                    FutureWarning)
            try:
                self.step.run(values)
            except FutureWarning:
                raise UnsupportedOperationError(
                    f"np.{self.step.op} on a dask array",
                    "dask has no lazy version of this numpy function; compute the array "
                    "first or call it outside the jitted function (e.g. through "
                    "da.map_blocks).",
                ) from None


class DaskKernel:
    """Runs a kernel step on dask values: its outputs are dask arrays computed block by
    block (or, when no operand is an array, computed now in the calling thread)."""

    __slots__ = ("step",)

    def __init__(self, step: KernelStep) -> None:
        self.step = step

    def run(self, values: list[Any]) -> None:
        step = self.step
        operands = [values[slot] for slot in step.inputs]
        arrays = [position for position, value in enumerate(operands)
                  if isinstance(value, da.Array) or (isinstance(value, np.ndarray) and value.ndim)]
        if not arrays:
            governed(LocalRunner(step), step.errstate).run(values)
            return
        if any(math.isnan(size) for position in arrays for size in operands[position].shape):
            raise UnsupportedOperationError(
                "a size that depends on the values (x[mask], np.nonzero, np.unique, ...) "
                "feeding a fused kernel on dask arrays",
                "dask does not know such sizes before computing; return that value from the "
                "jitted function and continue outside it, or compute the dask array first.",
            )
        results = _blockwise(step.kernel, operands, arrays)
        for slot, result in zip(step.outputs, results, strict=True):
            values[slot] = result


def _blockwise(kernel: Kernel, operands: list[Any], arrays: list[int]) -> tuple[Any, ...]:
    """The kernel's outputs (in the region's order) as dask arrays computed block by
    block from ``operands``, of which those at ``arrays`` are arrays."""
    region = kernel.region
    if region.reduced:
        return _passes_blockwise(kernel, operands, arrays)
    ndim = len(region.ones)
    fixed = tuple((position, value) for position, value in enumerate(operands)
                  if position not in arrays)
    pairs: list[Any] = []
    for position in arrays:
        value = operands[position]
        pairs += [value, tuple(range(ndim - value.ndim, ndim))]
    folded: list[Reduction | None] = [
        None if node.kind == ELEMENTWISE else node.reduction
        for node in region.outputs]
    metas = tuple(np.empty((0,) * ndim, node.dtype if reduction is None else reduction.dtype)
                  for node, reduction in zip(region.outputs, folded, strict=True))
    blocks = KernelBlocks(kernel, fixed, totals=any(folded))
    index = tuple(range(ndim))
    if len(metas) == 1:
        kept = {} if folded[0] is None else {axis: 1 for axis in folded[0].axes}
        results = (da.blockwise(blocks, index, *pairs, meta=metas[0], align_arrays=True,
                                adjust_chunks=kept),)
    else:
        combined = da.blockwise(blocks, index, *pairs, meta=metas, align_arrays=True)
        results = tuple(combined.map_blocks(operator.getitem, position, meta=meta,
                                            chunks=_block_chunks(combined.chunks, reduction))
                        for position, (meta, reduction) in enumerate(zip(metas, folded,
                                                                         strict=True)))
    shape = np.broadcast_shapes((1,) * ndim, *(operands[position].shape for position in arrays))
    return tuple(result if reduction is None else _reduced(result, reduction, shape)
                 for result, reduction in zip(results, folded, strict=True))


def _passes_blockwise(kernel: Kernel, operands: list[Any], arrays: list[int]
                      ) -> tuple[Any, ...]:
    """``_blockwise`` of a kernel of passes (``codegen.emit_passes``): each array is
    first put in one chunk along the accumulated axes, so that every block holds whole
    columns and computes their results as the kernel does on a whole array (the rows
    added in order); blocks split the other axes only.  Each block gives its outputs with
    the loop's number of axes (``KernelBlocks``), the accumulated ones of length 1 for
    values constant along them; those are then given numpy's shapes."""
    region = kernel.region
    ndim, reduced = len(region.ones), region.reduced
    operands = list(operands)
    pairs: list[Any] = []
    for position in arrays:
        value = operands[position]
        offset = ndim - value.ndim
        whole = {axis - offset: -1 for axis in reduced if axis >= offset}
        if isinstance(value, da.Array) and whole:
            value = operands[position] = value.rechunk(whole)
        pairs += [value, tuple(range(offset, ndim))]
    fixed = tuple((position, value) for position, value in enumerate(operands)
                  if position not in arrays)
    columns = [node.kind != ELEMENTWISE or node.ones != region.ones
               for node in region.outputs]
    metas = tuple(np.empty((0,) * ndim, node.dtype) for node in region.outputs)
    blocks = KernelBlocks(kernel, fixed, aligned=True)
    index = tuple(range(ndim))
    if len(metas) == 1:
        kept = {axis: 1 for axis in reduced} if columns[0] else {}
        results: tuple[Any, ...] = (da.blockwise(blocks, index, *pairs, meta=metas[0],
                                                 align_arrays=True, adjust_chunks=kept),)
    else:
        combined = da.blockwise(blocks, index, *pairs, meta=metas, align_arrays=True)
        results = tuple(combined.map_blocks(
            operator.getitem, position, meta=meta, chunks=tuple(
                (1,) * len(sizes) if column and axis in reduced else sizes
                for axis, sizes in enumerate(combined.chunks)))
            for position, (meta, column) in enumerate(zip(metas, columns, strict=True)))
    return tuple(_unaligned(result, node, ndim)
                 for result, node in zip(results, region.outputs, strict=True))


def _aligned(value: Any, node: Node, ndim: int) -> Any:
    """A block's output ``value`` of ``node`` with the loop's ``ndim`` axes: a reduction's
    reduced axes put back as length 1, missing leading axes added."""
    reduction = node.reduction
    if node.kind != ELEMENTWISE and reduction is not None and not reduction.keepdims:
        return np.expand_dims(value, reduction.axes)
    return np.reshape(value, (1,) * (ndim - np.ndim(value)) + np.shape(value))


def _unaligned(result: Any, node: Node, ndim: int) -> Any:
    """The inverse of ``_aligned`` on the dask array of the blocks' outputs."""
    reduction = node.reduction
    if node.kind != ELEMENTWISE and reduction is not None and not reduction.keepdims:
        return result.squeeze(axis=reduction.axes)
    if node.ndim < ndim:
        return result.squeeze(axis=tuple(range(ndim - node.ndim)))
    return result


def _block_chunks(chunks: tuple[tuple[int, ...], ...], reduction: Reduction | None
                  ) -> tuple[tuple[int, ...], ...]:
    """The chunks of a kernel output: those of the loop, or one length-1 total per block
    along each reduced axis."""
    if reduction is None:
        return chunks
    return tuple((1,) * len(sizes) if axis in reduction.axes else sizes
                 for axis, sizes in enumerate(chunks))


def _reduced(totals: Any, reduction: Reduction, shape: tuple[int, ...]) -> Any:
    """Combine the blocks' raw totals with dask's tree reduction of the same ufunc, then
    apply keepdims and the division by the whole count (lazily), as numpy would."""
    count = math.prod(shape[axis] for axis in reduction.axes)
    if count == 0 and reduction.ufunc in ("maximum", "minimum"):
        getattr(np, reduction.ufunc).reduce(np.empty(0, reduction.dtype))  # numpy's error
    ndim = totals.ndim - (0 if reduction.keepdims else len(reduction.axes))
    combine = functools.partial(_combined, ufunc=reduction.ufunc, dtype=reduction.dtype)
    total = da.reduction(totals, _block_total, combine, axis=reduction.axes,
                         keepdims=reduction.keepdims, dtype=reduction.dtype,
                         meta=np.empty((0,) * ndim, reduction.dtype),
                         name=f"numfuse-{reduction.ufunc}")
    if reduction.divide is None:
        return total
    # The warnings point at the user's call of the jitted function, as numpy's would.
    if reduction.divide == "mean" and count == 0:
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=outside_numfuse())
    elif reduction.divide == "ddof" and reduction.ddof >= count:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning,
                      stacklevel=outside_numfuse())
    divisor = max(count - reduction.ddof, 0) if reduction.divide == "ddof" else count
    return total.map_blocks(_divided, divisor, token="numfuse-divide-by-count",
                            meta=np.empty((0,) * total.ndim, reduction.dtype))


def _block_total(block: Any, axis: tuple[int, ...], keepdims: bool) -> Any:
    """The tree reduction's first step: a block's total is computed already."""
    return block


def _combined(totals: Any, axis: tuple[int, ...], keepdims: bool, ufunc: str,
              dtype: np.dtype) -> Any:
    """Blocks' totals combined as numpy reduces (dask concatenates them first)."""
    return getattr(np, ufunc).reduce(totals, axis=axis, dtype=dtype, keepdims=keepdims)


def _divided(total: Any, divisor: int) -> Any:
    """One block of a completed sum divided by the count as ``np.mean`` divides it."""
    if isinstance(total, np.ndarray):
        total = total.copy()  # divided in place; dask may hold the block elsewhere
    quotient = reductions.divide_by_count(total, divisor, "quiet", 0)
    return quotient[()] if quotient.ndim == 0 else quotient  # numpy gives 0-d as a scalar


class KernelBlocks:
    """One kernel as a function of numpy blocks: ``blocks(*arrays)`` fills in the
    non-array operands (``fixed``: position and value) and returns the kernel's output, or
    the tuple of its outputs; with ``totals`` each fused reduction's output is the block's
    raw total (``runtime.block_runner``).  It pickles as the kernel, ``fixed`` and
    ``totals``; the kernel compiles again when unpickled in another process."""

    def __init__(self, kernel: Kernel, fixed: tuple[tuple[int, Any], ...],
                 totals: bool = False, aligned: bool = False) -> None:
        self.kernel = kernel
        self.fixed = fixed
        self.totals = totals
        self.aligned = aligned  # outputs with the loop's number of axes (``_aligned``)
        self.__name__ = f"numfuse-{kernel.name}"  # dask names the tasks after it
        self._run: Any = None

    def __call__(self, *blocks: Any) -> Any:
        run = self._run
        if run is None:
            run = self._run = (block_runner if self.totals else kernel_runner)(self.kernel)
        operands = list(blocks)
        for position, value in self.fixed:  # ascending positions
            operands.insert(position, value)
        results = run(operands)
        if self.aligned:
            region = self.kernel.region
            results = tuple(_aligned(result, node, len(region.ones))
                            for result, node in zip(results, region.outputs, strict=True))
        # numpy gives a 0-d ufunc result as a scalar (a 0-d loop: a 0-d dask array)
        results = tuple(result[()] if isinstance(result, np.ndarray) and result.ndim == 0
                        else result for result in results)
        return results[0] if len(results) == 1 else results

    def __reduce__(self) -> tuple[Any, ...]:
        return KernelBlocks, (self.kernel, self.fixed, self.totals, self.aligned)

    def __dask_tokenize__(self) -> Any:
        generated = self.kernel.generated
        # The source name alone is not enough: regions of different length-1 axes share
        # one source but present their operands differently.
        return ("numfuse-kernel", generated.name, generated.dropped_axes,
                generated.core_inputs, tuple(node.shape for node in self.kernel.region.inputs),
                self.fixed, self.totals, self.aligned, self.kernel.region.errstate)
