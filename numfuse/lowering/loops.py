"""The kernel's loops: a ``KernelProgram`` becomes numpy's gufunc inner-loop function.

numpy calls a gufunc's loop as ``loop(char **args, npy_intp *dimensions, npy_intp *steps,
void *data)``: ``dimensions[0]`` rows (the outer loop numpy broadcasts), ``dimensions[1]``
the core length ``n``; ``steps`` the byte step of every operand between rows, then the
byte stride along ``n`` of every core operand.  The loop function walks the rows and
calls the row function, whose operand pointers are ``noalias`` (numpy copies operands
that overlap an output, and an output written into an input's buffer is read and written
through the one pointer), so LLVM vectorises the element loop without run-time alias
checks.  Elements are addressed through the byte strides: LLVM versions the loop on
unit strides, so contiguous operands (the runtime's) run vectorised and any other
strides still give correct results.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from ..codegen import BLOCK, LEVELS, KernelProgram, KernelSource
from . import types as T
from .scalars import HELPERS, Emitter, Fallback, Helper, HelperCompiler, Value

Names = dict[str, Value]


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
    rows = [_row_function(module, row_symbol(symbol), program, kernel.fastmath, helpers,
                          False)]
    if any(operand.core and operand.dtype.kind == "c" for operand in program.operands):
        rows.append(_row_function(module, f"{symbol}.row_bytes", program, kernel.fastmath,
                                  helpers, True))
    _loop_function(module, symbol, program, [row.function for row in rows])
    roots = sorted({helper for row in rows for helper in row.calls},
                   key=lambda helper: helper.symbol)
    helpers_used = _linking_order(roots)
    fallbacks = {fallback for row in rows for fallback in row.fallbacks}
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


# ------------------------------------------------------------------ the loop over rows


def _loop_function(module: ir.Module, symbol: str, program: KernelProgram,
                   rows: list[ir.Function]) -> ir.Function:
    """``symbol(args, dimensions, steps, data)``: the rows, each by the row function.

    Core operands are addressed in elements (``stride / itemsize``), which lets LLVM
    version the element loop on unit strides and vectorise it.  numpy aligns operands, so
    a stride is a multiple of the dtype's alignment; for a complex dtype that may be half
    its size, and such rows run through a second row function addressing bytes."""
    step_type = ir.PointerType(T.I64)
    function = ir.Function(module, ir.FunctionType(
        ir.VoidType(), [ir.PointerType(T.BYTES), step_type, step_type, T.BYTES]), name=symbol)
    function.linkage = "weak_odr"  # a kernel loaded twice in a process is one symbol
    function.attributes.add("nounwind")
    args, dimensions, steps, _ = function.args
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    operands = program.operands
    count = builder.load(builder.gep(dimensions, [ir.Constant(T.I64, 0)]))
    length = builder.load(builder.gep(dimensions, [ir.Constant(T.I64, 1)]))
    bases = [builder.load(builder.gep(args, [ir.Constant(T.I64, k)]))
             for k in range(len(operands))]
    row_steps = [builder.load(builder.gep(steps, [ir.Constant(T.I64, k)]))
                 for k in range(len(operands))]
    strides: dict[int, ir.Value] = {}
    for position in [k for k, operand in enumerate(operands) if operand.core]:
        index = len(operands) + len(strides)
        strides[position] = builder.load(builder.gep(steps, [ir.Constant(T.I64, index)]))
    whole = ir.Constant(T.I1, 1)
    for position, stride in strides.items():
        size = ir.Constant(T.I64, operands[position].dtype.itemsize)
        if operands[position].dtype.kind == "c":
            whole = builder.and_(whole, builder.icmp_signed(
                "==", builder.srem(stride, size), ir.Constant(T.I64, 0)))

    def call(row: ir.Function, index: ir.Value, in_bytes: bool) -> None:
        arguments = [length]
        for k, operand in enumerate(operands):
            arguments.append(builder.gep(bases[k], [builder.mul(index, row_steps[k])]))
            if operand.core:
                size = ir.Constant(T.I64, 1 if in_bytes else operand.dtype.itemsize)
                arguments.append(builder.sdiv(strides[k], size))
        builder.call(row, arguments)

    def each_row(index: ir.Value, carried: Names) -> Names:
        if len(rows) == 1:
            call(rows[0], index, False)
            return carried
        with builder.if_else(whole) as (elements, in_bytes):
            with elements:
                call(rows[0], index, False)
            with in_bytes:
                call(rows[1], index, True)
        return carried

    _counted(builder, count, {}, each_row)
    builder.ret_void()
    return function


# ------------------------------------------------------------------ one row


@dataclasses.dataclass
class _Row:
    function: ir.Function
    calls: set[Helper]
    fallbacks: set[Fallback]


def _row_function(module: ir.Module, symbol: str, program: KernelProgram, flags: tuple[str, ...],
                  helpers: HelperCompiler, in_bytes: bool) -> _Row:
    """``symbol(n, operand pointer [, its stride if core]...)``: one row of the kernel,
    strides counted in elements (in bytes with ``in_bytes``)."""
    parameters: list[ir.Type] = [T.I64]
    for operand in program.operands:
        parameters.append(T.BYTES)
        if operand.core:
            parameters.append(T.I64)
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), parameters), name=symbol)
    function.linkage = "internal"
    function.attributes.add("nounwind")
    # Kept out of the loop over rows: as one loop nest, LLVM rematerialises the vector
    # constants in the element loop instead of keeping them in registers (gelu in
    # float32: 1.45x slower).
    function.attributes.add("noinline")
    arguments = iter(function.args)
    length = next(arguments)
    pointers, strides = {}, {}
    for operand in program.operands:
        pointer = next(arguments)
        pointer.add_attribute("noalias")
        pointers[operand.name] = pointer
        if operand.core:
            strides[operand.name] = next(arguments)
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    emitter = Emitter(builder, flags, helpers, guarded=True)
    lowering = _RowLowering(program, emitter, pointers, strides, in_bytes)
    lowering.emit(length)
    builder.ret_void()
    return _Row(function, emitter.calls, emitter.fallbacks)


class _RowLowering:
    def __init__(self, program: KernelProgram, emitter: Emitter,
                 pointers: dict[str, ir.Value], strides: dict[str, ir.Value],
                 in_bytes: bool) -> None:
        self.program = program
        self.in_bytes = in_bytes
        self.emitter = emitter
        self.builder = emitter.builder
        self.pointers = pointers
        self.strides = strides
        self.dtypes = {operand.name: operand.dtype for operand in program.operands}
        self.fold_targets = {fold.target: fold for fold in program.folds}

    def emit(self, length: ir.Value) -> None:
        program, emitter = self.program, self.emitter
        for operand in program.inputs:
            if not operand.core:
                emitter.values[operand.name] = self.load(operand.name, None)
        for statement in program.prelude:
            emitter.values[statement.target] = self.evaluate(statement.expression,
                                                             statement.dtype)
        accumulators: Names = {}
        for fold in program.folds:
            identity = self.evaluate(fold.identity, fold.reduction.dtype)
            if fold.blocked:
                for level in range(1, LEVELS + 1):
                    accumulators[f"{fold.name}_{level}"] = identity
            else:
                accumulators[fold.name] = identity
        if any(fold.blocked for fold in program.folds):
            accumulators = self.blocked_loop(length, accumulators)
        else:
            accumulators = _counted(self.builder, length, accumulators,
                                    lambda index, carried: self.element(index, carried))
        emitter.values.update(accumulators)
        for fold in program.folds:
            if fold.blocked:
                total = accumulators[f"{fold.name}_1"]
                for level in range(2, LEVELS + 1):
                    total = emitter.binary(ast.Add, accumulators[f"{fold.name}_{level}"],
                                           total)
                emitter.values[fold.name] = total
        for name, text in program.finals:
            self.store(name, None, self.evaluate(text, self.dtypes[name]))

    def evaluate(self, text: str, dtype: np.dtype) -> Value:
        value = self.emitter.expression(text)
        assert not isinstance(value, tuple), text
        return self.emitter.convert(value, dtype)

    def element(self, index: ir.Value, carried: Names) -> Names:
        """One element ``i``: loads, the body, stores; returns the updated accumulators."""
        emitter = self.emitter
        emitter.values.update(carried)
        for variable, position in self.program.loads:
            emitter.values[variable] = self.load(f"in{position}", index)
        for statement in self.program.body:
            emitter.values[statement.target] = self.evaluate(statement.expression,
                                                             statement.dtype)
        for operand, variable in self.program.stores:
            self.store(operand, index, emitter.values[variable])
        return {name: emitter.values[name] for name in carried}

    def address(self, operand: str, index: ir.Value | None) -> ir.Value:
        builder = self.builder
        pointer = self.pointers[operand]
        if index is not None and self.in_bytes:
            pointer = builder.gep(pointer, [builder.mul(index, self.strides[operand])])
        element = ir.PointerType(T.memory_type(self.dtypes[operand]))
        pointer = builder.bitcast(pointer, element)
        if index is not None and not self.in_bytes:
            pointer = builder.gep(pointer, [builder.mul(index, self.strides[operand])])
        return pointer

    def load(self, operand: str, index: ir.Value | None) -> Value:
        dtype = self.dtypes[operand]
        loaded = self.builder.load(self.address(operand, index), align=_alignment(dtype))
        if dtype.kind == "b":
            loaded = self.builder.icmp_unsigned("!=", loaded, ir.Constant(T.I8, 0))
        return Value(dtype, loaded)

    def store(self, operand: str, index: ir.Value | None, value: Value) -> None:
        dtype = self.dtypes[operand]
        stored = self.emitter.convert(value, dtype).ir
        if dtype.kind == "b":
            stored = self.builder.zext(stored, T.I8)
        self.builder.store(stored, self.address(operand, index), align=_alignment(dtype))

    def blocked_loop(self, length: ir.Value, accumulators: Names) -> Names:
        """The elements in blocks of ``BLOCK``: each float sum accumulates a block with
        reassociation, then adds it to a cascade of levels (see ``codegen.Fold``)."""
        builder, emitter = self.builder, self.emitter
        size = ir.Constant(T.I64, BLOCK)
        count = builder.udiv(builder.add(length, ir.Constant(T.I64, BLOCK - 1)), size)
        blocked = [fold for fold in self.program.folds if fold.blocked]
        plain = [fold.name for fold in self.program.folds if not fold.blocked]
        carried = dict(accumulators)
        carried["blocks"] = emitter.literal(0)

        def block(index: ir.Value, state: Names) -> Names:
            start = builder.mul(index, size)
            remaining = builder.sub(length, start)
            shorter = builder.icmp_signed("<", remaining, size)
            inner_length = builder.select(shorter, remaining, size)
            inner = {name: state[name] for name in plain}
            for fold in blocked:
                inner[fold.target] = self.evaluate(fold.zero, fold.reduction.dtype)
            inner = _counted(builder, inner_length, inner,
                             lambda j, values: self.element(builder.add(start, j), values))
            state = {**state, **{name: inner[name] for name in plain}}
            blocks = emitter.binary(ast.Add, state["blocks"], emitter.literal(1))
            state["blocks"] = blocks
            for fold in blocked:
                state = self.cascade(fold, state, inner[fold.target], blocks)
            return state

        result = _counted(builder, count, carried, block)
        result.pop("blocks")
        return result

    def cascade(self, fold: object, state: Names, block_sum: Value, blocks: Value) -> Names:
        emitter = self.emitter
        name = fold.name  # type: ignore[attr-defined]
        zero = self.evaluate(fold.zero, fold.reduction.dtype)  # type: ignore[attr-defined]
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


def _alignment(dtype: np.dtype) -> int:
    """numpy aligns ufunc operands to their dtype's alignment."""
    return dtype.alignment


def _counted(builder: ir.IRBuilder, count: ir.Value, carried: Names,
             body: Callable[[ir.Value, Names], Names]) -> Names:
    """``for index in range(count)``, threading ``carried`` values through the iterations;
    returns their values after the loop."""
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
    builder.cbranch(builder.icmp_signed("<", following, count), loop, after)
    builder.position_at_end(after)
    results = {}
    for name, value in carried.items():
        phi = builder.phi(value.ir.type, name=f"{name}.after")
        phi.add_incoming(value.ir, start)
        phi.add_incoming(updated[name].ir, end)
        results[name] = Value(value.dtype, phi)
    return results
