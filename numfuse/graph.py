"""The one IR: immutable nodes ``(op, kind, inputs, payload)`` with a dtype and a shape
pattern; each kind of node carries a typed payload (``Argument``, ``Constant``, ``Loop``,
``Call``) that ``verify`` checks.

A ``Graph`` is the traced function: its argument nodes, its flat output nodes and the
container structure (``treedef``) the outputs are returned in.  ``str(graph)`` prints it
in the spirit of a jaxpr, one equation per line, grouped by fusion region once the graph
has been partitioned.

Shapes are patterns: each dimension is an ``int`` when it is known at trace time (every
dimension of a constant, and every length-1 dimension of an argument) or ``None`` for an
argument's dimension whose size is free and never 1.  Two values "have the same loop
shape" when their patterns have the same length and the same length-1 dimensions.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import enum
import heapq
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from .dtypes import short_name
from .errors import outside_numfuse, source_line_from
from .pytree import LEAF

if TYPE_CHECKING:
    from .reductions import Reduction

Shape = tuple[int | None, ...]


class NodeKind(str, enum.Enum):
    """What a node is: an argument, a constant, an elementwise op (fusible into a region)
    or a numpy call the runtime replays (not fusible, except the reductions a region can
    complete)."""

    INPUT = "input"
    CONST = "const"
    ELEMENTWISE = "elementwise"
    NUMPY = "numpy"

    def __str__(self) -> str:
        return self.value


INPUT, CONST, ELEMENTWISE, NUMPY = NodeKind.INPUT, NodeKind.CONST, NodeKind.ELEMENTWISE, \
    NodeKind.NUMPY


class Const:
    """A constant value snapshotted at trace time, hashable by its bytes."""

    __slots__ = ("_key", "value")

    def __init__(self, value: Any) -> None:
        if isinstance(value, np.ndarray):
            value = value.copy()
            value.flags.writeable = False
            self._key: tuple[Any, ...] = (value.dtype.str, value.shape, value.tobytes())
        else:
            self._key = (type(value).__name__, np.asarray(value).dtype.str,
                         np.asarray(value).tobytes())
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Const) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        if isinstance(self.value, np.ndarray) and self.value.size > 4:
            return f"array<{self.value.dtype}{list(self.value.shape)}>"
        return repr(self.value.tolist() if isinstance(self.value, np.ndarray) else self.value)


@dataclasses.dataclass(frozen=True)
class Argument:
    """An ``input`` node's payload: its position among the function's flat arguments."""

    index: int


@dataclasses.dataclass(frozen=True)
class Constant:
    """A ``const`` node's payload: the value snapshotted at trace time (a ``Const``, or an
    opaque object a numpy call receives as it is)."""

    value: Any


@dataclasses.dataclass(frozen=True)
class Loop:
    """An ``elementwise`` node's payload: the dtypes its inputs are cast to for the loop
    (the ufunc loop numpy would pick), one per input."""

    dtypes: tuple[np.dtype, ...]


@dataclasses.dataclass(frozen=True)
class Call:
    """A ``numpy`` node's payload: the call the runtime replays; ``moving`` the axes
    whose size the call chooses from its data (not the arguments' shapes); ``reduction``
    the recognised reduction a region can complete in its loop, if any."""

    call: Any
    moving: frozenset[int] = frozenset()
    reduction: Reduction | None = None


# What nodes made now are part of (see ``Node.backward`` and ``Node.source``): None while
# tracing an ordinary function; set by ``numfuse.autodiff`` while it traces a function it
# differentiates ("forward") and while it adds the backward pass ("backward").
_phase: contextvars.ContextVar[str | None] = contextvars.ContextVar("numfuse_phase",
                                                                     default=None)


@contextlib.contextmanager
def tracing_phase(phase: str) -> Iterator[None]:
    """Nodes made inside are marked as made in ``phase``: ``"forward"`` records the user's
    source line of each (for error messages about the backward pass), ``"backward"``
    marks them as the backward pass's."""
    token = _phase.set(phase)
    try:
        yield
    finally:
        _phase.reset(token)


def _made_in_backward() -> bool:
    return _phase.get() == "backward"


def _source_line() -> str | None:
    if _phase.get() != "forward":
        return None
    return source_line_from(sys._getframe(2))  # past Node's generated __init__
# The floating-point error categories of ``np.errstate``, in numpy's order.
ERROR_CATEGORIES = ("divide", "over", "under", "invalid")


class _Callers:
    """The ``call`` of an ``ErrState`` that leaves the caller's error handler in force."""

    def __repr__(self) -> str:
        return "CALLERS"

    def __reduce__(self) -> str:
        return "CALLERS"


CALLERS: Any = _Callers()


@dataclasses.dataclass(frozen=True, eq=False)
class ErrState:
    """How the floating-point errors of an operation are handled when the traced function
    chose it itself: ``np.errstate``/``np.seterr``/``np.seterrcall`` or warnings filters
    in force, inside the function, where the operation was traced.  A node without one
    (``Node.errstate`` None) follows the caller's state at call time.

    ``modes`` are the ``(category, mode)`` pairs the function set (``("divide",
    "ignore")``), the other categories stay the caller's; ``call`` is the handler it set
    with ``call=``/``seterrcall`` (``CALLERS``: the caller's).  ``filters`` are the
    warnings filters (``warnings.filters`` entries) it put in front of the caller's, or,
    when ``own_filters``, the whole list it left (it reset or reordered the caller's).
    Two states are equal when they do the same (``call`` compared by identity).
    """

    modes: tuple[tuple[str, str], ...] = ()
    call: Any = CALLERS
    filters: tuple[tuple[Any, ...], ...] = ()
    own_filters: bool = False

    def _key(self) -> tuple[Any, ...]:
        return (self.modes, id(self.call), self.filters, self.own_filters)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ErrState) and (self is other or self._key() == other._key())

    def __hash__(self) -> int:
        return hash(self._key())

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Run the block as the traced function ran the operation: the caller's state
        (``np.errstate``, warnings filters) with this state's changes on top.  Warnings
        filters are process-wide (``warnings.catch_warnings``): a state holding filters
        applies them to every thread while the block runs."""
        options: dict[str, Any] = dict(self.modes)
        if self.call is not CALLERS:
            options["call"] = self.call
        if not (self.filters or self.own_filters):
            with np.errstate(**options):
                yield
            return
        with warnings.catch_warnings(), np.errstate(**options):
            # catch_warnings has just invalidated the warning registries; editing the
            # list in place now is what warnings.filterwarnings does, without re-parsing.
            filters: list[Any] = warnings.filters  # type: ignore[assignment]
            filters[: len(filters) if self.own_filters else 0] = self.filters
            yield

    def describe(self) -> str:
        """``np.errstate(divide='ignore')``, ``warnings ignore RuntimeWarning``, ..."""
        parts = []
        options = [f"{category}={mode!r}" for category, mode in self.modes]
        if self.call is not CALLERS:
            options.append(f"call={getattr(self.call, '__name__', type(self.call).__name__)}")
        if options:
            parts.append(f"np.errstate({', '.join(options)})")
        if self.own_filters:
            parts.append("its own warnings filters")
        for action, message, category, module, _lineno in self.filters[:3]:
            text = f"warnings {action} {getattr(category, '__name__', category)}"
            if message is not None:
                text += f" {getattr(message, 'pattern', message)!r}"
            if module is not None:
                text += f" in {getattr(module, 'pattern', module)}"
            parts.append(text)
        if len(self.filters) > 3 and not self.own_filters:
            parts.append(f"{len(self.filters) - 3} more warnings filters")
        return ", ".join(parts)


def errstate_text(state: ErrState | None) -> str:
    """How explanations name a node's error handling: the function's, or the caller's."""
    return "the caller's error handling" if state is None else state.describe()


Payload = Union[Argument, Constant, Loop, Call]  # noqa: UP007 - a runtime alias
PAYLOADS: dict[NodeKind, type] = {INPUT: Argument, CONST: Constant, ELEMENTWISE: Loop,
                                  NUMPY: Call}


@dataclasses.dataclass(frozen=True, eq=False)
class Node:
    """One value of the traced program.  Nodes compare by identity.

    ``kind`` says what it is and ``payload`` carries that kind's facts (``PAYLOADS``
    gives the payload type of each kind; the properties below read them).  ``weak`` marks
    a Python scalar (NEP 50 weak); ``scalar`` marks a 0-d result that numpy returns as a
    numpy scalar rather than a 0-d array.  ``backward`` marks a node of a gradient's
    backward pass (``numfuse.autodiff``); ``source`` is the user's line that made it, kept
    only while tracing a function being differentiated (see ``tracing_phase``).
    ``errstate`` is the floating-point error handling the function set around an
    operation (``elementwise`` and ``numpy`` nodes only); None, the common case, leaves
    the caller's in force.
    """

    op: str
    kind: NodeKind
    inputs: tuple[Node, ...]
    dtype: np.dtype
    shape: Shape
    payload: Payload | None = None
    weak: bool = False
    scalar: bool = False
    errstate: ErrState | None = None
    backward: bool = dataclasses.field(default_factory=_made_in_backward)
    source: str | None = dataclasses.field(default_factory=_source_line, repr=False)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @cached_property
    def ones(self) -> tuple[bool, ...]:
        """The loop shape: True for each length-1 dimension."""
        return tuple(size == 1 for size in self.shape)

    @property
    def index(self) -> int:
        """An argument's position among the flat arguments."""
        payload = self.payload
        if not isinstance(payload, Argument):
            raise TypeError(f"{self} is not an argument")
        return payload.index

    @property
    def value(self) -> Any:
        """A constant's value: the ``Const`` (``.value`` is the number or array) or the
        opaque object."""
        payload = self.payload
        if not isinstance(payload, Constant):
            raise TypeError(f"{self} is not a constant")
        return payload.value

    @property
    def loop(self) -> tuple[np.dtype, ...]:
        """The loop dtypes of an elementwise op's inputs; () for other nodes."""
        return self.payload.dtypes if isinstance(self.payload, Loop) else ()

    @property
    def call(self) -> Any:
        """The call a numpy node replays; None for other nodes."""
        return self.payload.call if isinstance(self.payload, Call) else None

    @property
    def moving(self) -> frozenset[int]:
        """The axes whose size a numpy call chooses from its data; empty for other nodes."""
        return self.payload.moving if isinstance(self.payload, Call) else frozenset()

    @property
    def reduction(self) -> Reduction | None:
        """The reduction a numpy call was recognised as; None for other nodes."""
        return self.payload.reduction if isinstance(self.payload, Call) else None

    def type_str(self) -> str:
        dims = ",".join("n" if size is None else str(size) for size in self.shape)
        return f"{short_name(self.dtype)}[{dims}]"

    def __repr__(self) -> str:
        return f"Node({self.op}, {self.type_str()})"


def shape_text(shape: Shape) -> str:
    """A shape pattern as numpy writes shapes, free sizes as ``n``: ``(5, n)``, ``(n,)``."""
    return "(" + ", ".join("n" if size is None else str(size) for size in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def toposort(outputs: Iterable[Node]) -> tuple[Node, ...]:
    """All nodes reachable from ``outputs``, every node after its inputs (iteratively)."""
    order: list[Node] = []
    seen: set[int] = set()
    for root in outputs:
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, next_input = stack.pop()
            if next_input == 0 and id(node) in seen:
                continue
            if next_input < len(node.inputs):
                stack.append((node, next_input + 1))
                child = node.inputs[next_input]
                if id(child) not in seen:
                    stack.append((child, 0))
                continue
            if id(node) not in seen:
                seen.add(id(node))
                order.append(node)
    return tuple(order)


def broadcast_shapes(*shapes: Shape) -> Shape:
    """numpy's broadcasting on shape patterns; raises ``ValueError`` like numpy."""
    first = shapes[0] if shapes else ()
    if all(shape == first for shape in shapes):
        return first  # the common case: nothing to broadcast
    ndim = max((len(shape) for shape in shapes), default=0)
    result: list[int | None] = []
    for axis in range(-ndim, 0):
        sizes = {shape[axis] for shape in shapes if len(shape) >= -axis} - {1}
        known = {size for size in sizes if size is not None}
        if len(known) > 1:
            described = " ".join(
                "(" + ",".join("n" if s is None else str(s) for s in shape) + ")"
                for shape in shapes
            )
            raise ValueError(
                f"operands could not be broadcast together with shapes {described}"
            )
        result.append(known.pop() if known else (None if sizes else 1))
    return tuple(result)


# ---------------------------------------------------------------------------- Graph


def node_names(nodes: Iterable[Node]) -> dict[Node, str]:
    """The names printed graphs and ``explain()`` use: ``a, b, ..., z, aa, ...`` in order."""
    names = {}
    for index, node in enumerate(nodes):
        name, number = "", index + 1
        while number:
            number, rest = divmod(number - 1, 26)
            name = chr(ord("a") + rest) + name
        names[node] = name
    return names


def operand_text(node: Node, names: Mapping[Node, str]) -> str:
    """How an equation names an operand: 0-d constants by value, everything else by name."""
    if node.kind == CONST and node.ndim == 0:
        return repr(node.value)
    return names[node]


def equation(node: Node, names: Mapping[Node, str]) -> str:
    """One line of a printed graph: ``c:f64[n] = subtract a b``, ``d:f64[] = sum(c, axis=0)``."""
    operands = [operand_text(source, names) for source in node.inputs]
    if node.call is not None:
        text = node.call.describe(operands)
    elif node.kind == CONST:
        text = f"{node.op} {node.value!r}"
    else:
        text = " ".join([node.op, *operands])
    if node.errstate is not None:
        text += f"  # under {node.errstate.describe()}"
    mark = "  # backward" if node.backward else ""
    return f"{names[node]}:{node.type_str()} = {text}{mark}"


@dataclasses.dataclass(frozen=True, eq=False)
class Warned:
    """A warning the function gave while it was traced, outside numpy's calls (a
    ``warnings.warn`` in its code on a condition of shapes or settings, numpy's
    ``DeprecationWarning``): given again at each call, as a run of the function gives it.
    ``module`` and ``registry`` are the ``__name__`` and ``__warningregistry__`` of the
    module the warning names (the filters' ``module=`` and "default" action see them as
    for a direct ``warnings.warn``); no module: a location inside numfuse (the function's
    ``stacklevel=2``), given at the first frame outside it."""

    message: Warning
    filename: str
    lineno: int
    module: str | None
    registry: dict[Any, Any] | None

    def give(self) -> None:
        if self.module is None:
            warnings.warn(self.message, stacklevel=outside_numfuse())
        else:
            warnings.warn_explicit(self.message, type(self.message), self.filename,
                                   self.lineno, self.module, self.registry)

    def __str__(self) -> str:
        return f"warns {type(self.message).__name__}({str(self.message)!r})"


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
    """A traced function: argument nodes, flat output nodes and their container structure.

    ``region_of`` maps fused nodes to the index of the kernel that computes them; it is
    empty until the graph has been partitioned.  ``layouts`` gives each region's gufunc
    layout for printing.  ``same_as[k]`` is the first output position holding the very
    same Python object the function returned at position ``k`` (the function returned one
    value twice); equal but separately computed results get distinct arrays.
    ``warned`` are the warnings the function gives at each call (``Warned``).
    """

    inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]
    treedef: Any = LEAF
    same_as: tuple[int, ...] = ()
    region_of: Mapping[Node, int] = dataclasses.field(default_factory=dict)
    layouts: Mapping[int, str] = dataclasses.field(default_factory=dict)
    warned: tuple[Warned, ...] = ()

    @cached_property
    def nodes(self) -> tuple[Node, ...]:
        """Every node, topologically sorted; arguments first in argument order."""
        return toposort(self.inputs + self.outputs)

    @cached_property
    def consumers(self) -> dict[Node, list[Node]]:
        users: dict[Node, list[Node]] = {node: [] for node in self.nodes}
        for node in self.nodes:
            for source in node.inputs:
                users[source].append(node)
        return users

    @cached_property
    def returned(self) -> frozenset[Node]:
        """The nodes the function returns."""
        return frozenset(self.outputs)

    def with_outputs(self, outputs: Sequence[Node]) -> Graph:
        return dataclasses.replace(self, outputs=tuple(outputs), region_of={}, layouts={})

    def annotate(self, region_of: Mapping[Node, int], layouts: Mapping[int, str]) -> Graph:
        return dataclasses.replace(self, region_of=dict(region_of), layouts=dict(layouts))

    def __str__(self) -> str:
        names = node_names(self.nodes)
        args = " ".join(f"{names[node]}:{node.type_str()}" for node in self.inputs)
        lines = ["{ lambda " + args + " ."]
        lines.extend(f"    {warned}" for warned in self.warned)
        current_region: int | None = None
        for node in self._printing_order():
            if node.kind == INPUT or (node.kind == CONST and node.ndim == 0):
                continue
            region = self.region_of.get(node)
            if region != current_region and region is not None:
                lines.append(f"    # kernel {region}: {self.layouts.get(region, '')}")
            current_region = region
            indent = "      " if region is not None else "    "
            lines.append(indent + equation(node, names))
        outs = ", ".join(operand_text(node, names) for node in self.outputs)
        lines.append(f"  in ({outs}) }}")
        return "\n".join(lines)

    def _printing_order(self) -> list[Node]:
        """Nodes in an order that keeps each kernel's nodes together (as they run):
        a topological order of kernels and unfused nodes, earliest first."""
        units: dict[Any, list[Node]] = {}
        for node in self.nodes:
            units.setdefault(("kernel", self.region_of[node]) if node in self.region_of
                             else ("node", id(node)), []).append(node)
        unit_of = {node: key for key, members in units.items() for node in members}
        first = {key: self.nodes.index(members[0]) for key, members in units.items()}
        waiting = {key: {unit_of[source] for node in members for source in node.inputs}
                   - {key} for key, members in units.items()}
        users: dict[Any, list[Any]] = {key: [] for key in units}
        for key, needs in waiting.items():
            for need in needs:
                users[need].append(key)
        ready = [(first[key], index, key) for index, key in enumerate(units) if not waiting[key]]
        heapq.heapify(ready)
        order: list[Node] = []
        while ready:
            _position, index, key = heapq.heappop(ready)
            order.extend(units[key])
            for user in users[key]:
                waiting[user].discard(key)
                if not waiting[user]:
                    heapq.heappush(ready, (first[user], len(order) + index, user))
        return order if len(order) == len(self.nodes) else list(self.nodes)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def verify(graph: Graph) -> None:
    """Check the IR's structural invariants; raise ``AssertionError`` on the first breach.

    Every node's inputs come before it and its payload is its kind's; argument nodes are
    the graph's inputs, at their own position, and have no inputs, nor do constants;
    every elementwise node has one loop dtype per input and a shape that is the broadcast
    of its inputs' shapes; only operations (elementwise and numpy nodes) carry an
    ``ErrState``.
    """
    position = {node: index for index, node in enumerate(graph.nodes)}
    for node in graph.nodes:
        for source in node.inputs:
            assert position[source] < position[node], f"{node} is before its input {source}"
        assert isinstance(node.kind, NodeKind), f"{node}: kind {node.kind!r} is not a NodeKind"
        assert isinstance(node.payload, PAYLOADS[node.kind]), (
            f"{node}: a {node.kind} node carries {node.payload!r}, "
            f"not a {PAYLOADS[node.kind].__name__}")
        if node.kind in (INPUT, CONST):
            assert not node.inputs, f"{node}: a {node.kind} node has inputs"
        if node.kind == INPUT:
            assert node in graph.inputs, f"{node} is an argument the graph does not list"
            assert graph.inputs[node.index] is node, f"{node} is not argument {node.index}"
        if node.kind == ELEMENTWISE:
            assert len(node.loop) == len(node.inputs), (
                f"{node}: {len(node.loop)} loop dtypes for {len(node.inputs)} inputs")
            expected = broadcast_shapes(*(source.shape for source in node.inputs))
            assert node.shape == expected, f"{node}: shape {node.shape} != {expected}"
        assert isinstance(node.dtype, np.dtype), f"{node} has no dtype"
        if node.errstate is not None:
            assert isinstance(node.errstate, ErrState), (
                f"{node}: errstate {node.errstate!r} is not an ErrState")
            assert node.kind in (ELEMENTWISE, NUMPY), (
                f"{node}: a {node.kind} node raises no floating-point errors to handle")
            assert all(category in ERROR_CATEGORIES for category, _mode in
                       node.errstate.modes), f"{node}: unknown category in {node.errstate}"
    for output in graph.outputs:
        assert output in position, f"output {output} is not in the graph"
