"""A compiled kernel: one fused region, its generated source and its gufunc.

This is the unit users inspect (``Compiled.kernels``): it is callable on its own like any
numpy gufunc through ``kernel.gufunc``.  ``llvm_ir()`` and ``asm()`` ask the backend
(handed in as ``inspector``) for the optimised LLVM IR and the assembly only when called.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import threading
import types
from typing import Any, Protocol

from .codegen import KernelSource
from .graph import INPUT, Argument, Graph, Node
from .partition import Region
from .pytree import LEAF


class Inspector(Protocol):
    """Reads a compiled kernel's machine code; the backend provides it."""

    def llvm_ir(self, compiled: Any) -> str: ...

    def asm(self, compiled: Any) -> str: ...

    def kernel_symbol(self, compiled: Any) -> str: ...


@dataclasses.dataclass(frozen=True, eq=False)
class Kernel:
    """One compiled region: a numpy gufunc with several outputs, and how it was made.

    ``compiled`` is what the backend made of ``generated`` (its ``ufunc`` is the
    gufunc); ``inspector`` (the backend, handed in by whoever compiled the kernel)
    answers ``llvm_ir()``/``asm()``/``symbol()``, so this module never imports the backend.
    """

    region: Region
    generated: KernelSource
    compiled: Any
    inspector: Inspector | None = None

    @property
    def gufunc(self) -> Any:
        """The kernel as a numpy gufunc (``np.ufunc``), callable on its own."""
        return self.compiled.ufunc

    @property
    def name(self) -> str:
        return self.generated.name

    @property
    def n_inputs(self) -> int:
        return len(self.region.inputs)

    @property
    def n_outputs(self) -> int:
        """The gufunc's outputs: the region's, less those written into an input's buffer
        (plus a placeholder when that is all of them)."""
        generated = self.generated
        return len(self.region.outputs) - len(generated.donated) + generated.placeholder

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

    @property
    def graph(self) -> Graph:
        """The region alone as a graph: its inputs are arguments, its outputs returned."""
        return region_graph(self.region)

    def llvm_ir(self, function_only: bool = False) -> str:
        """The optimised LLVM IR of the module holding this kernel's function.

        With ``function_only=True``, only the definition of the kernel's element loop
        (``define ... @<symbol()>(...) { ... }``), without the module's declarations,
        constants and helper functions.
        """
        ir = self._inspector().llvm_ir(self.compiled)
        return ir_function(ir, self.symbol()) if function_only else ir

    def asm(self, function_only: bool = False) -> str:
        """The assembly of this kernel's module for this machine; with
        ``function_only=True``, only that of the kernel's element loop."""
        text = self._inspector().asm(self.compiled)
        return asm_function(text, self.symbol()) if function_only else text

    def symbol(self) -> str:
        """The LLVM name of the kernel's element loop: the function the gufunc's loop calls
        once per row (a line ``define ... @symbol(`` of the IR, a label ``symbol:`` of the
        assembly)."""
        return self._inspector().kernel_symbol(self.compiled)

    def _inspector(self) -> Inspector:
        if self.inspector is None:
            raise RuntimeError(
                f"kernel {self.name} was built without a backend to inspect it; get kernels "
                "from numfuse.compile(...).kernels to read their LLVM IR and assembly."
            )
        return self.inspector

    def __repr__(self) -> str:
        return f"<Kernel {self.name} {self.layout}: {len(self.nodes)} ops>"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as the region (cut off from the rest of the graph) and the generated
        source; unpickling compiles the source again through the same backend, once per
        process (compiled code itself cannot be pickled)."""
        compiler: Any = self.inspector
        if compiler is None:
            raise TypeError(f"kernel {self.name} was built without a backend and cannot be "
                            "pickled; pickle the kernels of numfuse.compile(...) instead.")
        if isinstance(compiler, types.ModuleType):
            compiler = compiler.__name__  # modules pickle by name
        return _unpickled_kernel, (_standalone(self.region), self.generated, compiler)


def ir_function(ir: str, symbol: str) -> str:
    """The definition of function ``symbol`` in the LLVM IR ``ir``, from its ``define``
    line to its closing brace ("" if ``ir`` does not define it)."""
    lines = ir.splitlines()
    for start, line in enumerate(lines):
        if line.startswith("define") and (f"@{symbol}(" in line or f'@"{symbol}"(' in line):
            end = start + 1
            while end < len(lines) and lines[end] != "}":
                end += 1
            return "\n".join(lines[start:end + 1]) + "\n"
    return ""


def asm_function(asm: str, symbol: str) -> str:
    """The assembly of function ``symbol``: from its label to the end of its code (its
    ``.Lfunc_end`` label or the next function's ``.type``), "" if ``asm`` has no such label."""
    lines = asm.splitlines()
    labels = (f"{symbol}:", f'"{symbol}":')
    for start, line in enumerate(lines):
        if line in labels:
            end = start + 1
            while end < len(lines) and not lines[end].startswith(".Lfunc_end") \
                    and not lines[end].lstrip().startswith(".type"):
                end += 1
            return "\n".join(lines[start:end]) + "\n"
    return ""


def region_graph(region: Region) -> Graph:
    """A standalone ``Graph`` of ``region``: each external input becomes an argument node
    (0-d constants stay constants), members are rebuilt on top, region outputs returned."""
    replaced: dict[Node, Node] = {}
    arguments = []
    for index, source in enumerate(region.inputs):
        argument = Node("arg", INPUT, (), source.dtype, source.shape, Argument(index),
                        weak=source.weak, scalar=source.scalar)
        replaced[source] = argument
        arguments.append(argument)
    for node in region.nodes:
        inputs = tuple(replaced.get(source, source) for source in node.inputs)
        replaced[node] = dataclasses.replace(node, inputs=inputs)
    outputs = tuple(replaced[node] for node in region.outputs)
    return Graph(tuple(arguments), outputs, treedef=(tuple, (LEAF,) * len(outputs)))


def kernel_key(source: KernelSource) -> tuple[str, tuple[int, ...]]:
    """What tells compiled kernels apart: the source's name and its operands' numpy types
    (``int64`` and ``longlong`` are one machine type and one source, but numpy's results
    have the type of the loop numpy picked: each its own gufunc)."""
    program = source.program
    return source.name, () if program is None else tuple(
        operand.dtype.num for operand in program.operands)


# Kernels unpickled in this process, by source and types (``kernel_key``): each compiles
# once.
_unpickled: dict[tuple[str, tuple[int, ...]], Any] = {}
_unpickled_lock = threading.Lock()
if hasattr(os, "register_at_fork"):  # (as the backend's lock: see there)
    os.register_at_fork(before=_unpickled_lock.acquire,
                        after_in_parent=_unpickled_lock.release,
                        after_in_child=_unpickled_lock.release)


def _unpickled_kernel(region: Region, generated: KernelSource, compiler: Any) -> Kernel:
    if isinstance(compiler, str):
        compiler = importlib.import_module(compiler)
    with _unpickled_lock:
        key = kernel_key(generated)
        gufunc = _unpickled.get(key)
        if gufunc is None:
            gufunc = _unpickled[key] = compiler.compile_gufunc(generated)
    return Kernel(region, generated, gufunc, compiler)


def _standalone(region: Region) -> Region:
    """``region`` with its inputs replaced by argument nodes of the same type, so that
    pickling it does not carry the graph upstream of it (constants, other calls)."""
    replaced: dict[Node, Node] = {
        source: Node("arg", INPUT, (), source.dtype, source.shape, Argument(index),
                     weak=source.weak, scalar=source.scalar)
        for index, source in enumerate(region.inputs)
    }
    for node in (*region.prelude, *region.nodes):
        inputs = tuple(replaced.get(source, source) for source in node.inputs)
        replaced[node] = dataclasses.replace(node, inputs=inputs)
    return dataclasses.replace(
        region, inputs=tuple(replaced[node] for node in region.inputs),
        outputs=tuple(replaced[node] for node in region.outputs),
        nodes=tuple(replaced[node] for node in region.nodes),
        prelude=tuple(replaced[node] for node in region.prelude))
