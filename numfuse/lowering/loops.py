"""The kernel's loops: a ``KernelProgram`` becomes numpy's gufunc inner-loop function.

numpy calls a gufunc's loop as ``loop(char **args, npy_intp *dimensions, npy_intp *steps,
void *data)``: ``dimensions[0]`` rows (the outer loop numpy broadcasts), ``dimensions[1]``
the core length ``n``; ``steps`` the byte step of every operand between rows, then the
byte stride along ``n`` of every core operand.

The kernel's statements are compiled once, into the *row function*, whose element loop
runs over a whole number of ``GRANULE``s of contiguous elements.  Knowing that, LLVM
vectorises it without a scalar copy for the remainder (half the code to optimise and
assemble).  The loop function calls it, for each row:

* on the operands themselves for the row's whole granules, when every core operand is
  contiguous (the runtime's calls);
* on ``GRANULE``-element buffers for the rest: the last partial granule, and every
  granule of a row with a strided operand.  The buffers' unused tail repeats the row's
  last element, so those lanes compute values (and raise floating-point flags) the real
  elements already do; their results are dropped.  A kernel with fused reductions has a
  second, *tail* row function for these calls: a plain loop over the buffers' valid
  elements only (its ``limit``), so the vectorised loop folds every element it computes,
  with no per-element test.

The row function's operand pointers are ``noalias``: numpy copies operands that overlap
an output, and an output written into an input's buffer (``Region.donate``) is read and
written through the one pointer at the same index.  Fused reductions keep their
accumulators in a state the loop function initialises per row and finishes after it.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from ..codegen import BLOCK, LEVELS, Fold, KernelProgram, KernelSource
from . import types as T
from .scalars import HELPERS, Emitter, Fallback, Helper, HelperCompiler, Value

Names = dict[str, Value]
_ELEMENT = "element_"  # the element a fused reduction folds in

# Elements the row function's element loop counts in: a multiple of every vector width
# times unroll LLVM picks for kernels big enough for compile time to matter (4 x double
# times 4, 8 x float times 2 on AVX2), small enough that a short row does little wasted
# work.
GRANULE = 16
assert BLOCK % GRANULE == 0
# Vector iterations of a kernel's element loop LLVM interleaves when the kernel folds no
# reduction (a fold's order is fixed, see ``codegen.Fold``) and computes in float64
# (``_wide``).  A kernel of several transcendental functions is a chain of dependent
# operations (a polynomial, a division, the next function's argument) longer than the
# core's reorder window holds, so one iteration's chain runs nearly alone; two
# interleaved iterations overlap theirs.  LLVM chooses one for such loops (their register
# pressure).  Measured on AVX-512, 1e5 elements, one thread: Black-Scholes 915 -> 763 µs,
# softplus and sigmoid 450 -> 341 µs; short kernels unchanged; three or four iterations
# were slower than two.
INTERLEAVE = 2


@dataclasses.dataclass(frozen=True)
class LoweredKernel:
    """A kernel as LLVM IR: ``modules`` (the kernel's, then each helper's) to link into
    one, whose function ``symbol`` is the gufunc's loop; ``fallbacks`` are functions the
    backend must define."""

    symbol: str
    modules: tuple[str, ...]
    fallbacks: frozenset[Fallback]


def lower(kernel: KernelSource, helpers: HelperCompiler = HELPERS) -> LoweredKernel:
    """The LLVM IR of ``kernel`` (pure: the same source gives the same IR)."""
    program = kernel.program
    assert program is not None, "a KernelSource from codegen.emit carries its program"
    module = ir.Module(name=kernel.name)
    symbol = f"numfuse_{kernel.name}"
    if program.sweeps:
        emitted = _passes_functions(module, symbol, program, kernel.fastmath, helpers)
    else:
        state = _State(program.folds)
        row = _row_function(module, row_symbol(symbol), program, state, kernel.fastmath,
                            helpers)
        emitted = [row]
        tail = None
        if program.folds:
            emitted.append(_row_function(module, f"{symbol}.tail", program, state,
                                         kernel.fastmath, helpers, tail=True))
            tail = emitted[-1].function
        emitted.append(_loop_function(module, symbol, program, state, (row.function, tail),
                                      kernel.fastmath, helpers))
    roots = sorted(set().union(*(part.calls for part in emitted)),
                   key=lambda helper: helper.symbol)
    helpers_used = _linking_order(roots)
    fallbacks = set().union(*(part.fallbacks for part in emitted))
    for helper in helpers_used:
        fallbacks |= helper.fallbacks
    texts = (str(module), *(helper.text for helper in helpers_used))
    return LoweredKernel(symbol, texts, frozenset(fallbacks))


def row_symbol(symbol: str) -> str:
    """The function of the element loop (the one to read for vectorisation) of the
    kernel whose loop function is ``symbol``."""
    return f"{symbol}.row"


def _linking_order(roots: list[Helper]) -> list[Helper]:
    """Every helper reachable from ``roots``, each after one of its callers: LLVM's linker
    drops a ``linkonce_odr`` definition nothing linked so far refers to."""
    order: list[Helper] = []
    seen: set[str] = set()
    stack = list(reversed(roots))
    while stack:
        helper = stack.pop()
        if helper.symbol in seen:
            continue
        seen.add(helper.symbol)
        order.append(helper)
        stack.extend(sorted(helper.calls, key=lambda called: called.symbol, reverse=True))
    return order


@dataclasses.dataclass(frozen=True)
class _Emitted:
    function: ir.Function
    calls: frozenset[Helper]
    fallbacks: frozenset[Fallback]


class _State:
    """The accumulators of a kernel's fused reductions, kept between calls of the row
    function: one per fold, or the ``LEVELS`` levels of a blocked float sum, and the count
    of blocks summed so far (see ``codegen.Fold``)."""

    def __init__(self, folds: tuple[Fold, ...]) -> None:
        self.folds = folds
        self.names: list[str] = []
        self.dtypes: list[np.dtype] = []
        for fold in folds:
            levels = range(1, LEVELS + 1) if fold.blocked else [None]
            for level in levels:
                self.names.append(fold.name if level is None else f"{fold.name}_{level}")
                self.dtypes.append(fold.reduction.dtype)
        if any(fold.blocked for fold in folds):
            self.names.append("blocks")
            self.dtypes.append(T.INT64)
        self.type = ir.LiteralStructType([T.value_type(dtype) for dtype in self.dtypes]
                                         or [T.I8])
        self.pointer_type = ir.PointerType(self.type)

    def load(self, builder: ir.IRBuilder, pointer: ir.Value) -> Names:
        return {name: Value(dtype, builder.load(_field(builder, pointer, position)))
                for position, (name, dtype) in enumerate(zip(self.names, self.dtypes,
                                                             strict=True))}

    def store(self, builder: ir.IRBuilder, pointer: ir.Value, values: Names) -> None:
        for position, name in enumerate(self.names):
            builder.store(values[name].ir, _field(builder, pointer, position))


def _field(builder: ir.IRBuilder, pointer: ir.Value, position: int) -> ir.Value:
    return builder.gep(pointer, [ir.Constant(T.I32, 0), ir.Constant(T.I32, position)])


# ------------------------------------------------------------------ the loop over rows


def _loop_function(module: ir.Module, symbol: str, program: KernelProgram, state: _State,
                   row: tuple[ir.Function, ir.Function | None], flags: tuple[str, ...],
                   helpers: HelperCompiler) -> _Emitted:
    """``symbol(args, dimensions, steps, data)``: each row by the row function (and the
    tail row function, see ``_RowCall``), then the row's reduction results."""
    step_type = ir.PointerType(T.I64)
    function = ir.Function(module, ir.FunctionType(
        ir.VoidType(), [ir.PointerType(T.BYTES), step_type, step_type, T.BYTES]), name=symbol)
    function.linkage = "weak_odr"  # a kernel loaded twice in a process is one symbol
    function.attributes.add("nounwind")
    args, dimensions, steps, _ = function.args
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    emitter = Emitter(builder, flags, helpers)
    rows = _LoopOverRows(program, state, row, emitter)
    operands = program.operands
    count = builder.load(builder.gep(dimensions, [ir.Constant(T.I64, 0)]))
    rows.length = builder.load(builder.gep(dimensions, [ir.Constant(T.I64, 1)]))
    rows.bases = [builder.load(builder.gep(args, [ir.Constant(T.I64, k)]))
                  for k in range(len(operands))]
    rows.row_steps = [builder.load(builder.gep(steps, [ir.Constant(T.I64, k)]))
                      for k in range(len(operands))]
    for position in [k for k, operand in enumerate(operands) if operand.core]:
        index = len(operands) + len(rows.strides)
        rows.strides[position] = builder.load(builder.gep(steps,
                                                          [ir.Constant(T.I64, index)]))
    rows.allocate()
    _counted(builder, count, {}, rows.one, plain=True)
    builder.ret_void()
    return _Emitted(function, frozenset(emitter.calls), frozenset(emitter.fallbacks))


class _LoopOverRows:
    def __init__(self, program: KernelProgram, state: _State,
                 row: tuple[ir.Function, ir.Function | None], emitter: Emitter) -> None:
        self.program = program
        self.state = state
        self.row = row
        self.emitter = emitter
        self.builder = emitter.builder
        self.length: ir.Value
        self.bases: list[ir.Value] = []
        self.row_steps: list[ir.Value] = []
        self.strides: dict[int, ir.Value] = {}
        self.state_slot: ir.Value
        self.call: _RowCall

    def allocate(self) -> None:
        """The state and the granule buffers, in the entry block."""
        self.state_slot = self.builder.alloca(self.state.type, name="state")
        self.call = _RowCall(self.builder, self.program, *self.row)

    def one(self, index: ir.Value, carried: Names) -> Names:
        """Row ``index``: the state's identities, the row's granules, the results."""
        builder = self.builder
        pointers = [builder.gep(base, [builder.mul(index, step)])
                    for base, step in zip(self.bases, self.row_steps, strict=True)]
        start = self.start_state()
        self.state.store(builder, self.state_slot, start)
        self.call.run(pointers, self.strides, self.length, self.state_slot)
        self.finish(self.state.load(builder, self.state_slot), pointers)
        return carried

    def start_state(self) -> Names:
        values: Names = {}
        for fold in self.program.folds:
            identity = _evaluate(self.emitter, fold.identity, fold.reduction.dtype)
            if fold.blocked:
                for level in range(1, LEVELS + 1):
                    values[f"{fold.name}_{level}"] = identity
            else:
                values[fold.name] = identity
        if "blocks" in self.state.names:
            values["blocks"] = self.emitter.literal(0)
        return values

    def finish(self, values: Names, pointers: list[ir.Value]) -> None:
        """The fused reductions' results of the row, written to its ``()`` outputs."""
        emitter = self.emitter
        emitter.values.update(values)
        for fold in self.program.folds:
            if fold.blocked:
                total = values[f"{fold.name}_1"]
                for level in range(2, LEVELS + 1):
                    total = emitter.binary(ast.Add, values[f"{fold.name}_{level}"], total)
                emitter.values[fold.name] = total
        positions = {operand.name: position
                     for position, operand in enumerate(self.program.operands)}
        for name, text in self.program.finals:
            operand = self.program.operands[positions[name]]
            value = emitter.convert(_evaluate(emitter, text, operand.dtype), operand.dtype)
            _store_element(self.builder, pointers[positions[name]], operand.dtype, value)


class _RowCall:
    """Calls a row function (of ``program``) on ``length`` elements of its operands: the
    whole granules in place when every core operand is contiguous, the rest (the last
    partial granule, every granule of a strided row) through ``GRANULE``-element buffers
    allocated, when this is made, in the current (entry) block.  ``tail``, when given,
    is the row function the buffers' calls go to (see ``_row_function``)."""

    def __init__(self, builder: ir.IRBuilder, program: KernelProgram, row: ir.Function,
                 tail: ir.Function | None = None) -> None:
        self.builder = builder
        self.program = program
        self.row = row
        self.tail = row if tail is None else tail
        self.buffers: dict[int, ir.Value] = {}
        for position, operand in enumerate(program.operands):
            if operand.core:
                memory = T.memory_type(operand.dtype)
                self.buffers[position] = builder.alloca(ir.ArrayType(memory, GRANULE),
                                                        name=f"buffer.{operand.name}")
        # operands the row function writes: core outputs, inputs written in place
        self.written = {position for position, operand in enumerate(program.operands)
                        if operand.core and (position >= len(program.inputs) or any(
                            name == operand.name for name, _ in program.stores))}

    def run(self, pointers: list[ir.Value], strides: dict[int, ir.Value], length: ir.Value,
            state: ir.Value) -> None:
        """The row at ``pointers`` (one per operand), ``strides`` the byte strides of its
        core operands (by position), with the fold state at ``state``."""
        builder, program = self.builder, self.program
        contiguous = ir.Constant(T.I1, 1)
        for position, stride in strides.items():
            size = ir.Constant(T.I64, program.operands[position].dtype.itemsize)
            contiguous = builder.and_(contiguous, builder.icmp_signed("==", stride, size))
        granule = ir.Constant(T.I64, GRANULE)
        whole = builder.select(contiguous, builder.udiv(length, granule),
                               ir.Constant(T.I64, 0))
        with builder.if_then(builder.icmp_signed(">", whole, ir.Constant(T.I64, 0))):
            done = builder.mul(whole, granule)
            builder.call(self.row, [whole, done, *pointers, state])
        if program.prelude:  # numpy computes scalar work (and raises its flags) for no element too
            zero = ir.Constant(T.I64, 0)
            with builder.if_then(builder.icmp_signed("==", length, zero)):
                builder.call(self.row, [zero, zero, *pointers, state])
        first = builder.mul(whole, granule)
        left = builder.sub(length, first)
        parts = builder.udiv(builder.add(left, ir.Constant(T.I64, GRANULE - 1)), granule)
        _counted(builder, parts, {}, lambda part, values: self.through_buffers(
            pointers, strides, length, state, builder.add(first, builder.mul(part, granule)),
            values), plain=True)

    def through_buffers(self, pointers: list[ir.Value], strides: dict[int, ir.Value],
                        length: ir.Value, state: ir.Value, start: ir.Value,
                        carried: Names) -> Names:
        """Elements ``start`` to ``start + GRANULE`` (at most to the row's end) through the
        buffers: copied in, the last element repeated past the end; computed; the row's
        part copied out."""
        builder = self.builder
        granule = ir.Constant(T.I64, GRANULE)
        valid = builder.sub(length, start)
        valid = builder.select(builder.icmp_signed("<", valid, granule), valid, granule)
        last = builder.sub(length, ir.Constant(T.I64, 1))
        arguments = []
        for position, operand in enumerate(self.program.operands):
            if not operand.core:
                arguments.append(pointers[position])
                continue
            buffer = self.buffers[position]
            arguments.append(builder.bitcast(buffer, T.BYTES))
            if position < len(self.program.inputs):
                self.copy(pointers[position], strides[position], position, start, last,
                          GRANULE, into=True)
        builder.call(self.tail, [ir.Constant(T.I64, 1), valid, *arguments, state])
        for position in sorted(self.written):
            self.copy(pointers[position], strides[position], position, start, last, valid,
                      into=False)
        return carried

    def copy(self, pointer: ir.Value, stride: ir.Value, position: int, start: ir.Value,
             last: ir.Value, count: int | ir.Value, into: bool) -> None:
        """Element ``start + j`` of the operand to and from its buffer's element ``j``, for
        ``j < count`` (into the buffer: the row's last element past its end)."""
        builder = self.builder
        dtype = self.program.operands[position].dtype
        total = count if isinstance(count, ir.Value) else ir.Constant(T.I64, count)
        buffer = builder.bitcast(self.buffers[position], T.BYTES)
        builder.call(_copier(builder.module, T.memory_type(dtype)),
                     [pointer, stride, buffer, start, total, last,
                      ir.Constant(T.I1, int(into))])


# ------------------------------------------------------------------ kernels of passes

# A kernel of passes (``codegen.emit_passes``) runs its sweeps over one block of columns
# at a time: its column arrays (on the stack, at most ``SCRATCH_BYTES`` together) hold one
# value per column of a block.  Blocks are as wide as those arrays allow (at most
# ``MAX_COLUMNS``), the columns split evenly among them: measured here, passes over whole
# rows of a matrix that does not fit in the caches ran about twice as fast as passes over
# narrow blocks that do, whose short rows the prefetchers follow badly.
SCRATCH_BYTES = 256 * 1024
MIN_COLUMNS, MAX_COLUMNS = 256, 4096
assert MIN_COLUMNS % GRANULE == 0 and MAX_COLUMNS % GRANULE == 0


def widest_block(column_bytes: int) -> int:
    """The most columns per block of a kernel of passes whose column arrays take
    ``column_bytes`` per column."""
    fitting = SCRATCH_BYTES // max(column_bytes, 1) // GRANULE * GRANULE
    return min(MAX_COLUMNS, max(MIN_COLUMNS, fitting))


def column_block(columns: int, widest: int) -> int:
    """Columns per block for ``columns`` columns in blocks of at most ``widest``: as
    few blocks as fit, of equal widths rounded up to whole granules (as the compiled loop
    computes it for the columns in whole granules; the rest, fewer than a granule, are
    done with the row's last granule again)."""
    blocks = max(1, math.ceil(columns / widest))
    width = math.ceil(columns / blocks)
    return max(1, math.ceil(width / GRANULE)) * GRANULE


def _passes_functions(module: ir.Module, symbol: str, program: KernelProgram,
                      flags: tuple[str, ...], helpers: HelperCompiler) -> list[_Emitted]:
    """A row function per sweep (the last pass's is the kernel's ``row_symbol``: the
    loop that stores its main outputs) and the loop function running them."""
    state = _State(())
    last = max(index for index, sweep in enumerate(program.sweeps) if sweep.rows)
    emitted = [_row_function(module, row_symbol(symbol) if index == last else
                             f"{symbol}.{sweep.label}", sweep.program, state, flags, helpers)
               for index, sweep in enumerate(program.sweeps)]
    return [*emitted, _passes_loop(module, symbol, program, state,
                                   [part.function for part in emitted])]


def _passes_loop(module: ir.Module, symbol: str, program: KernelProgram, state: _State,
                 rows: list[ir.Function]) -> _Emitted:
    """``symbol(args, dimensions, steps, data)`` of a kernel of passes: for each row of
    the gufunc's outer loop and each block of columns, every sweep in order, a pass once
    per row (``rows`` are the sweeps' row functions)."""
    step_type = ir.PointerType(T.I64)
    function = ir.Function(module, ir.FunctionType(
        ir.VoidType(), [ir.PointerType(T.BYTES), step_type, step_type, T.BYTES]), name=symbol)
    function.linkage = "weak_odr"
    function.attributes.add("nounwind")
    args, dimensions, steps, _ = function.args
    builder = ir.IRBuilder(function.append_basic_block("entry"))

    def load(pointer: ir.Value, index: int) -> ir.Value:
        return builder.load(builder.gep(pointer, [ir.Constant(T.I64, index)]))

    operands = program.operands
    names = [dim for operand in operands for dim in operand.dims[1:-1].split(",") if dim]
    order = list(dict.fromkeys(names))  # numpy numbers core dimensions as they first appear
    outer, m, n = (load(dimensions, 0), load(dimensions, 1 + order.index("m")),
                   load(dimensions, 1 + order.index("n")))
    bases = [load(args, k) for k in range(len(operands))]
    outer_steps = [load(steps, k) for k in range(len(operands))]
    strides: dict[tuple[str, str], ir.Value] = {}
    index = len(operands)
    for operand in operands:
        for dim in ("m", "n"):
            if (operand.rows if dim == "m" else operand.core):
                strides[operand.name, dim] = load(steps, index)
                index += 1
    count = builder.alloca(T.I64, name="count")
    builder.store(m, count)
    widest = widest_block(sum(column.dtype.itemsize for column in program.columns))
    columns = {column.name: builder.alloca(ir.ArrayType(T.memory_type(column.dtype),
                                                        widest), name=column.name)
               for column in program.columns}
    state_slot = builder.alloca(state.type, name="state")
    calls = [_RowCall(builder, sweep.program, row) for sweep, row in zip(program.sweeps, rows,
                                                                        strict=True)]
    def constant(value: int) -> ir.Value:
        return ir.Constant(T.I64, value)

    tail = builder.urem(n, constant(GRANULE))
    whole = builder.sub(n, tail)  # the columns in whole granules
    width = _column_block(builder, whole, widest)
    by_name = {operand.name: (position, operand) for position, operand in enumerate(operands)}

    def sweep_call(call: _RowCall, here: list[ir.Value], row: ir.Value | None,
                   start: ir.Value, length: ir.Value) -> None:
        pointers, element_strides = [], {}
        for position, operand in enumerate(call.program.operands):
            if operand.name in columns:
                pointers.append(builder.bitcast(columns[operand.name], T.BYTES))
                element_strides[position] = ir.Constant(T.I64, operand.dtype.itemsize)
                continue
            if operand.name == "count":
                pointers.append(builder.bitcast(count, T.BYTES))
                continue
            kernel_position, kernel_operand = by_name[operand.name]
            offset: ir.Value = ir.Constant(T.I64, 0)
            if kernel_operand.rows and row is not None:
                offset = builder.mul(row, strides[operand.name, "m"])
            if kernel_operand.core:
                stride = strides[operand.name, "n"]
                offset = builder.add(offset, builder.mul(start, stride))
                element_strides[position] = stride
            pointers.append(builder.gep(here[kernel_position], [offset]))
        call.run(pointers, element_strides, length, state_slot)

    def block(start: ir.Value, length: ir.Value, here: list[ir.Value]) -> None:
        for call, sweep in zip(calls, program.sweeps, strict=True):
            if not sweep.rows:
                sweep_call(call, here, None, start, length)
                continue

            def one_row(row: ir.Value, carried: Names, call: _RowCall = call) -> Names:
                sweep_call(call, here, row, start, length)
                return carried

            _counted(builder, m, {}, one_row, plain=True)

    def outer_row(index: ir.Value, carried: Names) -> Names:
        here = [builder.gep(base, [builder.mul(index, step)])
                for base, step in zip(bases, outer_steps, strict=True)]
        blocks = builder.udiv(builder.add(whole, builder.sub(width, constant(1))), width)

        def main_block(block_index: ir.Value, values: Names) -> Names:
            start = builder.mul(block_index, width)
            left = builder.sub(whole, start)
            block(start, builder.select(builder.icmp_signed("<", left, width), left, width),
                  here)
            return values

        _counted(builder, blocks, {}, main_block, plain=True)
        # The columns past the last whole granule: the row's last granule again (its
        # other columns are computed a second time, to the same values), so no row goes
        # through the granule buffers; a row shorter than a granule does.
        with builder.if_then(builder.icmp_signed(">", tail, constant(0))):
            short = builder.icmp_signed("<", n, constant(GRANULE))
            block(builder.select(short, constant(0), builder.sub(n, constant(GRANULE))),
                  builder.select(short, n, constant(GRANULE)), here)
        return carried

    _counted(builder, outer, {}, outer_row, plain=True)
    builder.ret_void()
    return _Emitted(function, frozenset(), frozenset())


def _column_block(builder: ir.IRBuilder, columns: ir.Value, widest: int) -> ir.Value:
    """``column_block(columns, widest)`` computed by the kernel (at least one granule)."""
    def constant(value: int) -> ir.Value:
        return ir.Constant(T.I64, value)

    def ceiling(top: ir.Value, bottom: ir.Value) -> ir.Value:
        return builder.udiv(builder.add(top, builder.sub(bottom, constant(1))), bottom)

    blocks = ceiling(columns, constant(widest))
    blocks = builder.select(builder.icmp_signed("==", blocks, constant(0)), constant(1),
                            blocks)
    width = builder.mul(ceiling(ceiling(columns, blocks), constant(GRANULE)),
                        constant(GRANULE))
    return builder.select(builder.icmp_signed("==", width, constant(0)), constant(GRANULE),
                          width)


def _copier(module: ir.Module, memory: ir.Type) -> ir.Function:
    """The module's function copying elements of type ``memory`` between an operand and
    a buffer: ``copy(operand, stride, buffer, start, count, last, into)`` copies element
    ``start + j`` of the operand (``stride`` bytes apart; into the buffer, at most element
    ``last``) and element ``j`` of the buffer, for ``j < count``.  One function per element
    type, however many operands use it, keeps the kernel's code small."""
    symbol = f"numfuse.copy.{memory}"
    try:
        return module.get_global(symbol)
    except KeyError:
        pass
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [
        T.BYTES, T.I64, T.BYTES, T.I64, T.I64, T.I64, T.I1]), name=symbol)
    function.linkage = "internal"
    function.attributes.add("noinline")
    function.attributes.add("nounwind")
    operand, stride, buffer, start, count, last, into = function.args
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    typed_buffer = builder.bitcast(buffer, ir.PointerType(memory))

    def element(j: ir.Value, carried: Names) -> Names:
        index = builder.add(start, j)
        clamped = builder.select(builder.icmp_signed(">", index, last), last, index)
        index = builder.select(into, clamped, index)
        outside = builder.bitcast(builder.gep(operand, [builder.mul(index, stride)]),
                                  ir.PointerType(memory))
        inside = builder.gep(typed_buffer, [j])
        source = builder.select(into, outside, inside)
        target = builder.select(into, inside, outside)
        builder.store(builder.load(source), target)
        return carried

    _counted(builder, count, {}, element, plain=True)
    builder.ret_void()
    return function


def _evaluate(emitter: Emitter, text: str, dtype: np.dtype) -> Value:
    value = emitter.expression(text)
    assert not isinstance(value, tuple), text
    return emitter.convert(value, dtype)


def _store_element(builder: ir.IRBuilder, pointer: ir.Value, dtype: np.dtype,
                   value: Value) -> None:
    stored = value.ir
    if dtype.kind == "b":
        stored = builder.zext(stored, T.I8)
    target = builder.bitcast(pointer, ir.PointerType(T.memory_type(dtype)))
    builder.store(stored, target, align=dtype.alignment)


# ------------------------------------------------------------------ one row


def _row_function(module: ir.Module, symbol: str, program: KernelProgram, state: _State,
                  flags: tuple[str, ...], helpers: HelperCompiler, tail: bool = False
                  ) -> _Emitted:
    """``symbol(granules, limit, operand pointers..., state)``: the first
    ``granules * GRANULE`` elements of contiguous operands, fused reductions folded into
    the state; a ``tail`` function computes the first ``limit`` elements only, in a loop
    left scalar (fewer than a granule, in the buffers)."""
    parameters: list[ir.Type] = [T.I64, T.I64, *[T.BYTES] * len(program.operands),
                                 state.pointer_type]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), parameters), name=symbol)
    function.linkage = "internal"
    function.attributes.add("nounwind")
    # Kept out of the loop over rows: as one loop nest, LLVM rematerialised the vector
    # constants in the element loop instead of keeping them in registers.
    function.attributes.add("noinline")
    granules, limit, *pointers, state_pointer = function.args
    for pointer in (*pointers, state_pointer):
        pointer.add_attribute("noalias")
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    emitter = Emitter(builder, flags, helpers, guarded=True)
    row = _Row(program, emitter, dict(zip((operand.name for operand in program.operands),
                                          pointers, strict=True)), limit, tail)
    accumulators = state.load(builder, state_pointer)
    accumulators = row.emit(granules, accumulators)
    state.store(builder, state_pointer, accumulators)
    builder.ret_void()
    return _Emitted(function, frozenset(emitter.calls), frozenset(emitter.fallbacks))


class _Row:
    def __init__(self, program: KernelProgram, emitter: Emitter,
                 pointers: dict[str, ir.Value], limit: ir.Value, tail: bool) -> None:
        self.program = program
        self.emitter = emitter
        self.builder = emitter.builder
        self.pointers = pointers
        self.limit = limit
        self.tail = tail
        self.dtypes = {operand.name: operand.dtype for operand in program.operands}
        self.fold_targets = {fold.target: fold for fold in program.folds}

    def emit(self, granules: ir.Value, accumulators: Names) -> Names:
        program, emitter = self.program, self.emitter
        for operand in program.inputs:
            if not operand.core:
                emitter.values[operand.name] = self.load(operand.name, None)
        for statement in program.prelude:
            emitter.values[statement.target] = _evaluate(emitter, statement.expression,
                                                         statement.dtype)
        # computed even for a row of no element (flags of scalar work, once per row)
        prelude = [emitter.values[statement.target] for statement in program.prelude]
        # the loop counts in granules (so LLVM knows it needs no remainder), a tail's in
        # elements
        unit = 1 if self.tail else GRANULE
        units = emitter.pinned_count(self.limit if self.tail else granules, prelude)
        if "blocks" in accumulators:
            return self.blocked_loop(units, unit, accumulators)
        length = self.builder.mul(units, ir.Constant(T.I64, unit))
        # a float64 kernel without folds: two vector iterations interleaved (``INTERLEAVE``)
        interleave = INTERLEAVE if not accumulators and _wide(self.program) else None
        return _counted(self.builder, length, accumulators, self.element, plain=self.tail,
                        interleave=interleave)

    def element(self, index: ir.Value, carried: Names) -> Names:
        """One element ``index``: loads, the body, stores; returns the updated
        accumulators."""
        emitter = self.emitter
        emitter.values.update(carried)
        for variable, position in self.program.loads:
            emitter.values[variable] = self.load(self.program.inputs[position].name, index)
        for statement in self.program.body:
            fold = self.fold_targets.get(statement.target)
            if fold is None:
                emitter.values[statement.target] = _evaluate(
                    emitter, statement.expression, statement.dtype)
                continue
            dtype = fold.reduction.dtype
            emitter.values[_ELEMENT] = _evaluate(emitter, fold.value, dtype)
            emitter.values[statement.target] = _evaluate(emitter, fold.update(_ELEMENT), dtype)
        for operand, variable in self.program.stores:
            self.store(operand, index, emitter.values[variable])
        return {name: emitter.values[name] for name in carried}

    def address(self, operand: str, index: ir.Value | None) -> ir.Value:
        element = ir.PointerType(T.memory_type(self.dtypes[operand]))
        pointer = self.builder.bitcast(self.pointers[operand], element)
        return pointer if index is None else self.builder.gep(pointer, [index])

    def load(self, operand: str, index: ir.Value | None) -> Value:
        dtype = self.dtypes[operand]
        loaded = self.builder.load(self.address(operand, index), align=dtype.alignment)
        if dtype.kind == "b":
            loaded = self.builder.icmp_unsigned("!=", loaded, ir.Constant(T.I8, 0))
        return Value(dtype, loaded)

    def store(self, operand: str, index: ir.Value | None, value: Value) -> None:
        dtype = self.dtypes[operand]
        stored = self.emitter.convert(value, dtype).ir
        if dtype.kind == "b":
            stored = self.builder.zext(stored, T.I8)
        self.builder.store(stored, self.address(operand, index), align=dtype.alignment)

    def blocked_loop(self, units: ir.Value, unit: int, accumulators: Names) -> Names:
        """``units`` of ``unit`` elements in blocks of ``BLOCK`` elements: each float sum
        accumulates a block with reassociation, then adds it to a cascade of levels (see
        ``codegen.Fold``)."""
        builder, emitter = self.builder, self.emitter
        per_block = ir.Constant(T.I64, BLOCK // unit)
        count = builder.udiv(builder.add(units, ir.Constant(T.I64, BLOCK // unit - 1)),
                             per_block)
        blocked = [fold for fold in self.program.folds if fold.blocked]
        plain = [fold.name for fold in self.program.folds if not fold.blocked]

        def block(index: ir.Value, state: Names) -> Names:
            first = builder.mul(index, per_block)
            remaining = builder.sub(units, first)
            shorter = builder.icmp_signed("<", remaining, per_block)
            inner_length = builder.mul(builder.select(shorter, remaining, per_block),
                                       ir.Constant(T.I64, unit))
            start = builder.mul(first, ir.Constant(T.I64, unit))
            inner = {name: state[name] for name in plain}
            for fold in blocked:
                inner[fold.target] = _evaluate(emitter, fold.zero, fold.reduction.dtype)
            inner = _counted(builder, inner_length, inner, lambda j, values: self.element(
                builder.add(start, j), values), plain=self.tail)
            state = {**state, **{name: inner[name] for name in plain}}
            blocks = emitter.binary(ast.Add, state["blocks"], emitter.literal(1))
            state["blocks"] = blocks
            for fold in blocked:
                state = self.cascade(fold, state, inner[fold.target], blocks)
            return state

        return _counted(builder, count, accumulators, block)

    def cascade(self, fold: Fold, state: Names, block_sum: Value, blocks: Value) -> Names:
        """Add a block's sum to the first level of ``fold``'s cascade, carrying full levels
        upwards every 16, 256 and 4096 blocks (as ``Fold.block_end`` writes it)."""
        emitter = self.emitter
        name = fold.name
        zero = _evaluate(emitter, fold.zero, fold.reduction.dtype)
        state = dict(state)
        state[f"{name}_1"] = emitter.binary(ast.Add, state[f"{name}_1"], block_sum)

        def carry(level: int, values: Names) -> Names:
            lower, upper = f"{name}_{level}", f"{name}_{level + 1}"
            values = dict(values)
            values[upper] = emitter.binary(ast.Add, values[upper], values[lower])
            values[lower] = zero
            if level + 1 < LEVELS:
                values = self.when_multiple(blocks, 16 ** (level + 1), values,
                                            lambda inner: carry(level + 1, inner))
            return values

        return self.when_multiple(blocks, 16, state, lambda values: carry(1, values))

    def when_multiple(self, blocks: Value, period: int, values: Names,
                      update: Callable[[Names], Names]) -> Names:
        """``update(values)`` when ``blocks`` is a multiple of ``period``, else ``values``."""
        builder = self.builder
        remainder = builder.urem(blocks.ir, ir.Constant(T.I64, period))
        condition = builder.icmp_unsigned("==", remainder, ir.Constant(T.I64, 0))
        before = builder.block
        then = builder.append_basic_block("carry")
        done = builder.append_basic_block("carried")
        builder.cbranch(condition, then, done)
        builder.position_at_end(then)
        updated = update(values)
        then_end = builder.block
        builder.branch(done)
        builder.position_at_end(done)
        merged = {}
        for name, value in values.items():
            phi = builder.phi(value.ir.type)
            phi.add_incoming(value.ir, before)
            phi.add_incoming(updated[name].ir, then_end)
            merged[name] = Value(value.dtype, phi)
        return merged


def _plain_loop(module: ir.Module) -> ir.Value:
    """Loop metadata asking LLVM neither to vectorise nor to unroll the loop."""
    options = [module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.enable"),
                                    ir.Constant(T.I1, 0)]),
               module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])]
    name = ir.MetaDataString(module, f"numfuse.loop.{len(module.metadata)}")
    loop = module.add_metadata([name, *options])
    loop.operands = (loop, *options)  # a loop's metadata refers to itself first
    return loop


def _wide(program: KernelProgram) -> bool:
    """Whether every value of ``program`` but its booleans has 8 bytes (a float64 kernel):
    a vector of its values then holds at most 8 lanes, and ``INTERLEAVE`` of them fit in a
    ``GRANULE`` (narrower values fill more lanes; two vectors of 16 float32 lanes
    overshoot the granule, and LLVM then scalarised calls in the loop)."""
    dtypes = [operand.dtype for operand in program.operands]
    dtypes += [statement.dtype for statement in (*program.prelude, *program.body)]
    return all(dtype.itemsize == 8 or dtype.kind == "b" for dtype in dtypes)


def _interleaved_loop(module: ir.Module, count: int) -> ir.Value:
    """Loop metadata asking LLVM to interleave ``count`` iterations of the vector loop."""
    option = module.add_metadata([ir.MetaDataString(module, "llvm.loop.interleave.count"),
                                  ir.Constant(T.I32, count)])
    name = ir.MetaDataString(module, f"numfuse.loop.{len(module.metadata)}")
    loop = module.add_metadata([name, option])
    loop.operands = (loop, option)  # a loop's metadata refers to itself first
    return loop


def _counted(builder: ir.IRBuilder, count: ir.Value, carried: Names,
             body: Callable[[ir.Value, Names], Names], plain: bool = False,
             interleave: int | None = None) -> Names:
    """``for index in range(count)``, threading ``carried`` values through the iterations;
    returns their values after the loop.  A ``plain`` loop is left as written (neither
    vectorised nor unrolled: the few elements of a buffer copy are not worth the code);
    ``interleave``: how many vector iterations LLVM interleaves (None: its choice)."""
    start = builder.block
    loop = builder.append_basic_block("loop")
    after = builder.append_basic_block("after")
    zero = ir.Constant(T.I64, 0)
    builder.cbranch(builder.icmp_signed(">", count, zero), loop, after)
    builder.position_at_end(loop)
    index = builder.phi(T.I64, name="index")
    index.add_incoming(zero, start)
    phis = {}
    for name, value in carried.items():
        phi = builder.phi(value.ir.type, name=name)
        phi.add_incoming(value.ir, start)
        phis[name] = phi
    updated = body(index, {name: Value(carried[name].dtype, phi) for name, phi in phis.items()})
    following = builder.add(index, ir.Constant(T.I64, 1))
    end = builder.block
    index.add_incoming(following, end)
    for name, phi in phis.items():
        value = updated[name]
        assert value.dtype == carried[name].dtype, (name, value.dtype, carried[name].dtype)
        phi.add_incoming(value.ir, end)
    latch = builder.cbranch(builder.icmp_signed("<", following, count), loop, after)
    if plain:
        latch.set_metadata("llvm.loop", _plain_loop(builder.module))
    elif interleave is not None:
        latch.set_metadata("llvm.loop", _interleaved_loop(builder.module, interleave))
    builder.position_at_end(after)
    results = {}
    for name, value in carried.items():
        phi = builder.phi(value.ir.type, name=f"{name}.after")
        phi.add_incoming(value.ir, start)
        phi.add_incoming(updated[name].ir, end)
        results[name] = Value(value.dtype, phi)
    return results
