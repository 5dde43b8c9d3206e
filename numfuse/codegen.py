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

from .graph import CONST, Node
from .ops import HELPER_NAMES, OPS, template_for
from .partition import Region


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
        return literal(node.param("value").value, loop_dtype)
    return cast(names[node], node.dtype, loop_dtype)


def expression(node: Node, names: dict[Node, str]) -> str:
    """The scalar expression computing ``node`` from its operands' variables."""
    op = OPS[node.op]
    loop: tuple[np.dtype, ...] = node.param("loop")
    template = template_for(op, loop)
    assert template is not None, f"no template for {node.op} on {loop}"
    operands = [_operand(source, names, dtype)
                for source, dtype in zip(node.inputs, loop, strict=False)]
    text = template.format(*operands)
    if node.dtype in _PRESERVED and all(dtype == node.dtype for dtype in loop):
        return text  # numba computes in this type already: no cast needed
    return cast_result(text, node.dtype)


# dtypes numba's arithmetic keeps (it widens small integers and float32 mixed with ints).
_PRESERVED = frozenset(np.dtype(name) for name in ("float64", "int64", "complex128"))


def cast_result(text: str, dtype: np.dtype) -> str:
    if dtype.kind == "b":
        return f"bool({text})"
    return f"{constructor(dtype)}({text})"


def emit(region: Region) -> KernelSource:
    """Generate the kernel for ``region`` (pure: the same region gives the same source)."""
    ndim = len(region.ones)
    dropped = tuple(axis for axis, one in enumerate(region.ones) if one)
    kept = [axis for axis in range(ndim) if axis not in dropped]
    core_axis = kept[-1] if kept else None
    core_inputs = tuple(_varies_along(node, core_axis, ndim) for node in region.inputs)

    names: dict[Node, str] = {}
    params = []
    for position, node in enumerate(region.inputs):
        params.append(f"in{position}")
        if not core_inputs[position]:
            names[node] = f"in{position}"
    outputs = [f"out{position}" for position in range(len(region.outputs))]
    prologue = []
    for position, node in enumerate(region.prelude):
        names[node] = f"s{position}"
        prologue.append(f"s{position} = {expression(node, names)}")
    body = [f"{names.setdefault(node, f'x{position}')} = in{position}[i]"
            for position, node in enumerate(region.inputs) if core_inputs[position]]
    for position, node in enumerate(region.nodes):
        names[node] = f"v{position}"
        body.append(f"v{position} = {expression(node, names)}")
    body += [f"{out}[i] = {names[node]}" for out, node in zip(outputs, region.outputs,
                                                               strict=True)]

    code = "\n".join(prologue + body)
    helpers = tuple(sorted(name for name in HELPER_NAMES if re.search(rf"\b{name}\(", code)))
    layout = ",".join("(n)" if core else "()" for core in core_inputs) + "->" + \
        ",".join("(n)" for _ in outputs)
    arg_types = [f"{numba_type(node.dtype)}[::1]" if core else numba_type(node.dtype)
                 for node, core in zip(region.inputs, core_inputs, strict=True)]
    arg_types += [f"{numba_type(node.dtype)}[::1]" for node in region.outputs]
    signature = f"void({', '.join(arg_types)})"
    source = _module_source(layout, signature, helpers, params + outputs, prologue, body)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return KernelSource(f"kernel_{digest}", source, layout, signature, helpers, core_inputs,
                        dropped, ndim)


def _varies_along(node: Node, core_axis: int | None, ndim: int) -> bool:
    if core_axis is None:
        return True  # a region with no non-unit axis runs on length-1 arrays
    axis = core_axis - (ndim - node.ndim)
    return axis >= 0 and node.shape[axis] != 1


def _module_source(layout: str, signature: str, helpers: Sequence[str], params: list[str],
                   prologue: list[str], body: list[str]) -> str:
    lines = [
        '"""A numfuse kernel (generated).',
        "",
        f"layout:    {layout}",
        f"signature: {signature}",
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
    lines += [f"    {line}" for line in prologue]
    lines.append(f"    for i in range({params[-1]}.shape[0]):")
    lines += [f"        {line}" for line in body]
    lines.append("")
    return "\n".join(lines)
