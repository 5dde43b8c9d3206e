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

Fusion boundaries are the partitioner's own decisions: each region's ``refusals`` (see
``partition.Refusal``), only put into words here, so the reasons given are the reasons the
partitioner had.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .graph import CONST, ELEMENTWISE, INPUT, Graph, Node, equation, node_names
from .kernel import ir_function
from .lowering import RARE_PREFIX
from .partition import Reason, Refusal, Region, schedule

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
    """The lines of the function ``symbol`` defined in ``ir`` (empty if not defined),
    without its ``define`` line and closing brace (``Kernel.llvm_ir(function_only=True)``
    gives the whole definition)."""
    return ir_function(ir, symbol).splitlines()[1:-1]


def _split_intrinsic(name: str) -> tuple[str, bool] | None:
    """``llvm.exp.v8f64`` -> (``exp``, True); None for a call that is not an intrinsic."""
    if not name.startswith("llvm."):
        return None
    parts = name.split(".")[1:]
    suffix = parts[-1] if len(parts) > 1 and _TYPE_SUFFIX.match(parts[-1]) else ""
    base = ".".join(parts[:-1] if suffix else parts)
    return base, suffix.startswith("v")


_LABEL = re.compile(r"^([\w.$-]+):")
_TARGET = re.compile(r"label %([\w.$-]+)")


def _loop_lines(body: list[str]) -> list[str]:
    """The lines of ``body``'s basic blocks that lie on a cycle of its control flow (its
    loops); all of them when it has none.  Work before and after the loop (a kernel's
    prelude, once per row) is not what vectorisation is about."""
    blocks: dict[str, list[str]] = {}
    current = "entry"
    for line in body:
        label = _LABEL.match(line)
        if label:
            current = label.group(1)
        blocks.setdefault(current, []).append(line)
    successors = {name: {target for line in lines for target in _TARGET.findall(line)}
                  for name, lines in blocks.items()}

    def on_cycle(start: str) -> bool:
        seen, stack = set(), list(successors[start])
        while stack:
            name = stack.pop()
            if name == start:
                return True
            if name not in seen and name in successors:
                seen.add(name)
                stack.extend(successors[name])
        return False

    looping = [name for name in blocks if on_cycle(name)]
    return [line for name in (looping or blocks) for line in blocks[name]]


def vector_report(ir: str, symbol: str, kernel: str = "") -> VectorReport:
    """Read the vectorisation of function ``symbol``'s loops from optimised LLVM IR."""
    body = _loop_lines(function_body(ir, symbol))
    widest: tuple[int, str | None] = (1, None)
    for line in body:
        for lanes, element in _VECTOR_TYPE.findall(line):
            # the widest lanes; of equal ones, a float element over an integer one
            wider = int(lanes) > widest[0] or (
                int(lanes) == widest[0] and element in ("double", "float", "half")
                and widest[1] not in ("double", "float", "half"))
            if wider and element != "i1":
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
                # a rare library call inside a vector loop is its lanes' masked cold path
                rare = name.startswith(RARE_PREFIX) and widest[0] > 1
                if not (_VECTOR_LIBRARY.match(name) or rare):
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


@dataclasses.dataclass(frozen=True)
class RegionReport:
    """One fused region: its equations (``prelude``: 0-d work done before the loop), its
    outputs with the reasons each is stored."""

    index: int
    kernel: str
    layout: str
    prelude: tuple[str, ...]
    equations: tuple[str, ...]
    outputs: tuple[tuple[str, tuple[str, ...]], ...]
    vector: VectorReport | None
    # a kernel of passes (a region accumulating reductions across its rows): how it runs,
    # its equations in running order, each saying when it runs
    passes: str = ""
    phase: str = ""  # for gradients: "forward and backward", "backward", or "" (forward)

    @property
    def listing(self) -> tuple[str, ...]:
        """Its equations in running order, the prelude's marked as run before the loop."""
        return (*(f"{text}  (before the loop)" for text in self.prelude), *self.equations)


@dataclasses.dataclass(frozen=True)
class Boundary:
    """Two steps (regions or numpy calls) fusion kept apart, and why: one of the
    partitioner's refusals in words.  ``value`` is set when ``second`` reads it from
    ``first``; ``shared`` when both read it (siblings); neither for the two halves of a
    region split under the operand cap."""

    first: str
    second: str
    reason: Reason
    detail: str
    value: str = ""
    shared: str = ""

    @property
    def steps(self) -> str:
        if self.value:
            return f"{self.first} -> {self.second} at {self.value}"
        if self.shared:
            return f"{self.first} and {self.second}, both reading {self.shared}"
        return f"{self.first} and {self.second}"

    def __str__(self) -> str:
        return f"{self.steps}: {self.reason.value} ({self.detail})"


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
    def reasons(self) -> set[Reason]:
        return {boundary.reason for boundary in self.boundaries}

    def __str__(self) -> str:
        return "\n".join(report_lines(self))

    def _repr_html_(self) -> str:
        from .display import explanation_html

        return explanation_html(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def memory_lines(self) -> list[str]:
        """The temporaries numpy would allocate that the kernels avoid, and their bytes."""
        avoided = ", ".join(self.temporaries) or "none"
        lines = [f"temporaries numpy would allocate and numfuse does not: {avoided}"]
        if self.bytes_avoided is not None:
            lines.append(f"  {_bytes(self.bytes_avoided)} avoided for these arguments "
                         f"({self.bytes_per_element} bytes per element)")
        else:
            lines.append(f"  {self.bytes_per_element} bytes per element avoided "
                         "(pass example arguments to explain() for totals)")
        return lines


def report_lines(explanation: Explanation) -> list[str]:
    e = explanation
    lines = [f"numfuse.explain: {e.function}({e.signature})",
             f"  {e.numpy_loops} numpy elementwise loop(s) -> {len(e.regions)} fused kernel(s)"]
    for region in e.regions:
        phase = f" ({region.phase} pass)" if region.phase else ""
        lines.append(f"region {region.index}: kernel {region.kernel} {region.layout}{phase}")
        if region.passes:
            lines.append(f"  {region.passes}")
        lines += [f"    {text}" for text in region.listing]
        for name, why in region.outputs:
            lines.append(f"  output {name}: {'; '.join(why)}")
        if region.vector is not None:
            lines.append(f"  {region.vector.summary()}")
    if e.other_steps:
        lines.append("not fused (run by numpy):")
        lines += [f"    {text}" for text in e.other_steps]
    lines.append("fusion boundaries:" if e.boundaries else "fusion boundaries: none")
    lines += [f"  {boundary}" for boundary in e.boundaries]
    return lines + e.memory_lines()


def _bytes(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return f"{count} B"  # pragma: no cover


def _owners(regions: Sequence[Region]) -> dict[Node, int]:
    """The region computing each node, members and prelude nodes (a prelude node several
    kernels compute is named by the first)."""
    owner: dict[Node, int] = {}
    for region in regions:
        for node in (*region.prelude, *region.nodes):
            owner.setdefault(node, region.index)
    return owner


def explain(graph: Graph, regions: Sequence[Region], kernels: Sequence[Kernel] | None,
            function: str, signature: str, args: Sequence[Any] | None = None,
            vectorisation: bool = True) -> Explanation:
    """Build the report for a partitioned ``graph`` (see ``Explanation``)."""
    names = node_names(graph.nodes)
    owner = _owners(regions)
    reports = []
    for region in regions:
        kernel = kernels[region.index] if kernels is not None else None
        vector = kernel_vector_report(kernel) if kernel is not None and vectorisation else None
        equations = tuple(equation(node, names) for node in region.nodes)
        passes = ""
        if region.reduced:
            passes, equations = _passes(region, names)
        reports.append(RegionReport(
            region.index, kernel.name if kernel is not None else "-",
            kernel.layout if kernel is not None else "",
            tuple(equation(node, names) for node in region.prelude),
            equations,
            tuple((names[node], _output_reasons(node, graph, owner, names))
                  for node in region.outputs),
            vector, passes, _phase(region),
        ))
    others = tuple(equation(node, names) for node in graph.nodes
                   if node.kind not in (INPUT, CONST, ELEMENTWISE) and node not in owner)
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
        function, signature, tuple(reports), tuple(boundaries(regions, names)), others,
        sum(1 for node in graph.nodes if node.kind == ELEMENTWISE),
        tuple(names[node] for node in temporaries),
        sum(node.dtype.itemsize for node in temporaries), avoided,
    )


def _phase(region: Region) -> str:
    """Which passes of a gradient a region's nodes belong to ("" when all are forward)."""
    backward = {node.backward for node in (*region.prelude, *region.nodes)}
    return {frozenset({True, False}): "forward and backward",
            frozenset({True}): "backward"}.get(frozenset(backward), "")


def _passes(region: Region, names: dict[Node, str]) -> tuple[str, tuple[str, ...]]:
    """A kernel of passes in words: how many passes over which rows, and its equations
    in running order, each with when it runs (``partition.schedule``)."""
    plan = schedule(region)
    axes = ", ".join(str(axis) for axis in region.reduced)
    summary = (f"{plan.passes} pass{'es' if plan.passes > 1 else ''} over the rows "
               f"(axis {axes}) of each block of columns; accumulators add the rows in order")
    timed = []
    for position, node in enumerate(region.nodes):
        if node in plan.accumulating:
            sweep, when = 2 * plan.accumulating[node] + 1, (
                f"accumulated in pass {plan.accumulating[node] + 1}")
        elif node in plan.columns:
            level = plan.columns[node]
            sweep = 2 * level
            when = "per column, before pass 1" if level == 0 else \
                f"per column, after pass {level}"
        else:
            done = plan.computed[node]
            sweep = 2 * done[0] + 1
            when = ("pass " if len(done) == 1 else "passes ") + \
                ", ".join(str(index + 1) for index in done)
        timed.append((sweep, position, f"{equation(node, names)}  ({when})"))
    return summary, tuple(text for _sweep, _position, text in sorted(timed))


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
    """Each node's shape for these arguments (None where it cannot be derived here).

    Sizes flow from the arguments through elementwise operations.  A free size of a
    numpy call's result (the ``n`` of ``x.max(axis=1, keepdims=True)``, ``f64[n,1]``) is
    not known here, but an elementwise operation that broadcasts it against a known size
    has that size: a free size is never a broadcast 1.
    """
    partial: dict[Node, tuple[int | None, ...]] = {}
    for node in graph.nodes:
        if node.kind == INPUT:
            index = node.index
            partial[node] = (tuple(np.shape(args[index])) if index < len(args)
                             else tuple(None for _ in node.shape))
        elif node.kind == CONST:
            partial[node] = tuple(np.shape(node.value.value))
        elif node.kind == ELEMENTWISE:
            partial[node] = _broadcast_partial(
                [partial.get(source, tuple(source.shape)) for source in node.inputs],
                node.ndim)
        elif node.reduction is not None:
            reduction = node.reduction
            source = partial.get(node.inputs[0], tuple(node.inputs[0].shape))
            partial[node] = tuple(1 if axis in reduction.axes else size
                                  for axis, size in enumerate(source)
                                  if reduction.keepdims or axis not in reduction.axes)
        else:
            partial[node] = tuple(node.shape)
    shapes: dict[Node, tuple[int, ...] | None] = {}
    for node, shape in partial.items():
        sizes = [size for size in shape if size is not None]
        shapes[node] = tuple(sizes) if len(sizes) == len(shape) else None
    return shapes


def _broadcast_partial(shapes: Sequence[tuple[int | None, ...]], ndim: int
                       ) -> tuple[int | None, ...]:
    """numpy's broadcast of shapes whose sizes may be unknown (None, never 1)."""
    result: list[int | None] = []
    for axis in range(-ndim, 0):
        sizes = [shape[axis] for shape in shapes if len(shape) >= -axis]
        known = [size for size in sizes if size is not None and size != 1]
        result.append(max(known) if known else None if None in sizes else 1)
    return tuple(result)


# ---------------------------------------------------------------- fusion boundaries


def boundaries(regions: Sequence[Region], names: dict[Node, str]) -> list[Boundary]:
    """The refusals between each region and another step, in words; one per pair of
    steps and reason, in the order of the regions."""
    owner = _owners(regions)
    found: dict[tuple[str, str, Reason], Boundary] = {}
    for region in regions:
        step = _step_names(region, owner, names)
        for refusal in region.refusals:
            boundary = _boundary(refusal, step, owner, names)
            found.setdefault((boundary.first, boundary.second, boundary.reason), boundary)
    return list(found.values())


def _step_names(region: Region, owner: dict[Node, int], names: dict[Node, str]
                ) -> Callable[[Node], str]:
    """Names the step computing a node, seen from ``region``: ``region`` for its own
    members and prelude nodes (a prelude node may be in other kernels' preludes too),
    another node's region, or the numpy call itself."""
    computed = {*region.prelude, *region.nodes}

    def step(node: Node) -> str:
        if node in computed:
            return f"region {region.index}"
        if node in owner:
            return f"region {owner[node]}"
        return _call(node, names)

    return step


def _call(node: Node, names: dict[Node, str]) -> str:
    return f"{node.op} {names[node]}"


def _typed(node: Node, names: dict[Node, str]) -> str:
    return f"{names[node]}:{node.type_str()}"


def _boundary(refusal: Refusal, step: Callable[[Node], str], owner: dict[Node, int],
              names: dict[Node, str]) -> Boundary:
    """``refusal`` in words; ``step`` names the step computing a node."""
    value = shared = ""
    if refusal.shared is not None:
        shared = step(refusal.shared) if refusal.shared in owner else \
            _typed(refusal.shared, names)
    elif refusal.first in refusal.second.inputs:
        value = _typed(refusal.first, names)
    return Boundary(step(refusal.first), step(refusal.second), refusal.reason,
                    _why(refusal, step, names), value, shared)


def _why(refusal: Refusal, step: Callable[[Node], str], names: dict[Node, str]) -> str:
    """The sentence saying why ``refusal`` kept its two parts apart."""
    reason, detail, via = refusal.reason, refusal.detail, refusal.via
    first, second = names[refusal.first], names[refusal.second]
    call, via_step = (_call(via, names), step(via)) if via is not None else ("", "")
    if reason is Reason.NOT_ELEMENTWISE:
        return f"{call} runs in numpy: {detail}"
    if reason is Reason.NOT_CONVEX:
        return (f"one kernel for both would feed {via_step} and also need its result, so it "
                "would wait on itself")
    if reason is Reason.REDUCTION_IN_LOOP:
        text = (f"{call} is complete only after the loop that computes it and {second} "
                f"reads it, so {second} runs in a later loop")
        if refusal.first is not via:
            text += f"; {first}, computed in that loop, is stored for it"
        return text
    if reason is Reason.LOOP_SHAPE:
        return f"one kernel runs one loop, and theirs differ: {detail}"
    if reason is Reason.NOT_RECOMPUTED:
        text = (f"{first} broadcasts into the larger loop of {second} but is not computed "
                f"again there: {detail}")
        return text + (f" ({names[via]})" if via not in (None, refusal.first) else "")
    if reason is Reason.SIZE_CLASS:
        return (f"{call}: {detail}; values of such a size never share a loop with values "
                "of another size")
    if reason is Reason.NOT_IN_PRELUDE:
        return (f"scalar {first} runs as a kernel of its own instead of before the loop of "
                f"{second}'s kernel: {detail}")
    if reason is Reason.SIBLING_SIZE:
        return detail
    if reason is Reason.ERRSTATE:
        return (f"{first} and {second} run under different floating-point error handling "
                f"({detail}), and a kernel handles the flags of all its work under one")
    if reason is Reason.REDUCED_AXES:
        return f"one kernel cannot run both: {detail}"
    if reason is Reason.ROW_LENGTHS:
        return f"one kernel cannot run both: {detail} ({names[via]})" if via is not None \
            else f"one kernel cannot run both: {detail}"
    if reason is Reason.PASSES:
        if via is None:
            return f"one kernel for both would need {detail}"
        return (f"one kernel for both would compute {names[via]} again in a later pass over "
                f"the rows: {detail}")
    return f"together they would have {detail}, so the region is split"
