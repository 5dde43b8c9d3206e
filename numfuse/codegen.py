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

from .dtypes import overflows_in_cast
from .graph import CONST, ELEMENTWISE, Node
from .ops import (
    ARITHMETIC,
    CLASSIFICATION,
    COMPARISON,
    CONVERSION,
    EXTREMUM,
    FLAG_RAISING,
    HELPER_NAMES,
    LOGICAL,
    OPS,
    template_for,
)
from .partition import Region, Schedule, is_kernel_input, schedule, varies
from .reductions import Reduction, reduced_ufunc

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
    # A kernel of passes (``emit_passes``): which operands vary along the rows ``(m)``,
    # and the region's axes they are (empty for other kernels).
    rows_inputs: tuple[bool, ...] = ()
    rows_outputs: tuple[bool, ...] = ()
    reduced: tuple[int, ...] = ()
    # The name its floating-point warnings give ("... encountered in divide", see
    # ``reported_name``); "" for the kernel's own name.
    reports: str = ""


# numpy's warning names the ufunc whose loop raised the flag.  A fused kernel raises its
# flags together: its warnings name its first operation that raises flags on ordinary
# operands (a division, a root, an exponential or logarithm, a trigonometric function, a
# float-to-integer cast), else its first arithmetic operation (overflow), else its first
# cast — numpy's name whenever one operation raised.


def reported_name(nodes: Sequence[Node]) -> str:
    """The name a kernel computing ``nodes`` (in order) gives in its floating-point
    warnings: a numpy ufunc's ("divide"), "cast" for an ``astype`` or a number of the
    function converted with an overflow, "reduce" for a sum or product it completes
    (numpy's name for its reductions), else its first ufunc's, or "" for none."""
    def completes_sum(node: Node) -> bool:
        return node.kind != ELEMENTWISE and node.kind != CONST and \
            reduced_ufunc(node.op) in ("add", "multiply") and node.dtype.kind in "fc"

    def rank(node: Node) -> int | None:
        if completes_sum(node):
            return 1  # a sum overflows before the arithmetic feeding it does
        if casts_a_literal(node):
            return -1  # numpy converts the number before its loop runs
        row = OPS.get(node.op)
        if row is None or not (row.name == "astype" or _ufunc_of(node) is not None):
            return None
        if row.category in FLAG_RAISING or (row.name == "astype" and node.dtype.kind in "iu"
                                            and node.inputs[0].dtype.kind in "fc"):
            return 0
        return {ARITHMETIC: 2, CONVERSION: 3, COMPARISON: 4}.get(row.category)

    ranked = [(found, position, node) for position, node in enumerate(nodes)
              if (found := rank(node)) is not None]
    if not ranked:  # (np.nextafter overflowing: its own name, as numpy's)
        return next((ufunc.__name__ for node in nodes
                     if (ufunc := _ufunc_of(node)) is not None), "")
    node = min(ranked, key=lambda entry: entry[:2])[2]
    if completes_sum(node):
        return "reduce"
    if node.op == "astype" or casts_a_literal(node):
        return "cast"
    ufunc = _ufunc_of(node)
    assert ufunc is not None
    return ufunc.__name__


def _ufunc_of(node: Node) -> np.ufunc | None:
    """The numpy ufunc ``node`` computes: its row's, or the one an internal row stands for
    (``power_or_root``: numpy's power loop); None for other work."""
    row = OPS.get(node.op)
    reference = None if row is None else row.reference
    reference = getattr(reference, "ufunc", reference)
    return reference if isinstance(reference, np.ufunc) else None


def casts_a_literal(node: Node) -> bool:
    """Whether ``node`` converts a number of the function to its loop's dtype with an
    overflow (a Python ``1e300`` beside a float32 array: numpy's "overflow encountered in
    cast")."""
    if node.kind != ELEMENTWISE:
        return False
    return any(source.kind == CONST and source.ndim == 0 and
               overflows_in_cast(source.value.value, dtype)
               for source, dtype in zip(node.inputs, node.loop, strict=False))


def numba_type(dtype: np.dtype) -> str:
    return "boolean" if dtype.kind == "b" else dtype.name


def constructor(dtype: np.dtype) -> str:
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


def literal(value: object, dtype: np.dtype) -> str:
    """Source text for a constant of ``dtype``, converted from ``value`` as numpy would.

    A float that overflows in the conversion (a Python ``1e300`` with a
    float32 array) is converted by the kernel, at each call, from a value LLVM cannot see
    (so it cannot fold the conversion): numpy converts it at each call and raises the
    floating-point flag each time."""
    source = np.asarray(value)
    with np.errstate(all="ignore"):
        array = source.astype(dtype)
    converted = array[()]
    if overflows_in_cast(source, dtype):
        if dtype.kind == "f":
            return f"{constructor(dtype)}(hidden({_float_text(float(source))}))"
        number = complex(source)
        return (f"{constructor(dtype)}(complex(hidden({_float_text(number.real)}), "
                f"hidden({_float_text(number.imag)})))")
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
    # uint32; out-of-range values then wrap the way numpy's do on x86-64.  The converted
    # value is hidden from LLVM: with AVX-512 it would otherwise fold a choice made after
    # the conversion (``np.where(m, x.astype(int), 0)``) into a masked conversion, which
    # raises no "invalid value" in the lanes left out, where numpy's cast raises it.
    # The value converted is hidden too: converting a value LLVM proves NaN or infinite
    # (``(x / 0.0).astype(int)``) is undefined to LLVM, which then folds it to any value.
    expression = f"hidden({expression})"
    if target.itemsize <= 2:
        return f"{constructor(target)}(hidden(np.int32({expression})))"
    if target == np.uint32:
        return f"np.uint32(hidden(np.int64({expression})))"
    if target == np.uint64:
        return f"float_to_uint64({expression})"
    return f"hidden({constructor(target)}({expression}))"


def _operand(node: Node, names: dict[Node, str], loop_dtype: np.dtype,
             tested: bool = False) -> str:
    if node.kind == CONST and node.ndim == 0 and node not in names:  # (else an operand)
        return literal(node.value.value, loop_dtype)
    name = names[node]
    if (tested or loop_dtype.kind == "b") and node.dtype.kind in "fc" and \
            node.kind == ELEMENTWISE and OPS[node.op].category in FLAG_RAISING:
        # A float a flag-raising operation computed, only tested (``isnan(sqrt(x))``,
        # ``x / y != 0``, ``where(sqrt(x), ...)``): hidden, or LLVM answers the test from
        # the operation's operands (``x < 0``) and drops the operation and its flag.
        name = f"hidden({name})"
    elif not tested and node.dtype.kind == "f" and node.kind == ELEMENTWISE and \
            OPS[node.op].category is EXTREMUM and \
            any(source.kind == CONST for source in node.inputs):
        # A value clamped by a constant (``np.maximum(v, 0)``, ``np.clip(v, 0, 1)``),
        # computed on: hidden, or LLVM moves the clamp, a choice with a constant arm,
        # below the operations on it (``sqrt(v) if v > 0 else 0``), which then run on the
        # unclamped value and raise its flags (``sqrt(max(v, 0)) + 1e-8`` warned "invalid
        # value" for a negative v).
        name = f"hidden({name})"
    return cast(name, node.dtype, loop_dtype)


# The operations that test their operands (see ``_operand``): comparisons, and those
# choosing by a NaN test (``maximum``'s ``a != a``, which LLVM turned into a signalling
# ``x < 0`` for ``a = sqrt(x)``).
_TESTS = (COMPARISON, CLASSIFICATION, LOGICAL, EXTREMUM)
_TESTING = frozenset({"sign", "heaviside"})


def expression(node: Node, names: dict[Node, str]) -> str:
    """The scalar expression computing ``node`` from its operands' variables."""
    op = OPS[node.op]
    loop: tuple[np.dtype, ...] = node.loop
    template = template_for(op, loop)
    assert template is not None, f"no template for {node.op} on {loop}"
    if node.op in _LIBM_FOR_INTEGERS and node.inputs[0].dtype.kind in "biu":
        template = f"np.{node.op}({{0}})"
    tested = op.category in _TESTS or op.name in _TESTING
    operands = [_operand(source, names, dtype, tested)
                for source, dtype in zip(node.inputs, loop, strict=False)]
    for position, source in enumerate(node.inputs):
        if _negates(node.op, position, source, loop):
            # LLVM makes ``x * -1``, ``x / -1`` and ``-0.0 - x`` a negation, which flips a
            # NaN's sign; numpy's multiply (the x86 instruction) keeps the NaN as it is
            operands[position] = f"hidden({operands[position]})"
    if node.op == "where" and node.inputs[0].kind == CONST and node.inputs[0].ndim == 0:
        # ``np.where(flag, np.log(x), x)`` with a Python bool: numpy computes both arms
        # and raises the flags of the one it drops; LLVM, seeing the choice made, would
        # drop that arm's work and its flags
        operands[0] = f"hidden({operands[0]})"
    text = template.format(*operands)
    if node.dtype in _PRESERVED and all(dtype == node.dtype for dtype in loop):
        return text  # numba computes in this type already: no cast needed
    return cast_result(text, node.dtype)


def _negates(op: str, position: int, source: Node, loop: Sequence[np.dtype]) -> bool:
    """Whether the float constant ``source``, operand ``position`` of ``op``, lets LLVM
    make the operation a negation: a multiplier or divisor of -1, a -0.0 minuend."""
    if source.kind != CONST or source.ndim or position >= len(loop) or \
            loop[position].kind not in "fc":
        return False
    value = np.asarray(source.value.value)
    if value.dtype.kind not in "fiu":
        return False
    number = float(value)
    if op in ("multiply", "true_divide"):
        return number == -1.0 and (op == "multiply" or position == 1)
    return op == "subtract" and position == 0 and number == 0.0 and math.copysign(1.0, number) < 0


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
    and whether it is a ``(n)`` core array (True) or a ``()`` value per row (False).  In a
    kernel of passes (``KernelProgram.sweeps``) ``rows`` marks an operand that varies
    along the accumulated rows too: ``(m,n)``, or ``(m)`` when not ``core``."""

    name: str
    dtype: np.dtype
    core: bool
    rows: bool = False

    @property
    def dims(self) -> str:
        """Its core dimensions in a gufunc layout: ``(m,n)``, ``(n)``, ``(m)`` or ``()``."""
        return "(" + ",".join(dim for dim, has in (("m", self.rows), ("n", self.core))
                              if has) + ")"


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
    # A kernel of passes (a region with ``reduced`` axes) has no statements of its own:
    # its ``sweeps`` run in order for each block of columns, with one array per column of
    # the block for each of its ``columns`` (accumulators and values kept between sweeps).
    sweeps: tuple[Sweep, ...] = ()
    columns: tuple[Operand, ...] = ()

    @property
    def operands(self) -> tuple[Operand, ...]:
        return self.inputs + self.outputs


@dataclasses.dataclass(frozen=True)
class Sweep:
    """One loop over the columns of a block in a kernel of passes (see ``emit_passes``):
    ``program`` is its statements, over the operands it uses by name (the kernel's
    operands, its column arrays ``c<k>`` and the row count ``count``).  A pass
    (``rows``) runs once per row, on that row's elements; a column step runs once."""

    label: str
    rows: bool
    program: KernelProgram


_CALLED = re.compile(r"\b([A-Za-z_]\w*)\(")  # the names a piece of source calls


def emit(region: Region, fastmath: frozenset[str] = frozenset()) -> KernelSource:
    """Generate the kernel for ``region`` (pure: the same region and flags give the same
    source; the fast-math flags are named in it, so they are part of its hash)."""
    if region.reduced:
        return emit_passes(region, fastmath)
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
                        program.outputs[-1].name == "done", program,
                        reports=reported_name(region.nodes))


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
    body = [f"{variable} = {program.inputs[position].name}[i]"
            for variable, position in program.loads]
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
    body = render_passes(program) if program.sweeps else render_statements(program)
    lines += [f"    {line}" if line else "" for line in body.split("\n")]
    lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------ kernels of passes

# Columns per block in the Python rendering of a kernel of passes (the compiled kernel
# makes its blocks as wide as its column arrays allow: ``lowering.loops.column_block``).
COLUMN_BLOCK = 256


def emit_passes(region: Region, fastmath: frozenset[str] = frozenset()) -> KernelSource:
    """Generate the kernel of a region that accumulates reductions across its rows
    (``region.reduced``, see ``partition.schedule``).

    Its gufunc takes the reduced axes as one core dimension ``m`` (the rows) beside the
    core axis ``n`` (the columns): an operand is ``(m,n)`` when it varies along both,
    ``(n)`` when it is constant along the rows, ``(m)`` or ``()`` when constant along the
    columns; the gufunc's outer loop covers the other axes.  For each block of columns
    the kernel runs its sweeps in order: column step 0 (accumulators start at their
    identity), then each pass over the rows followed by the column step finishing what
    that pass accumulated (a mean divides by the row count) and computing the values
    that depend on it.  An accumulator adds the rows in order, one at a time, as numpy's
    reduction along a non-contiguous axis does.  Values kept between sweeps live in one
    array per column of the block (``KernelProgram.columns``).
    """
    ndim = len(region.ones)
    dropped = tuple(axis for axis, one in enumerate(region.ones) if one)
    core_axis = max(axis for axis in range(ndim) if axis not in dropped)
    plan = schedule(region)
    inputs = tuple(Operand(f"in{position}", node.dtype, _varies_along(node, core_axis, ndim),
                           varies(node, region.reduced, ndim) is True)
                   for position, node in enumerate(region.inputs))
    outputs = tuple(Operand(f"out{position}", node.dtype, True, node in plan.rows)
                    for position, node in enumerate(region.outputs))
    program = _Passes(region, plan, inputs, outputs).program()
    code = render_passes(program)
    helpers = tuple(sorted(HELPER_NAMES.intersection(_CALLED.findall(code))))
    layout = ",".join(operand.dims for operand in inputs) + "->" + \
        ",".join(operand.dims for operand in outputs)
    signature = "void(" + ", ".join(_array_type(operand) for operand in program.operands) + ")"
    flags = tuple(sorted(fastmath))
    source = _module_source(layout, signature, helpers, program, flags)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return KernelSource(f"kernel_{digest}", source, layout, signature, helpers,
                        tuple(operand.core for operand in inputs), dropped, ndim,
                        tuple(operand.core for operand in outputs), flags, (), False, program,
                        rows_inputs=tuple(operand.rows for operand in inputs),
                        rows_outputs=tuple(operand.rows for operand in outputs),
                        reduced=region.reduced, reports=reported_name(region.nodes))


def _array_type(operand: Operand) -> str:
    if not operand.core and not operand.rows:
        return numba_type(operand.dtype)
    axes = ":, ::1" if operand.rows and operand.core else "::1" if operand.core else ":"
    return f"{numba_type(operand.dtype)}[{axes}]"


class _Passes:
    """Builds the sweeps of a kernel of passes from the region's ``Schedule``."""

    def __init__(self, region: Region, plan: Schedule, inputs: tuple[Operand, ...],
                 outputs: tuple[Operand, ...]) -> None:
        self.region, self.plan = region, plan
        self.inputs, self.outputs = inputs, outputs
        self.operand_of = dict(zip(region.inputs, inputs, strict=True))
        self.output_of = dict(zip(region.outputs, outputs, strict=True))
        self.position = {node: position for position, node in enumerate(region.nodes)}
        self.prelude = {node: f"s{position}" for position, node in enumerate(region.prelude)}
        # the sweep computing each column value: column step ``k`` is sweep ``2 * k``
        step = {node: 2 * level for node, level in plan.columns.items()}
        readers: dict[Node, list[int]] = {node: [] for node in region.nodes}
        for node in region.nodes:
            sweeps = [2 * done + 1 for done in plan.computed.get(node, ())]
            if node in plan.accumulating:
                sweeps = [2 * plan.accumulating[node] + 1]
            elif node in step:
                sweeps = [step[node]]
            for source in node.inputs:
                if source in readers:
                    readers[source] += sweeps
        # values read by a later sweep than their own are kept in column arrays, and so
        # are the accumulators
        self.later = {node for node in step
                      if any(sweep > step[node] for sweep in readers[node])}
        kept = [node for node in region.nodes
                if node in plan.accumulating or node in self.later]
        self.column_of = {node: Operand(f"c{index}", node.dtype, True)
                          for index, node in enumerate(kept)}

    def program(self) -> KernelProgram:
        plan = self.plan
        sweeps = []
        for level in range(plan.passes + 1):
            step = self.column_step(level)
            if step is not None:
                sweeps.append(step)
            if level < plan.passes:
                sweeps.append(self.row_pass(level))
        return KernelProgram(self.inputs, self.outputs, (), (), (), (), (), (),
                             tuple(sweeps), tuple(self.column_of.values()))

    def column_step(self, level: int) -> Sweep | None:
        """Column step ``level``: start (``level`` 0) or finish the accumulators of the
        pass before, then the column values of that level."""
        plan, sweep = self.plan, _Sweep(self)
        for node in self.region.nodes:
            if plan.columns.get(node) != level:
                continue
            variable = f"v{self.position[node]}"
            if node.kind != ELEMENTWISE:
                reduction = node.reduction
                assert reduction is not None and reduction.dtype == node.dtype, node
                accumulator = sweep.load(self.column_of[node], f"a{self.position[node]}")
                sweep.assign(variable, _finished(reduction, accumulator, node.dtype),
                             node.dtype)
            else:
                sweep.assign(variable, expression(node, sweep.reading(node.inputs)),
                             node.dtype)
            sweep.names[node] = variable
            if node in self.later:
                sweep.store(self.column_of[node], variable)
            if node in self.output_of:
                sweep.store(self.output_of[node], variable)
        if level == 0:
            for node in plan.accumulating:
                reduction = node.reduction
                assert reduction is not None
                variable = f"a{self.position[node]}"
                sweep.assign(variable, literal(_start(reduction), reduction.dtype),
                             reduction.dtype)
                sweep.store(self.column_of[node], variable)
        if not sweep.body:
            return None
        return sweep.finish(f"columns{level}", rows=False)

    def row_pass(self, index: int) -> Sweep:
        """Pass ``index`` over the rows: the row values it needs, its accumulations, the
        row values it stores."""
        plan, sweep = self.plan, _Sweep(self)
        for node in self.region.nodes:
            if index in plan.computed.get(node, ()):
                variable = f"v{self.position[node]}"
                sweep.assign(variable, expression(node, sweep.reading(node.inputs)),
                             node.dtype)
                sweep.names[node] = variable
                if plan.stored.get(node) == index:
                    sweep.store(self.output_of[node], variable)
            elif plan.accumulating.get(node) == index:
                reduction = node.reduction
                assert reduction is not None
                source = node.inputs[0]
                value = cast(sweep.reading((source,))[source], source.dtype, reduction.dtype)
                accumulator = sweep.load(self.column_of[node], f"a{self.position[node]}")
                sweep.assign(accumulator, _accumulate(reduction, accumulator, value),
                             reduction.dtype)
                sweep.store(self.column_of[node], accumulator)
        return sweep.finish(f"pass{index + 1}", rows=True)


class _Sweep:
    """The statements of one sweep being built, and the operands they use."""

    def __init__(self, kernel: _Passes) -> None:
        self.kernel = kernel
        self.inputs: dict[str, Operand] = {}
        self.outputs: dict[str, Operand] = {}
        self.loads: list[tuple[str, str]] = []
        self.body: list[Assign] = []
        self.stores: list[tuple[str, str]] = []
        self.names: dict[Node, str] = {}
        self.prelude: list[Assign] = []

    def use(self, operand: Operand, core: bool) -> Operand:
        """``operand`` as an input of this sweep: indexed per element when ``core``, one
        value per call (per row, in a pass) otherwise."""
        return self.inputs.setdefault(operand.name, Operand(operand.name, operand.dtype, core))

    def load(self, operand: Operand, variable: str) -> str:
        self.use(operand, True)
        if (variable, operand.name) not in self.loads:
            self.loads.append((variable, operand.name))
        return variable

    def assign(self, target: str, text: str, dtype: np.dtype) -> None:
        self.body.append(Assign(target, text, dtype))

    def store(self, operand: Operand, variable: str) -> None:
        if operand.name.startswith("out"):
            self.outputs.setdefault(operand.name, Operand(operand.name, operand.dtype, True))
        else:
            self.use(operand, True)
        self.stores.append((operand.name, variable))

    def reading(self, sources: Sequence[Node]) -> dict[Node, str]:
        """The names of ``sources`` in this sweep, loading what is not computed in it:
        operands, prelude values, values kept in column arrays."""
        kernel = self.kernel
        for source in sources:
            if source in self.names or not is_kernel_input(source):
                continue
            if source in kernel.operand_of:
                operand = kernel.operand_of[source]
                if operand.core:
                    self.names[source] = self.load(operand, f"x{operand.name[2:]}")
                else:
                    self.names[source] = self.use(operand, False).name
            elif source in kernel.prelude:
                self._prelude(source)
            else:
                column = kernel.column_of[source]
                self.names[source] = self.load(column, f"v{kernel.position[source]}")
        return self.names

    def _prelude(self, node: Node) -> None:
        kernel = self.kernel
        for source in node.inputs:
            if source in kernel.prelude and source not in self.names:
                self._prelude(source)
            elif source in kernel.operand_of and source not in self.names:
                self.names[source] = self.use(kernel.operand_of[source], False).name
        self.names[node] = kernel.prelude[node]
        self.prelude.append(Assign(kernel.prelude[node], expression(node, self.names),
                                   node.dtype))

    def finish(self, label: str, rows: bool) -> Sweep:
        if any("count" in statement.expression for statement in self.body):
            self.inputs["count"] = Operand("count", np.dtype(np.int64), False)
        inputs = tuple(self.inputs.values())
        position = {operand.name: index for index, operand in enumerate(inputs)}
        program = KernelProgram(inputs, tuple(self.outputs.values()), tuple(self.prelude),
                                tuple((variable, position[name])
                                      for variable, name in self.loads),
                                tuple(self.body), tuple(self.stores), (), ())
        return Sweep(label, rows, program)


# Whether numpy's sum of rows of -0.0 is -0.0 (it starts from the first row) or +0.0 (it
# starts from the identity, as numpy 2.4 does): a fact of the numpy installed.
NEGATIVE_ZERO_SUMS = bool(np.signbit(np.add.reduce(np.full((2, 2), -0.0), axis=0)[0]))


def _start(reduction: Reduction) -> object:
    """An accumulator's first value: the identity, and -0.0 for float sums where numpy's
    sum of rows of -0.0 is -0.0 (``NEGATIVE_ZERO_SUMS``)."""
    if reduction.ufunc == "add" and reduction.dtype.kind in "fc" and NEGATIVE_ZERO_SUMS:
        return complex(-0.0, -0.0) if reduction.dtype.kind == "c" else -0.0
    return reduction.identity()


def _accumulate(reduction: Reduction, total: str, value: str) -> str:
    """Adding one row into an accumulator: in order (no reassociation), as numpy adds
    rows along a non-contiguous axis."""
    if reduction.ufunc == "add" and reduction.dtype.kind in "fc":
        return f"({total} + {value})"
    return _combine(reduction, total, value)


def _finished(reduction: Reduction, total: str, dtype: np.dtype) -> str:
    """A completed accumulation as numpy returns it: a mean (or ``var``'s halves)
    divided by the row count, ``count`` (less ``ddof``, at least 0), in the dtypes of
    numpy's ``true_divide`` of the total by an ``intp``, then cast to ``dtype``."""
    if reduction.divide is None:
        if reduction.ufunc == "add" and reduction.dtype.kind in "fc":
            # started at -0.0 (see ``_start``), a sum of nothing is still +0.0
            return f"({total} if count > np.int64(0) else {literal(0, reduction.dtype)})"
        return total
    divisor = "count"
    if reduction.divide == "ddof" and reduction.ddof:
        ddof = f"np.int64({reduction.ddof})"
        divisor = f"(count - {ddof} if count > {ddof} else np.int64(0))"
    row = OPS["true_divide"]
    loop, out = row.loop_dtypes((reduction.dtype, np.dtype(np.intp)))
    template = template_for(row, loop)
    assert template is not None
    text = template.format(cast(total, reduction.dtype, loop[0]),
                           cast(divisor, np.dtype(np.int64), loop[1]))
    if not (out in _PRESERVED and all(each == out for each in loop)):
        text = cast_result(text, out)
    return cast(text, out, dtype)


def render_passes(program: KernelProgram) -> str:
    """A kernel of passes as Python statements: a function per sweep, then the blocks of
    columns calling them (passes once per row, on that row's part of the block)."""
    lines: list[str] = []
    for sweep in program.sweeps:
        lines.append(f"def {sweep.label}({', '.join(o.name for o in sweep.program.operands)}):")
        lines += [f"    {line}" for line in render_statements(sweep.program).split("\n")]
        lines.append("")
    rows = next(operand for operand in program.inputs if operand.rows)
    columns = next(operand for operand in program.operands if operand.core)
    lines += [f"m = {rows.name}.shape[0]", f"n = {columns.name}.shape[-1]",
              "count = np.int64(m)",
              f"for start in range(0, n, {COLUMN_BLOCK}):",
              f"    w = min({COLUMN_BLOCK}, n - start)"]
    lines += [f"    {column.name} = np.empty(w, {constructor(column.dtype)})"
              for column in program.columns]
    by_name = {operand.name: operand for operand in program.operands}
    for sweep in program.sweeps:
        arguments = ", ".join(_argument(by_name.get(operand.name), operand.name)
                              for operand in sweep.program.operands)
        if sweep.rows:
            lines += ["    for r in range(m):", f"        {sweep.label}({arguments})"]
        else:
            lines.append(f"    {sweep.label}({arguments})")
    return "\n".join(lines)


def _argument(operand: Operand | None, name: str) -> str:
    """What a sweep is called with for a kernel operand (None: a column array, the
    row count): this row's part of the block, the block, this row's value."""
    if operand is None:
        return name
    if operand.rows and operand.core:
        return f"{name}[r, start:start + w]"
    if operand.core:
        return f"{name}[start:start + w]"
    return f"{name}[r]" if operand.rows else name
