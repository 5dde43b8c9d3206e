"""Running jitted functions on dask arrays.

A ``Jitted`` or ``Compiled`` called with a dask array among its arguments builds a dask
graph instead of computing: nothing runs until the user calls ``compute``/``persist``.
The function is compiled for the same signature a numpy array of that dtype, number of
dimensions and length-1 dimensions would have (one ``Compiled`` serves both), then its
plan is walked with dask values:

* a fused region runs block by block with ``dask.array.blockwise``: dask aligns the
  operands' chunks and broadcasts them as it does for ``x + y``, and each block task calls
  the region's kernel on numpy blocks exactly as the numpy runtime calls it on whole arrays
  (``runtime.kernel_runner``: the same operand preparation and gufunc call);
* a non-fusible numpy call (``np.sum``, ``@``, ``reshape``, indexing, ...) is replayed on
  the dask values, so numpy's ``__array_function__`` protocol hands it to dask's own
  implementation (tree reductions for ``sum``/``mean``, ...).  A numpy function dask does not
  implement raises ``UnsupportedOperationError`` rather than computing eagerly.

Reductions are therefore never fused into kernels here: each block's elementwise work is
one fused kernel call and dask reduces the per-block results.  The block tasks pickle (a
kernel pickles as its region and generated source and is compiled again, once per
process, on a ``dask.distributed`` worker).

This module imports dask; ``numfuse`` imports it only when a dask array is passed.
"""

from __future__ import annotations

import inspect
import math
import operator
import warnings
import weakref
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

from .errors import UnsupportedOperationError
from .graph import CONST, ELEMENTWISE, Node, tree_unflatten
from .kernel import Kernel
from .runtime import _check_int_arguments, _returned, kernel_runner

__all__ = ["KernelBlocks", "call_compiled", "call_jitted", "run"]

# Compilations of the same function and signature whose reductions stay numpy calls.
_unfused: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


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
    """Run ``compiled``'s plan on ``operands`` (dask arrays, numpy arrays and scalars of
    its signature); the results are dask arrays wherever an array operand fed them."""
    compiled = _without_fused_reductions(compiled, operands)
    if getattr(compiled.run, "int_guards", ()):
        _check_int_arguments(compiled.run.int_guards, operands)
    plan = compiled.plan
    graph = plan.graph
    values: dict[Node, Any] = dict(zip(graph.inputs, operands, strict=True))
    kernel_of = {kernel.region: kernel for kernel in compiled.kernels}
    for step in plan.steps or plan.regions:
        inputs = [_value(values, node) for node in step.inputs]
        if isinstance(step, Node):
            values[step] = _numpy_call(step, inputs)
        else:
            values.update(zip(step.outputs, _kernel_call(kernel_of[step], inputs),
                              strict=True))
    leaves = [_returned(values.get(node), node) for node in graph.outputs]
    return tree_unflatten(graph.treedef, leaves)


def _without_fused_reductions(compiled: Any, operands: Sequence[Any]) -> Any:
    """The same compilation with ``fuse_reductions=False`` where that option exists: a
    kernel that reduces would reduce each block on its own."""
    if _elementwise_kernels(compiled) or \
            "fuse_reductions" not in inspect.signature(type(compiled).__init__).parameters:
        return compiled
    unfused = _unfused.get(compiled)
    if unfused is None:
        shapes = [np.shape(value) for value in operands]
        unfused = type(compiled)(compiled.fn, compiled.specs, compiled.static, shapes,
                                 fuse_reductions=False)
        _unfused[compiled] = unfused
    return unfused


def _elementwise_kernels(compiled: Any) -> bool:
    return all(node.kind == ELEMENTWISE for region in compiled.plan.regions
               for node in region.nodes)


def _value(values: dict[Node, Any], node: Node) -> Any:
    if node.kind == CONST and node not in values:
        return node.param("value").value
    return values[node]


def _numpy_call(node: Node, inputs: list[Any]) -> Any:
    """Replay a numpy call; with dask inputs numpy dispatches it to dask."""
    with warnings.catch_warnings():
        # dask computes its inputs for functions it does not implement: refuse instead.
        warnings.filterwarnings("error", ".*is not implemented by Dask array", FutureWarning)
        try:
            return node.param("call").invoke(inputs)
        except FutureWarning:
            raise UnsupportedOperationError(
                f"np.{node.op} on a dask array",
                "dask has no lazy version of this numpy function; compute the array first "
                "or call it outside the jitted function (e.g. through da.map_blocks).",
            ) from None


def _kernel_call(kernel: Kernel, operands: list[Any]) -> tuple[Any, ...]:
    """The kernel's outputs as dask arrays computed block by block (or, when no operand
    is an array, computed now by the kernel itself)."""
    region = kernel.region
    if any(node.kind != ELEMENTWISE for node in region.nodes):
        raise NotImplementedError(
            f"kernel {kernel.name} reduces inside its loop, which on dask would reduce each "
            "block on its own; numfuse must compile this function with its reductions left "
            "as numpy calls (fuse_reductions=False) to run it on dask arrays."
        )
    arrays = [position for position, value in enumerate(operands)
              if isinstance(value, da.Array) or (isinstance(value, np.ndarray) and value.ndim)]
    if not arrays:
        return kernel_runner(kernel)(operands)
    ndim = len(region.ones)
    fixed = tuple((position, value) for position, value in enumerate(operands)
                  if position not in arrays)
    pairs: list[Any] = []
    for position in arrays:
        value = operands[position]
        pairs += [value, tuple(range(ndim - value.ndim, ndim))]
    metas = tuple(np.empty((0,) * ndim, node.dtype) for node in region.outputs)
    blocks = KernelBlocks(kernel, fixed)
    if len(metas) == 1:
        return (da.blockwise(blocks, tuple(range(ndim)), *pairs, meta=metas[0],
                             align_arrays=True),)
    combined = da.blockwise(blocks, tuple(range(ndim)), *pairs, meta=metas, align_arrays=True)
    return tuple(combined.map_blocks(operator.getitem, index, meta=meta)
                 for index, meta in enumerate(metas))


class KernelBlocks:
    """One kernel as a function of numpy blocks: ``blocks(*arrays)`` fills in the
    non-array operands (``fixed``: position and value) and returns the kernel's output, or
    the tuple of its outputs.  It pickles as the kernel and ``fixed``; the kernel compiles
    again when unpickled in another process."""

    def __init__(self, kernel: Kernel, fixed: tuple[tuple[int, Any], ...]) -> None:
        self.kernel = kernel
        self.fixed = fixed
        self.__name__ = f"numfuse-{kernel.name}"  # dask names the tasks after it
        self._run: Any = None

    def __call__(self, *blocks: Any) -> Any:
        run = self._run
        if run is None:
            run = self._run = kernel_runner(self.kernel)
        operands = list(blocks)
        for position, value in self.fixed:  # ascending positions
            operands.insert(position, value)
        results = run(operands)
        return results[0] if len(results) == 1 else results

    def __reduce__(self) -> tuple[Any, ...]:
        return KernelBlocks, (self.kernel, self.fixed)

    def __dask_tokenize__(self) -> Any:
        generated = self.kernel.generated
        # The source name alone is not enough: regions of different length-1 axes share
        # one source but present their operands differently.
        return ("numfuse-kernel", generated.name, generated.dropped_axes,
                generated.core_inputs, tuple(node.shape for node in self.kernel.region.inputs),
                self.fixed)
