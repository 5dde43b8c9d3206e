"""Code generation: one region becomes the Python source of one gufunc kernel.

The kernel's form is chosen for speed: a loop over a *contiguous 1-d core dimension*
``(n)``, which LLVM can vectorise, rather than a scalar core called once per element.  The
core axis is the region's last non-unit dimension.  An input that varies along it is a
``(n)`` argument declared contiguous (``float64[::1]``); an input that is constant along it
(length 1 or absent there) is a scalar ``()`` argument, broadcast by the gufunc's outer
loop.  Every output is ``(n)``.  A region whose loop shape has no non-unit dimension runs
on length-1 arrays.

Inside the loop every value is computed before any output is stored, so outputs that alias
inputs are safe.  The source names variables by their position in the region, so regions
with the same structure and dtypes produce the same text and share one compiled kernel.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Sequence

import numpy as np

from .graph import CONST, ELEMENTWISE, Node
from .ops import HELPER_NAMES, OPS, template_for
from .partition import Region
from .reductions import Reduction

# fastmath flags that keep NaN and infinity semantics (np.isnan, NaN in maximum, inf
# checks work): contraction into fused multiply-adds, reassociation, ignoring the sign of
# zero, reciprocal approximation of division.  "afn" (approximate library functions) may
# be asked for by name; "nnan", "ninf" and "fast" would let LLVM delete NaN/inf checks.
SAFE_FASTMATH = frozenset({"contract", "reassoc", "nsz", "arcp"})
_ALLOWED_FASTMATH = SAFE_FASTMATH | {"afn"}


def fastmath_flags(option: object) -> frozenset[str]:
    """The LLVM fast-math flags for a ``fastmath=`` option: False/None for none (numpy's
    exact semantics), True for ``SAFE_FASTMATH``, or an iterable of flag names."""
    if option is None or option is False:
        return frozenset()
    if option is True:
        return SAFE_FASTMATH
    if isinstance(option, str) or not hasattr(option, "__iter__"):
        raise TypeError("fastmath= takes True, False or a set of flag names such as "
                        "{'contract', 'reassoc'}")
    flags = frozenset(str(flag) for flag in option)  # type: ignore[attr-defined]
    refused = flags - _ALLOWED_FASTMATH
    if refused:
        raise ValueError(
            f"fastmath flags {sorted(refused)} are not allowed: 'nnan', 'ninf' and 'fast' let "
            "LLVM assume there are no NaNs or infinities and delete np.isnan/np.isinf checks "
            f"and NaN propagation; choose among {sorted(_ALLOWED_FASTMATH)}."
        )
    return flags


# Elements per block of a kernel with float sums: within a block the sum is vectorised
# (several partial sums), block sums are then added in a cascade of levels of 16.
BLOCK = 512
LEVELS = 4


@dataclasses.dataclass(frozen=True)
class KernelSource:
    """Generated source of one kernel and what the runtime needs to call it.

    ``core_inputs[k]`` is True when input ``k`` is a ``(n)`` argument; ``dropped_axes`` are
    the region's length-1 axes, removed from every operand before the call.
    """

    name: str
    source: str
    layout: str
    signature: str
    helpers: tuple[str, ...]
    core_inputs: tuple[bool, ...]
    dropped_axes: tuple[int, ...]
    ndim: int
    core_outputs: tuple[bool, ...] = ()  # False for a reduction's per-row ``()`` output
    fastmath: tuple[str, ...] = ()  # LLVM fast-math flags (see ``fastmath_flags``)
    # Region outputs written into an input's buffer (``Region.donate``): not gufunc
    # outputs.  When every output is, the gufunc gets one ``()`` output to ignore.
    donated: tuple[tuple[int, int], ...] = ()
    placeholder: bool = False
    program: KernelProgram | None = None  # the statements the source and the IR come from


def numba_type(dtype: np.dtype) -> str:
    return "boolean" if dtype.kind == "b" else dtype.name


def constructor(dtype: np.dtype) -> str:
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


def literal(value: object, dtype: np.dtype) -> str:
    """Source text for a constant of ``dtype``, converted from ``value`` as numpy would."""
    converted = np.asarray(value).astype(dtype)[()]
    if dtype.kind == "b":
        return "True" if converted else "False"
    if dtype.kind in "iu":
        return f"{constructor(dtype)}({int(converted)})"
    if dtype.kind == "f":
        return f"{constructor(dtype)}({_float_text(float(converted))})"
    number = complex(converted)  # type: ignore[arg-type]
    parts = f"{_float_text(number.real)}, {_float_text(number.imag)}"
    return f"{constructor(dtype)}(complex({parts}))"


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "math.nan"
    if math.isinf(value):
        return "math.inf" if value > 0 else "-math.inf"
    return repr(value)


def cast(expression: str, source: np.dtype, target: np.dtype) -> str:
    """Convert a scalar expression between dtypes with numpy's casting results."""
    if source == target:
        return expression
    if target.kind == "b":
        return f"({expression} != 0)"
    if source.kind == "c" and target.kind != "c":
        expression, source = f"({expression}).real", np.dtype(f"f{source.itemsize // 2}")
        if source == target:
            return expression
    if source.kind == "f" and target.kind in "iu":
        return _float_to_int(expression, target)
    return f"{constructor(target)}({expression})"


def _float_to_int(expression: str, target: np.dtype) -> str:
    # numpy's C casts go through a 32-bit conversion for small types and through int64 for
    # uint32; out-of-range values then wrap the way numpy's do on x86-64.
    if target.itemsize <= 2:
        return f"{constructor(target)}(np.int32({expression}))"
    if target == np.uint32:
        return f"np.uint32(np.int64({expression}))"
    if target == np.uint64:
        return f"float_to_uint64({expression})"
    return f"{constructor(target)}({expression})"


def _operand(node: Node, names: dict[Node, str], loop_dtype: np.dtype) -> str:
    if node.kind == CONST and node.ndim == 0:
        return literal(node.value.value, loop_dtype)
    return cast(names[node], node.dtype, loop_dtype)


def expression(node: Node, names: dict[Node, str]) -> str:
    """The scalar expression computing ``node`` from its operands' variables."""
    op = OPS[node.op]
    loop: tuple[np.dtype, ...] = node.loop
    template = template_for(op, loop)
    assert template is not None, f"no template for {node.op} on {loop}"
    if node.op in _LIBM_FOR_INTEGERS and node.inputs[0].dtype.kind in "biu":
        template = f"np.{node.op}({{0}})"
    operands = [_operand(source, names, dtype)
                for source, dtype in zip(node.inputs, loop, strict=False)]
    text = template.format(*operands)
    if node.dtype in _PRESERVED and all(dtype == node.dtype for dtype in loop):
        return text  # numba computes in this type already: no cast needed
    return cast_result(text, node.dtype)


# The vector-math logarithms answer log(0) with a division LLVM folds, without numpy's
# "divide by zero" flag, where it knows the float is 0 because it was converted from an
# integer 0 (found by the fuzzer).  Integer operands take the C library's log instead.
_LIBM_FOR_INTEGERS = frozenset({"log", "log1p"})

# dtypes numba's arithmetic keeps (it widens small integers and float32 mixed with ints).
_PRESERVED = frozenset(np.dtype(name) for name in ("float64", "int64", "complex128"))


def cast_result(text: str, dtype: np.dtype) -> str:
    if dtype.kind == "b":
        return f"bool({text})"
    return f"{constructor(dtype)}({text})"


@dataclasses.dataclass(frozen=True)
class Operand:
    """One argument of the gufunc: ``in<k>``, ``out<k>`` (or ``done``), its element dtype,
    and whether it is a ``(n)`` core array (True) or a ``()`` value per row (False)."""

    name: str
    dtype: np.dtype
    core: bool


@dataclasses.dataclass(frozen=True)
class Assign:
    """``target = expression``, a scalar statement whose value has ``dtype``."""

    target: str
    expression: str
    dtype: np.dtype


@dataclasses.dataclass(frozen=True)
class KernelProgram:
    """The kernel as statements, from which both its Python source and its LLVM IR are made.

    For each row of the gufunc's outer loop: ``prelude``, then the loop over ``i`` (each
    element: ``loads`` ``(variable, input position)``, the ``body`` in order, ``stores``
    ``(operand, variable)``), then ``finals`` ``(operand, expression)`` written to element
    0 of ``()`` outputs.  ``folds`` are the reductions accumulated in the loop: a body
    statement assigning to a fold's ``target`` updates its accumulator.
    """

    inputs: tuple[Operand, ...]
    outputs: tuple[Operand, ...]
    prelude: tuple[Assign, ...]
    loads: tuple[tuple[str, int], ...]
    body: tuple[Assign, ...]
    stores: tuple[tuple[str, str], ...]
    folds: tuple[Fold, ...]
    finals: tuple[tuple[str, str], ...]

    @property
    def operands(self) -> tuple[Operand, ...]:
        return self.inputs + self.outputs


_CALLED = re.compile(r"\b([A-Za-z_]\w*)\(")  # the names a piece of source calls


def emit(region: Region, fastmath: frozenset[str] = frozenset()) -> KernelSource:
    """Generate the kernel for ``region`` (pure: the same region and flags give the same
    source; the fast-math flags are named in it, so they are part of its hash)."""
    ndim = len(region.ones)
    dropped = tuple(axis for axis, one in enumerate(region.ones) if one)
    kept = [axis for axis in range(ndim) if axis not in dropped]
    core_axis = kept[-1] if kept else None
    core_inputs = tuple(_varies_along(node, core_axis, ndim) for node in region.inputs)
    program = _program(region, core_inputs)
    code = render_statements(program)
    helpers = tuple(sorted(HELPER_NAMES.intersection(_CALLED.findall(code))))
    core_outputs = tuple(operand.core for operand in program.outputs)
    layout = ",".join("(n)" if core else "()" for core in core_inputs) + "->" + \
        ",".join("(n)" if core else "()" for core in core_outputs)
    arg_types = [f"{numba_type(operand.dtype)}[::1]" if operand.core
                 else numba_type(operand.dtype) for operand in program.inputs]
    arg_types += [f"{numba_type(operand.dtype)}[::1]" if operand.core
                  else f"{numba_type(operand.dtype)}[:]" for operand in program.outputs]
    signature = f"void({', '.join(arg_types)})"
    flags = tuple(sorted(fastmath))
    source = _module_source(layout, signature, helpers, program, flags)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return KernelSource(f"kernel_{digest}", source, layout, signature, helpers, core_inputs,
                        dropped, ndim, core_outputs, flags, region.donate,
                        program.outputs[-1].name == "done", program)


def _program(region: Region, core_inputs: tuple[bool, ...]) -> KernelProgram:
    names: dict[Node, str] = {}
    inputs = []
    for position, node in enumerate(region.inputs):
        inputs.append(Operand(f"in{position}", node.dtype, core_inputs[position]))
        if not core_inputs[position]:
            names[node] = f"in{position}"
    donated = dict(region.donate)
    results = [node for position, node in enumerate(region.outputs) if position not in donated]
    outputs = [Operand(f"out{position}", node.dtype, node.kind == ELEMENTWISE)
               for position, node in enumerate(results)]
    prelude = []
    for position, node in enumerate(region.prelude):
        names[node] = f"s{position}"
        prelude.append(Assign(f"s{position}", expression(node, names), node.dtype))
    loads = []
    for position, node in enumerate(region.inputs):
        if core_inputs[position]:
            loads.append((names.setdefault(node, f"x{position}"), position))
    body: list[Assign] = []
    folds: list[Fold] = []
    for position, node in enumerate(region.nodes):
        names[node] = f"v{position}"
        if node.kind == ELEMENTWISE:
            body.append(Assign(f"v{position}", expression(node, names), node.dtype))
            continue
        reduction = node.reduction
        assert reduction is not None, f"{node} in a region is neither elementwise nor a fold"
        fold = Fold(f"v{position}", reduction,
                    cast(names[node.inputs[0]], node.inputs[0].dtype, reduction.dtype))
        folds.append(fold)
        body.append(Assign(fold.target, fold.update(fold.value), reduction.dtype))
    stores = [(operand.name, names[node])
              for operand, node in zip(outputs, results, strict=True) if operand.core]
    stores += [(f"in{donated[position]}", names[node])
               for position, node in enumerate(region.outputs) if position in donated]
    finals = [(operand.name, names[node])
              for operand, node in zip(outputs, results, strict=True) if not operand.core]
    if not results:  # a gufunc needs an output: one byte per row, ignored
        outputs.append(Operand("done", np.dtype(np.uint8), False))
        finals.append(("done", "1"))
    return KernelProgram(tuple(inputs), tuple(outputs), tuple(prelude), tuple(loads),
                         tuple(body), tuple(stores), tuple(folds), tuple(finals))


@dataclasses.dataclass(frozen=True)
class Fold:
    """A reduction folded into the loop, accumulating into the variable ``name``.

    A float (or complex) sum accumulates each block of ``BLOCK`` elements into
    ``name_b`` with reassociation allowed (so LLVM keeps several partial sums in vector
    registers) and adds the block sums in a cascade ``name_1 .. name_4`` of levels of 16:
    a rounding error comparable to numpy's pairwise summation.  Every other reduction is
    exact in any order and accumulates directly into ``name``.
    """

    name: str
    reduction: Reduction
    value: str  # the expression of the element folded in, in the reduction's dtype

    @property
    def blocked(self) -> bool:
        return self.reduction.ufunc == "add" and self.reduction.dtype.kind in "fc"

    @property
    def target(self) -> str:
        """The variable the loop body accumulates into."""
        return f"{self.name}_b" if self.blocked else self.name

    @property
    def identity(self) -> str:
        return literal(self.reduction.identity(), self.reduction.dtype)

    @property
    def zero(self) -> str:
        return literal(0, self.reduction.dtype)

    @property
    def neutral(self) -> str:
        """An element that leaves every accumulator as it is: the identity, and -0.0 for
        float sums (``x + 0.0`` turns ``-0.0`` into ``0.0``)."""
        if self.reduction.ufunc == "add" and self.reduction.dtype.kind in "fc":
            return literal(complex(-0.0, -0.0) if self.reduction.dtype.kind == "c" else -0.0,
                           self.reduction.dtype)
        return self.identity

    def update(self, value: str) -> str:
        """The expression accumulating ``value`` into ``target``."""
        return _combine(self.reduction, self.target, value)

    def start(self) -> list[str]:
        if self.blocked:
            return [f"{self.name}_{level} = {self.identity}" for level in range(1, LEVELS + 1)]
        return [f"{self.name} = {self.identity}"]

    def block_start(self) -> list[str]:
        return [f"{self.name}_b = {self.zero}"] if self.blocked else []

    def block_end(self) -> list[str]:
        """Add the block's sum to the first level; carry full levels upwards."""
        if not self.blocked:
            return []
        name = self.name
        lines = [f"{name}_1 = {name}_1 + {name}_b"]
        for level in range(1, LEVELS):
            indent = "    " * (level - 1)
            lines += [f"{indent}if blocks % {16 ** level} == 0:",
                      f"{indent}    {name}_{level + 1} = {name}_{level + 1} + {name}_{level}",
                      f"{indent}    {name}_{level} = {self.zero}"]
        return lines

    def result(self) -> list[str]:
        if not self.blocked:
            return []
        total = f"{self.name}_1"
        for level in range(2, LEVELS + 1):
            total = f"{self.name}_{level} + ({total})"
        return [f"{self.name} = {total}"]


def _combine(reduction: Reduction, total: str, value: str) -> str:
    """One accumulation step ``total (op) value`` in the reduction's dtype."""
    dtype, ufunc = reduction.dtype, reduction.ufunc
    if dtype.kind == "b" or ufunc in ("logical_or", "logical_and"):
        operator = "|" if ufunc in ("add", "maximum", "logical_or") else "&"
        return f"({total} {operator} {value})"
    if dtype.kind in "fc" and ufunc == "add":
        return f"add_reassoc({total}, {value})"
    # A float product stays in order: regrouping can multiply a huge value by another
    # (inf) before the zero numpy's order meets first, giving NaN where numpy has 0.
    template = template_for(OPS[ufunc], (dtype, dtype))
    assert template is not None, f"no template for {ufunc} on {dtype}"
    text = template.format(total, value)
    return text if dtype in _PRESERVED else cast_result(text, dtype)


def render_statements(program: KernelProgram) -> str:
    """The kernel function's body as Python statements (unindented)."""
    first_core = next(operand.name for operand in program.operands if operand.core)
    body = [f"{variable} = in{position}[i]" for variable, position in program.loads]
    body += [f"{statement.target} = {statement.expression}" for statement in program.body]
    body += [f"{operand}[i] = {variable}" for operand, variable in program.stores]
    lines = [f"{statement.target} = {statement.expression}" for statement in program.prelude]
    lines += _loop(first_core, program.folds, body)
    lines += [f"{operand}[0] = {value}" for operand, value in program.finals]
    return "\n".join(lines)


def _loop(length_of: str, folds: Sequence[Fold], body: list[str]) -> list[str]:
    """The kernel's loop over ``i``; in blocks when a float sum needs them."""
    lines = [f"n = {length_of}.shape[0]"]
    for fold in folds:
        lines += fold.start()
    if not any(fold.blocked for fold in folds):
        lines.append("for i in range(n):")
        lines += [f"    {line}" for line in body]
        return lines + [line for fold in folds for line in fold.result()]
    # The inner loop counts from 0 (``range(start, stop)`` here keeps LLVM from
    # vectorising it).
    lines.append("blocks = 0")
    lines.append(f"for start in range(0, n, {BLOCK}):")
    inner = [line for fold in folds for line in fold.block_start()]
    inner.append(f"for j in range(min({BLOCK}, n - start)):")
    inner.append("    i = start + j")
    inner += [f"    {line}" for line in body]
    inner.append("blocks += 1")
    inner += [line for fold in folds for line in fold.block_end()]
    lines += [f"    {line}" for line in inner]
    return lines + [line for fold in folds for line in fold.result()]


def _varies_along(node: Node, core_axis: int | None, ndim: int) -> bool:
    if core_axis is None:
        return True  # a region with no non-unit axis runs on length-1 arrays
    axis = core_axis - (ndim - node.ndim)
    return axis >= 0 and node.shape[axis] != 1


def _module_source(layout: str, signature: str, helpers: Sequence[str],
                   program: KernelProgram, fastmath: tuple[str, ...]) -> str:
    params = [operand.name for operand in program.operands]
    lines = [
        '"""A numfuse kernel (generated).',
        "",
        f"layout:    {layout}",
        f"signature: {signature}",
        *([f"fastmath:  {', '.join(fastmath)}"] if fastmath else []),
        '"""',
        "import math  # noqa: F401",
        "",
        "import numpy as np  # noqa: F401",
        "",
    ]
    if helpers:
        lines.append(f"from numfuse.kernel_lib import {', '.join(helpers)}")
        lines.append("")
    lines += ["", f"def kernel({', '.join(params)}):"]
    lines += [f"    {line}" for line in render_statements(program).split("\n")]
    lines.append("")
    return "\n".join(lines)
