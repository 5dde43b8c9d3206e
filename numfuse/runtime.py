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
from collections.abc import Sequence
from typing import Any

import numpy as np

from .codegen import KernelSource
from .graph import CONST, INPUT, Node, tree_unflatten
from .partition import Plan, Region


@dataclasses.dataclass(frozen=True, eq=False)
class Kernel:
    """One compiled region: a numba gufunc with several outputs, and how it was made."""

    region: Region
    generated: KernelSource
    gufunc: Any

    @property
    def name(self) -> str:
        return self.generated.name

    @property
    def n_inputs(self) -> int:
        return len(self.region.inputs)

    @property
    def n_outputs(self) -> int:
        return len(self.region.outputs)

    @property
    def layout(self) -> str:
        return self.generated.layout

    @property
    def source(self) -> str:
        return self.generated.source

    @property
    def signature(self) -> str:
        return self.generated.signature

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.region.nodes

    def __repr__(self) -> str:
        return f"<Kernel {self.name} {self.layout}: {len(self.nodes)} ops>"


@dataclasses.dataclass(frozen=True)
class _Operand:
    slot: int
    squeeze: tuple[int, ...]  # axes to drop before the call
    contiguous: bool          # the kernel reads it as a contiguous (n) array
    as_vector: bool           # a region without non-unit axes: pass as shape (1,)


@dataclasses.dataclass(frozen=True)
class _Step:
    gufunc: Any
    operands: tuple[_Operand, ...]
    out_slots: tuple[int, ...]
    expand: tuple[int, ...]           # axes to put back into every output
    vector_shape: tuple[int, ...] | None  # full shape of outputs of a (1,) region


def _prepare(value: Any, operand: _Operand) -> Any:
    if operand.as_vector:
        return np.reshape(value, (1,))
    if operand.squeeze:
        value = np.squeeze(value, operand.squeeze)
    if operand.contiguous:
        strides = value.strides
        if strides and strides[-1] != value.itemsize and value.shape[-1] > 1:
            value = np.ascontiguousarray(value)
    return value


class Program:
    """The executable form of a plan: ``program(args) -> result`` in the traced structure."""

    def __init__(self, plan: Plan, kernels: Sequence[Kernel]) -> None:
        graph = plan.graph
        slots: dict[Node, int] = {}
        constants: list[tuple[int, Any]] = []
        for node in graph.inputs:
            slots[node] = len(slots)
        self.n_args = len(graph.inputs)
        steps = []
        for kernel in kernels:
            region = kernel.region
            for node in region.inputs:
                if node not in slots:
                    slots[node] = len(slots)
                    if node.kind == CONST:
                        constants.append((slots[node], node.param("value").value))
            for node in region.outputs:
                slots[node] = len(slots)
            steps.append(_make_step(kernel, slots))
        self.returns = []
        for node in graph.outputs:
            if node in slots:
                self.returns.append((slots[node], node))
            else:
                self.returns.append((-1, node))
        self.n_slots = len(slots)
        self.constants = tuple(constants)
        self.steps = tuple(steps)
        self.treedef = graph.treedef

    def __call__(self, args: Sequence[Any]) -> Any:
        values: list[Any] = list(args) + [None] * (self.n_slots - len(args))
        for slot, constant in self.constants:
            values[slot] = constant
        for step in self.steps:
            operands = [_prepare(values[operand.slot], operand) for operand in step.operands]
            results = step.gufunc(*operands)
            if len(step.out_slots) == 1:
                results = (results,)
            for slot, result in zip(step.out_slots, results, strict=True):
                if step.vector_shape is not None:
                    result = result.reshape(step.vector_shape)
                elif step.expand:
                    result = np.expand_dims(result, step.expand)
                values[slot] = result
        leaves = [_returned(values[slot] if slot >= 0 else None, node)
                  for slot, node in self.returns]
        return tree_unflatten(self.treedef, leaves)


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


def _make_step(kernel: Kernel, slots: dict[Node, int]) -> _Step:
    region, generated = kernel.region, kernel.generated
    ndim = generated.ndim
    dropped = generated.dropped_axes
    vector = len(dropped) == ndim
    operands = []
    core_axis = max(set(range(ndim)) - set(dropped)) if not vector else None
    for node, core in zip(region.inputs, generated.core_inputs, strict=True):
        offset = ndim - node.ndim
        axes = {axis - offset for axis in dropped if axis - offset >= 0}
        if not core and core_axis is not None and core_axis - offset >= 0:
            axes.add(core_axis - offset)
        operands.append(_Operand(slots[node], tuple(sorted(axes)), core and not vector, vector))
    return _Step(
        kernel.gufunc,
        tuple(operands),
        tuple(slots[node] for node in region.outputs),
        dropped if not vector else (),
        (1,) * ndim if vector else None,
    )
