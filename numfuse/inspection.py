"""Inspection: ``explain()`` reports and the vectorisation report.

``explain(compiled, args)`` describes what fusion did to one compiled function: its regions
(the nodes of each, its outputs and why each is materialised), every place where fusion
stopped and why, the temporary arrays numpy would have allocated that the kernels keep in
registers, and for each kernel whether LLVM vectorised its loop.

The vectorisation report is read from the kernel's optimised LLVM IR, not from LLVM's
remarks (llvmlite does not expose them): the widest vector type in the kernel's function
gives the loop's width, and calls to math functions that have no vector version show what
keeps it scalar.  Without a vector math library LLVM may still widen a loop containing
``exp`` to ``<8 x double>``, but it then splits ``llvm.exp.v8f64`` into eight calls to
libm's scalar ``exp`` (visible in the assembly), so such a loop is reported as *not*
vectorised, blocked by ``exp``.

Boundary reasons are derived from the public plan alone (regions, node kinds and loop
shapes, ``MAX_OPERANDS``), so they describe the partition the compiled function really
has, whichever algorithm produced it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .calls import is_elementwise_call
from .graph import CONST, ELEMENTWISE, INPUT, NUMPY, Graph, Node
from .partition import MAX_OPERANDS, Region, is_kernel_input, path_through_outside

if TYPE_CHECKING:
    from .kernel import Kernel

# ---------------------------------------------------------------- vectorisation report

# Intrinsics LLVM lowers to calls into the C math library when no vector library is set.
LIBM_INTRINSICS = frozenset({
    "exp", "exp2", "exp10", "log", "log2", "log10", "sin", "cos", "tan", "asin", "acos",
    "atan", "atan2", "sinh", "cosh", "tanh", "pow", "powi", "sincos", "frexp", "ldexp",
})
# Symbols of vector math libraries (glibc's libmvec, Intel's SVML): vectorised calls.
_VECTOR_LIBRARY = re.compile(r"^(_ZGV|__svml_)")
_CALL = re.compile(r"\bcall\b[^@]*@\"?([\w.$]+)\"?\(")
_VECTOR_TYPE = re.compile(r"<(\d+) x (\w+)>")
_TYPE_SUFFIX = re.compile(r"^(v\d+)?[fi]\d+$")


@dataclasses.dataclass(frozen=True)
class VectorReport:
    """Whether one kernel's loop was vectorised, read from its optimised LLVM IR.

    ``width`` is the lane count of the widest vector operation in the kernel's function
    (1 when there is none) and ``element`` its LLVM element type.  ``scalar_calls`` names
    the functions the loop calls once per element (libm functions with no vector version).
    ``vectorised`` is True when the loop is wider than one lane and no call is scalar.
    """

    kernel: str
    width: int
    element: str | None
    scalar_calls: tuple[str, ...]

    @property
    def vectorised(self) -> bool:
        return self.width > 1 and not self.scalar_calls

    def summary(self) -> str:
        if self.vectorised:
            return f"vectorised: {self.width} x {self.element} lanes per step"
        calls = ", ".join(self.scalar_calls)
        if self.scalar_calls and self.width > 1:
            return (f"not vectorised: blocked by scalar libm call(s) to {calls}; LLVM widened "
                    f"the loop to {self.width} lanes but calls {calls} once per element "
                    "(no vector math library is configured)")
        if self.scalar_calls:
            return f"not vectorised: blocked by the scalar call(s) to {calls}"
        return ("not vectorised: LLVM kept the loop scalar although no call blocks it "
                "(integer division and data-dependent branches are common causes)")


def function_body(ir: str, symbol: str) -> list[str]:
    """The lines of the function ``symbol`` defined in ``ir`` (empty if not defined)."""
    lines = ir.splitlines()
    for start, line in enumerate(lines):
        if line.startswith("define") and f"@{symbol}(" in line:
            end = start + 1
            while end < len(lines) and lines[end] != "}":
                end += 1
            return lines[start + 1:end]
    return []


def _split_intrinsic(name: str) -> tuple[str, bool] | None:
    """``llvm.exp.v8f64`` -> (``exp``, True); None for a call that is not an intrinsic."""
    if not name.startswith("llvm."):
        return None
    parts = name.split(".")[1:]
    suffix = parts[-1] if len(parts) > 1 and _TYPE_SUFFIX.match(parts[-1]) else ""
    base = ".".join(parts[:-1] if suffix else parts)
    return base, suffix.startswith("v")


def vector_report(ir: str, symbol: str, kernel: str = "") -> VectorReport:
    """Read the vectorisation of function ``symbol`` from optimised LLVM IR."""
    body = function_body(ir, symbol)
    widest: tuple[int, str | None] = (1, None)
    for line in body:
        for lanes, element in _VECTOR_TYPE.findall(line):
            if int(lanes) > widest[0] and element != "i1":
                widest = (int(lanes), element)
    vector_native: set[str] = set()
    scalarised: set[str] = set()
    external: set[str] = set()
    for line in body:
        if widest[0] > 1 and re.search(r"\bfrem <\d+ x", line):
            scalarised.add("fmod")  # a vector frem is lowered to fmod calls lane by lane
        for name in _CALL.findall(line):
            intrinsic = _split_intrinsic(name)
            if intrinsic is None:
                if not _VECTOR_LIBRARY.match(name):
                    external.add(name)
                continue
            base, is_vector = intrinsic
            if base in LIBM_INTRINSICS:
                scalarised.add(base)
            elif is_vector:
                vector_native.add(base)
    # A scalar call with a native vector form in the same loop (``sqrt`` beside
    # ``llvm.sqrt.v8f64``) is the cold path of a vectorised operation, not a blocker.
    scalar_calls = scalarised | (external - vector_native)
    return VectorReport(kernel, widest[0], widest[1], tuple(sorted(scalar_calls)))


def kernel_vector_report(kernel: Kernel) -> VectorReport:
    return vector_report(kernel.llvm_ir(), kernel.symbol(), kernel.name)


# ---------------------------------------------------------------- explain()

NON_FUSIBLE = "non-fusible op"
REDUCTION = "reduction boundary"
LOOP_SHAPE = "different loop shape"
CYCLE = "would create a cycle"
OPERAND_CAP = "operand cap"
GREEDY = "not merged by the partitioner"

REDUCTIONS = frozenset({
    "sum", "prod", "mean", "std", "var", "min", "max", "amin", "amax", "argmin", "argmax",
    "all", "any", "nansum", "nanprod", "nanmean", "nanmin", "nanmax", "cumsum", "cumprod",
    "reduce", "average", "median", "count_nonzero", "ptp",
})


def node_names(graph: Graph) -> dict[Node, str]:
    """The names ``str(graph)`` uses: ``a, b, ..., z, aa, ...`` in ``graph.nodes`` order."""
    names = {}
    for index, node in enumerate(graph.nodes):
        name, number = "", index + 1
        while number:
            number, rest = divmod(number - 1, 26)
            name = chr(ord("a") + rest) + name
        names[node] = name
    return names


def _ref(node: Node, names: dict[Node, str]) -> str:
    if node.kind == CONST and node.ndim == 0:
        return repr(node.param("value"))
    return names[node]


def equation(node: Node, names: dict[Node, str]) -> str:
    """One line in the style of ``str(graph)``: ``c:f64[n] = subtract a b``."""
    operands = [_ref(source, names) for source in node.inputs]
    call = node.param("call")
    if call is not None and hasattr(call, "describe"):
        text = call.describe(operands)
    else:
        text = " ".join([node.op, *operands])
    return f"{names[node]}:{node.type_str()} = {text}"


@dataclasses.dataclass(frozen=True)
class RegionReport:
    """One fused region: its equations, its outputs with the reasons each is stored."""

    index: int
    kernel: str
    layout: str
    equations: tuple[str, ...]
    outputs: tuple[tuple[str, tuple[str, ...]], ...]
    vector: VectorReport | None


@dataclasses.dataclass(frozen=True)
class Boundary:
    """A value crossing from one step to another where fusion stopped, and why."""

    value: str
    producer: str
    consumer: str
    reason: str
    detail: str

    def __str__(self) -> str:
        return (f"{self.producer} -> {self.consumer} at {self.value}: {self.reason} "
                f"({self.detail})")


@dataclasses.dataclass(frozen=True)
class Explanation:
    """What fusion did to one compiled function; ``str()`` is the readable report.

    ``temporaries`` are the values numpy would materialise as arrays that numfuse keeps
    in registers; ``bytes_avoided`` is their total size for the example arguments (None
    when no arguments were given) and ``bytes_per_element`` the same per loop element.
    """

    function: str
    signature: str
    regions: tuple[RegionReport, ...]
    boundaries: tuple[Boundary, ...]
    other_steps: tuple[str, ...]
    numpy_loops: int
    temporaries: tuple[str, ...]
    bytes_per_element: int
    bytes_avoided: int | None

    @property
    def reasons(self) -> set[str]:
        return {boundary.reason for boundary in self.boundaries}

    def __str__(self) -> str:
        return "\n".join(report_lines(self))

    def _repr_html_(self) -> str:
        from .display import explanation_html

        return explanation_html(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def report_lines(explanation: Explanation) -> list[str]:
    e = explanation
    lines = [f"numfuse.explain: {e.function}({e.signature})",
             f"  {e.numpy_loops} numpy elementwise loop(s) -> {len(e.regions)} fused kernel(s)"]
    for region in e.regions:
        lines.append(f"region {region.index}: kernel {region.kernel} {region.layout}")
        lines += [f"    {text}" for text in region.equations]
        for name, why in region.outputs:
            lines.append(f"  output {name}: {'; '.join(why)}")
        if region.vector is not None:
            lines.append(f"  {region.vector.summary()}")
    if e.other_steps:
        lines.append("not fused (run by numpy):")
        lines += [f"    {text}" for text in e.other_steps]
    lines.append("fusion boundaries:" if e.boundaries else "fusion boundaries: none")
    lines += [f"  {boundary}" for boundary in e.boundaries]
    return lines + memory_lines(e)


def memory_lines(explanation: Explanation) -> list[str]:
    """The temporaries numpy would allocate that the kernels avoid, and their bytes."""
    e = explanation
    avoided = ", ".join(e.temporaries) or "none"
    lines = [f"temporaries numpy would allocate and numfuse does not: {avoided}"]
    if e.bytes_avoided is not None:
        lines.append(f"  {_bytes(e.bytes_avoided)} avoided for these arguments "
                     f"({e.bytes_per_element} bytes per element)")
    else:
        lines.append(f"  {e.bytes_per_element} bytes per element avoided "
                     "(pass example arguments to explain() for totals)")
    return lines


def _bytes(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return f"{count} B"  # pragma: no cover


def explain(graph: Graph, regions: Sequence[Region], kernels: Sequence[Kernel] | None,
            function: str, signature: str, args: Sequence[Any] | None = None,
            vectorisation: bool = True) -> Explanation:
    """Build the report for a partitioned ``graph`` (see ``Explanation``)."""
    names = node_names(graph)
    owner = {node: region.index for region in regions for node in region.nodes}
    reports = []
    for region in regions:
        kernel = kernels[region.index] if kernels is not None else None
        vector = kernel_vector_report(kernel) if kernel is not None and vectorisation else None
        reports.append(RegionReport(
            region.index, kernel.name if kernel is not None else "-",
            kernel.layout if kernel is not None else "",
            tuple(equation(node, names) for node in region.nodes),
            tuple((names[node], _output_reasons(node, graph, owner, names))
                  for node in region.outputs),
            vector,
        ))
    others = tuple(equation(node, names) for node in graph.nodes
                   if node.kind not in (INPUT, CONST, ELEMENTWISE))
    stored = {node for region in regions for node in region.outputs}
    temporaries = [node for region in regions for node in region.nodes if node not in stored]
    shapes = concrete_shapes(graph, args) if args is not None else None
    avoided = None
    if shapes is not None:
        avoided = 0
        for node in temporaries:
            shape = shapes.get(node)
            if shape is not None:
                avoided += math.prod(shape) * node.dtype.itemsize
    return Explanation(
        function, signature, tuple(reports),
        tuple(boundaries(graph, regions, names)), others,
        sum(1 for node in graph.nodes if node.kind == ELEMENTWISE),
        tuple(names[node] for node in temporaries),
        sum(node.dtype.itemsize for node in temporaries), avoided,
    )


def _output_reasons(node: Node, graph: Graph, owner: dict[Node, int],
                    names: dict[Node, str]) -> tuple[str, ...]:
    reasons = []
    if node in graph.outputs:
        reasons.append("returned")
    readers = sorted({owner[user] for user in graph.consumers[node]
                      if user in owner and owner[user] != owner[node]})
    reasons += [f"read by region {index}" for index in readers]
    reasons += [f"used by non-fused op {names[user]} ({user.op})"
                for user in graph.consumers[node] if user not in owner]
    return tuple(reasons)


def concrete_shapes(graph: Graph, args: Sequence[Any]) -> dict[Node, tuple[int, ...] | None]:
    """Each node's shape for these arguments (None where it cannot be derived here)."""
    shapes: dict[Node, tuple[int, ...] | None] = {}
    for node in graph.nodes:
        if node.kind == INPUT:
            index = node.param("index", 0)
            shapes[node] = np.shape(args[index]) if index < len(args) else None
        elif node.kind == CONST:
            shapes[node] = np.shape(node.param("value").value)
        elif node.kind == ELEMENTWISE and all(shapes.get(s) is not None for s in node.inputs):
            known: list[Any] = [shapes[source] for source in node.inputs]
            shapes[node] = np.broadcast_shapes(*known)
        elif all(size is not None for size in node.shape):
            shapes[node] = tuple(node.shape)  # type: ignore[arg-type]
        else:
            shapes[node] = None
    return shapes


# ---------------------------------------------------------------- fusion boundaries


def boundaries(graph: Graph, regions: Sequence[Region], names: dict[Node, str]
               ) -> Iterable[Boundary]:
    """Every edge between two steps (regions or non-fused ops), with why fusion stopped;
    one per pair of steps and reason."""
    owner = {node: region.index for region in regions for node in region.nodes}
    by_index = {region.index: region for region in regions}
    seen: set[tuple[Any, Any, str]] = set()
    for node in graph.nodes:
        if node.kind in (INPUT, CONST):
            continue
        for source in node.inputs:
            if source.kind in (INPUT, CONST):
                continue
            here, there = owner.get(source, source), owner.get(node, node)
            if here == there:
                continue
            reason, detail = _classify(source, node, owner, by_index, graph)
            key = (here, there, reason)
            if key in seen:
                continue
            seen.add(key)
            yield Boundary(f"{names[source]}:{source.type_str()}",
                           _step(source, owner, names), _step(node, owner, names),
                           reason, detail)


def _step(node: Node, owner: dict[Node, int], names: dict[Node, str]) -> str:
    if node in owner:
        return f"region {owner[node]}"
    return f"{node.op} {names[node]}"


def _is_reduction(node: Node) -> bool:
    call = node.param("call")
    name = getattr(call, "name", node.op) or node.op
    return node.op in REDUCTIONS or name.split(".")[-1] in REDUCTIONS


def _classify(source: Node, node: Node, owner: dict[Node, int], by_index: dict[int, Region],
              graph: Graph) -> tuple[str, str]:
    if source in owner and source.kind == NUMPY:
        return REDUCTION, (f"{source.op} is folded into region {owner[source]}'s loop and "
                           "complete only after it")
    for end in (source, node):
        if end not in owner:
            if _is_reduction(end):
                return REDUCTION, f"{end.op} reduces its input; its result is a new loop"
            if is_elementwise_call(end):
                return NON_FUSIBLE, (f"{end.op} involves float16, which no kernel computes "
                                     "with (numba has no CPU float16); numpy runs it")
            return NON_FUSIBLE, f"{end.op} ({end.kind}) is not elementwise; numpy runs it"
    if source.ones != node.ones:
        return LOOP_SHAPE, f"{source.type_str()} vs {node.type_str()}"
    first, second = by_index[owner[source]], by_index[owner[node]]
    if _path_outside(first, second, graph, owner):
        return CYCLE, (f"a path from region {first.index} reaches region {second.index} "
                       "through another step, so one kernel for both would depend on itself")
    operands = _operand_count([*first.nodes, *second.nodes], graph)
    if operands > MAX_OPERANDS:
        return OPERAND_CAP, (f"together {operands} operands, over numpy's limit of "
                             f"{MAX_OPERANDS} per gufunc")
    return GREEDY, "same loop shape and fusible; the partitioner's merge order kept them apart"


def _path_outside(first: Region, second: Region, graph: Graph, owner: dict[Node, int]) -> bool:
    """True when some path from ``first`` to ``second`` passes through a third step."""
    merged = set(first.nodes) | set(second.nodes)
    return path_through_outside(first.nodes, merged, set(second.nodes), graph) is not None


def _operand_count(members: Sequence[Node], graph: Graph) -> int:
    member_set = set(members)
    inputs = {source for node in members for source in node.inputs
              if source not in member_set and is_kernel_input(source)}
    outputs = [node for node in members if node in graph.outputs
               or any(user not in member_set for user in graph.consumers[node])]
    return len(inputs) + len(outputs)
