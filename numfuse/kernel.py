"""A compiled kernel: one fused region, its generated source and its numba gufunc.

This is the unit users inspect (``Compiled.kernels``): it is callable on its own like any
numpy gufunc through ``kernel.gufunc``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .codegen import KernelSource
from .graph import Node
from .partition import Region


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
