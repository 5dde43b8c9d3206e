"""Partitioning: group elementwise nodes into convex, multi-output fusion regions.

Invariants of the returned ``Plan`` (checked by ``check_plan`` and by the tests):

* every elementwise node belongs to exactly one region, and all nodes of a region have the
  same loop shape (the same number of dimensions and the same length-1 dimensions);
* a region may also hold reductions of its members (``epilogue``): each reduces axes that
  include the core axis, and no member of the region reads it (it is complete only after
  the loop); or reductions over leading axes only (``accumulation``), all over the same
  axes (``Region.reduced``), which members may read in a later pass (``schedule``);
  never both kinds;
* every region is **convex**: no dependency path leaves the region and comes back, so the
  graph of regions is acyclic and ``Plan.regions`` is a valid execution order;
* a region's outputs are its members used outside it or returned, in topological order;
  every other member stays a scalar inside the kernel's loop and is never materialised;
* a region has at most ``MAX_OPERANDS`` inputs plus outputs (numpy's gufunc limit);
* all nodes of a region (prelude included) have the same floating-point error handling
  (``Node.errstate``): a kernel's flags are read once, after its loop, and handled under
  one ``np.errstate``, so work the function put under another stays out of the kernel;
* all nodes of a region have equal sizes at run time, not only equal patterns: producers
  and consumers of one pattern broadcast to the same size, and siblings are fused only
  across a shared value of their full shape;
* every value that crosses between a region and another step (a region or a numpy call)
  has a ``Refusal`` in that region's ``refusals``: the merge the partitioner considered
  there and why it said no.  ``Plan.refusals`` keeps every refusal made on the way, also
  those that later merges made moot.

Algorithm.  Nodes are visited in topological order.  Each node starts as its own cluster;
an elementwise node then absorbs the clusters of its elementwise producers that share its
loop shape, one at a time, keeping each merge only if the merged cluster stays convex.
Clusters are identified by union-find.  Each cluster carries a bitset (a Python int over
node positions) of everything it depends on *in the contracted graph*, so "does cluster E
depend on cluster R" is one AND.  A merge makes every cluster that depended on one part
depend on the whole merged cluster and its ancestors; that update is pushed forward along
consumer edges and stops where nothing changes, so a merge costs work proportional to the
clusters it really affects, not to the graph.  A second sweep fuses sibling regions that
read a common value (horizontal fusion), under the same convexity test.  Finally regions
over the operand cap are split into topological prefix and suffix, which keeps both parts
convex.  Each test above that says no records a ``Refusal`` (``_Clusters.refuse``), a
small record appended to a list: next to nothing beside the test itself.
"""

from __future__ import annotations

import dataclasses
import enum
import heapq
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from .calls import is_elementwise_call
from .dtypes import overflows_in_cast
from .graph import (
    CONST,
    ELEMENTWISE,
    INPUT,
    NUMPY,
    ErrState,
    Graph,
    Node,
    errstate_text,
    toposort,
)
from .ops import OPS
from .reductions import Reduction, fusible_dtype

MAX_OPERANDS = 64


class Reason(enum.Enum):
    """Why the partitioner did not merge two parts of the graph into one kernel."""

    NOT_ELEMENTWISE = "not elementwise"  # one part is a numpy call
    NOT_CONVEX = "not convex"  # a path leaves the merged part and comes back
    REDUCTION_IN_LOOP = "reduction read inside its own loop"
    LOOP_SHAPE = "different loop shape"
    NOT_RECOMPUTED = "recomputation not worth it"  # smaller work kept out of a larger loop
    SIZE_CLASS = "different size class"  # a size that depends on the data
    NOT_IN_PRELUDE = "scalar work kept out of a prelude"  # it is returned, or read by numpy
    SIBLING_SIZE = "siblings of a smaller shared value"  # their sizes may differ
    OPERAND_CAP = "operand cap"  # a region split under numpy's limit on gufunc operands
    ERRSTATE = "different floating-point error handling"  # np.errstate inside the function
    REDUCED_AXES = "reductions over other axes"  # one loop cannot accumulate both
    PASSES = "passes over the rows"  # too many, or too much work repeated in them
    ROW_LENGTHS = "rows of lengths not known equal"  # accumulated across rows that may differ


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    """A merge the partitioner considered and refused, and why.

    ``first`` and ``second`` are nodes of the two parts.  For a vertical merge ``second``
    reads ``first``: it would have absorbed the part computing ``first``.  For siblings
    (horizontal fusion) ``shared`` is set: both parts read the part computing it.  A region
    split under the operand cap records each value crossing between its halves, or, when
    none does, one node of each half.

    ``via`` is the node behind the reason: a node of the step that a path leaves through
    and comes back from (``NOT_CONVEX``), the reduction read inside its own loop, the numpy
    call, the node that starts a data-dependent size class, the other reader or returned
    value or reduction that keeps work from being recomputed.  ``detail`` says the rest in
    words, never naming nodes (``explain()`` names them).
    """

    first: Node
    second: Node
    reason: Reason
    detail: str = ""
    via: Node | None = None
    shared: Node | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class Region:
    """One fused kernel: members in topological order, external inputs and outputs.

    ``prelude`` holds 0-d (scalar) nodes computed once before the kernel's loop: scalar
    work that only feeds kernels is folded into each of them instead of running as a
    kernel of its own (``_inline_scalar_regions``).

    ``refusals`` are the refused merges between a member (or prelude node) and a node of
    another step: why the region ends where it does.
    """

    index: int
    nodes: tuple[Node, ...]
    inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]
    prelude: tuple[Node, ...] = ()  # 0-d work done once before the loop
    # (output position, input position): the kernel writes that output into that input's
    # buffer, a temporary of an earlier kernel read by nothing else (see ``_donations``).
    donate: tuple[tuple[int, int], ...] = ()
    refusals: tuple[Refusal, ...] = ()
    # The axes (of its loop) the region's accumulations reduce: its kernel runs passes over
    # them (see ``schedule``); () for a kernel of one pass.
    reduced: tuple[int, ...] = ()

    @cached_property
    def ones(self) -> tuple[bool, ...]:
        """The loop shape (True for each length-1 axis): that of its widest member; a
        member recomputed from smaller operands (``recompute``) broadcasts into it."""
        return loop_of(self.nodes)

    @property
    def errstate(self) -> ErrState | None:
        """The floating-point error handling of all its nodes (None: the caller's)."""
        return self.nodes[0].errstate

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without ``refusals`` (unpickled, the region has none): they name nodes
        all over the graph, and a pickled region (a kernel sent to another process)
        carries only its own nodes and inputs."""
        state = dict(self.__dict__)
        del state["refusals"]
        return state


@dataclasses.dataclass(frozen=True, eq=False)
class Plan:
    """The partitioned graph: ``steps`` in a valid execution order, each a fused
    ``Region`` or a non-fusible node (a numpy call); ``regions`` are the fused steps.
    ``refusals`` are all the merges the partitioner refused, in the order it refused them
    (each region keeps those that still separate it from another step)."""

    graph: Graph
    regions: tuple[Region, ...]
    steps: tuple[Region | Node, ...] = ()
    refusals: tuple[Refusal, ...] = ()


def epilogue(node: Node) -> Reduction | None:
    """The reduction ``node`` performs if a region can compute it in its loop: the reduced
    axes include the input's core (last non-unit) axis, so each kernel row folds into one
    partial result.  The input is computed by the region, or is an argument (or constant
    array) that the region reads anyway — see ``_lone_reductions``."""
    reduction: Reduction | None = node.reduction if node.kind == NUMPY else None
    if reduction is None or _why_not_an_epilogue(node, reduction) is not None:
        return None
    return reduction


def _why_no_kernel_reduces(node: Node, reduction: Reduction) -> str | None:
    """Why no kernel can compute the reduction ``node`` at all, in its loop or across its
    rows (None if the axes decide)."""
    if not fusible_dtype(reduction):
        return "numpy orders complex numbers for maximum and minimum by its own rules"
    source = node.inputs[0]
    if source.kind not in (ELEMENTWISE, INPUT, CONST) or source.ndim == 0:
        return "its input is not a value a kernel loops over"
    return None


def _why_not_an_epilogue(node: Node, reduction: Reduction) -> str | None:
    """Why no kernel can compute the reduction ``node`` in its loop (None if one can)."""
    why = _why_no_kernel_reduces(node, reduction)
    if why is not None:
        return why
    kept = [axis for axis, one in enumerate(node.inputs[0].ones) if not one]
    if kept and kept[-1] not in reduction.axes:
        return _NOT_THE_LAST_AXIS
    if reduction.ufunc == "multiply" and reduction.dtype.kind == "c":
        # numpy's reduce loop rounds each complex product apart, where its (and a
        # kernel's) elementwise loop may fuse the multiply-adds
        return "numpy multiplies complex numbers along an axis with its own rounding"
    return None


_NOT_THE_LAST_AXIS = "it does not reduce the last axis of its input, the one a kernel loops along"


def accumulation(node: Node) -> Reduction | None:
    """The reduction ``node`` performs if a region can accumulate it across its rows: the
    reduced axes leave out the input's core axis and are next to each other among its
    non-unit axes (``x.sum(axis=0)`` of a matrix).  The kernel keeps one accumulator per
    column and adds each row into it in order, as numpy does along a non-contiguous axis;
    the region's other work may read the result in a later pass (see ``schedule``)."""
    reduction: Reduction | None = node.reduction if node.kind == NUMPY else None
    if reduction is None or _why_not_an_accumulation(node, reduction) is not None:
        return None
    return reduction


def _why_not_an_accumulation(node: Node, reduction: Reduction) -> str | None:
    """Why no kernel can accumulate the reduction ``node`` across its rows (None if one
    can)."""
    why = _why_no_kernel_reduces(node, reduction)
    if why is not None:
        return why
    source = node.inputs[0]
    kept = [axis for axis, one in enumerate(source.ones) if not one]
    reduced = [axis for axis in kept if axis in reduction.axes]
    if not kept or kept[-1] in reduction.axes:
        return "it reduces the last axis of its input"
    if not reduced:
        return "it reduces only length-1 axes"
    first = kept.index(reduced[0])
    if kept[first:first + len(reduced)] != reduced:
        return "the axes it reduces are not next to each other"
    return None


def reduced_axes(node: Node) -> tuple[int, ...]:
    """The non-unit axes (of its input, and so of the loop) an accumulation reduces."""
    reduction = node.reduction
    assert reduction is not None
    return tuple(axis for axis, one in enumerate(node.inputs[0].ones)
                 if not one and axis in reduction.axes)


def in_line(node: Node) -> bool:
    """Whether the result of the accumulation ``node`` lines up with its loop's axes as
    numpy broadcasts it: with keepdims, or when every reduced axis comes before every
    non-unit axis it keeps (``x.sum(axis=0)``).  Otherwise (``x.sum(axis=1)`` of a 3-d
    array) it broadcasts against other axes, so no work of its own region may read it."""
    reduction = node.reduction
    assert reduction is not None
    if reduction.keepdims:
        return True
    shape = node.inputs[0].shape
    last = max(reduction.axes)
    return all(size == 1 for axis, size in enumerate(shape)
               if axis < last and axis not in reduction.axes)


def _numpy_call_reason(node: Node, fuse_reductions: bool) -> str:
    """Why ``node``, a non-elementwise node, runs in numpy rather than in a kernel."""
    if is_elementwise_call(node):
        return ("it involves float16, which no kernel computes with (numba has no CPU "
                "float16)")
    reduction: Reduction | None = node.reduction
    if reduction is None:
        return "it is not elementwise"
    if not fuse_reductions:
        return "reductions are left to numpy (fuse_reductions=False)"
    along_rows = _why_not_an_epilogue(node, reduction)
    across_rows = _why_not_an_accumulation(node, reduction)
    if along_rows is None or across_rows is None:
        return "it could not join the loop of its input"
    return across_rows if along_rows == _NOT_THE_LAST_AXIS else along_rows


def loop_of(nodes: Sequence[Node]) -> tuple[bool, ...]:
    """The widest loop shape of ``nodes``' elementwise values and reduced inputs (most
    axes, fewest length-1)."""
    looped = [node if node.kind == ELEMENTWISE else node.inputs[0] for node in nodes]
    return max(looped, key=lambda node: (node.ndim, -sum(node.ones))).ones


# Work per element (in simple arithmetic operations) below which a value of a smaller
# loop shape is recomputed inside the larger loop that reads it, instead of running as a
# kernel of its own and being read back: an extra kernel call and a temporary cost more
# than a few operations per element, a transcendental function repeated for every row
# costs more than computing it once.
RECOMPUTE_MAX_COST = 3


def op_cost(node: Node) -> int:
    """A node's work per element: its op row's cost; 1 for what is not an op row."""
    op = OPS.get(node.op)
    return op.cost if op is not None else 1


# Passes over the rows a region that accumulates reductions may make: each reads its
# operands again, so a longer chain of accumulations is split into kernels that store.
MAX_PASSES = 4


@dataclasses.dataclass(frozen=True)
class Schedule:
    """How a region that accumulates reductions across its rows runs (``schedule``).

    Its kernel takes the loop's ``reduced`` axes as rows and the core axis as columns and,
    for each block of columns, makes ``passes`` passes over the rows.  An accumulation
    adds its input into one accumulator per column in pass ``accumulating[node]``; it is
    complete after that pass.  Values constant along the rows (accumulation results,
    work on them, and work on operands constant along the rows) are ``columns``: computed
    once per column in the column step with that number (step ``k`` runs before pass
    ``k``; step ``passes`` after the last one).  Every other member is in ``rows``: it is
    computed per element in each pass of ``computed[node]`` (recomputed rather than stored
    when several passes need it) and, when the region outputs it, stored in pass
    ``stored[node]``.
    """

    reduced: tuple[int, ...]
    passes: int
    rows: frozenset[Node]
    columns: dict[Node, int]
    accumulating: dict[Node, int]
    computed: dict[Node, tuple[int, ...]]
    stored: dict[Node, int]


# Why a set of nodes cannot run as one region: the reason, the details in words, and the
# node behind it (or None), as a ``Refusal`` takes them.
Problem = tuple[Reason, str, "Node | None"]


def varies(node: Node, axes: Sequence[int], ndim: int) -> bool | None:
    """Whether ``node`` (broadcast into a loop of ``ndim`` axes) varies along the loop's
    ``axes``: True along all of them, False along none, None along some only."""
    offset = ndim - node.ndim
    flags = [axis >= offset and node.shape[axis - offset] != 1 for axis in axes]
    return True if all(flags) else False if not any(flags) else None


def _schedule(members: Sequence[Node], reduced: tuple[int, ...], loop: tuple[bool, ...],
              outputs: set[Node]) -> Schedule | Problem:
    """The ``Schedule`` of a region of ``members`` (in topological order) accumulating
    over ``reduced`` in a loop of shape ``loop``; ``outputs`` are the members it stores.
    Or why there is none: a value that varies along some of the reduced axes only, an
    output that is constant along another non-unit axis of the loop, more than
    ``MAX_PASSES`` passes, or work recomputed in later passes costing more than
    ``RECOMPUTE_MAX_COST`` per element."""
    ndim = len(loop)
    # outputs vary along every kept axis the rows do not (the loop's shape, or that shape
    # with length-1 reduced axes)
    spanned = [axis for axis, one in enumerate(loop) if not one and axis not in reduced]
    level: dict[Node, int] = {}  # the first pass (or column step) that can compute a node
    accumulating: dict[Node, int] = {}
    columns: dict[Node, int] = {}
    rows: set[Node] = set()
    for node in members:
        if node.kind != ELEMENTWISE:
            accumulating[node] = level.get(node.inputs[0], 0)
            level[node] = columns[node] = accumulating[node] + 1
            continue
        for source in (node, *node.inputs):
            if is_kernel_input(source) and varies(source, reduced, ndim) is None:
                return Reason.LOOP_SHAPE, ("a value varies along some of the reduced axes only, "
                                           "so it has no place in a loop over their rows"), source
        level[node] = max((level.get(source, 0) for source in node.inputs), default=0)
        if varies(node, reduced, ndim):
            rows.add(node)
        else:
            columns[node] = level[node]
        if node in outputs and not varies(node, spanned, ndim):
            return Reason.LOOP_SHAPE, ("a value it would store is constant along an axis "
                                       "of the kernel's columns or outer loop"), node
    users: dict[Node, list[Node]] = {node: [] for node in members}
    for node in members:
        for source in node.inputs:
            if source in users:
                users[source].append(node)
    computed: dict[Node, tuple[int, ...]] = {}
    stored: dict[Node, int] = {}
    extra, costliest, most = 0, None, 0
    for node in reversed(members):
        if node not in rows:
            continue
        passes: set[int] = set()
        for user in users[node]:
            if user in accumulating:
                passes.add(accumulating[user])
            elif user in rows:
                passes.update(computed[user])
        if node in outputs:
            stored[node] = min(passes, default=level[node])
            passes.add(stored[node])
        computed[node] = tuple(sorted(passes))
        again = op_cost(node) * (len(passes) - 1)
        extra += again
        if again > most:
            costliest, most = node, again
    count = 1 + max([*accumulating.values(),
                     *(max(done, default=0) for done in computed.values())])
    if count > MAX_PASSES:
        return Reason.PASSES, (f"{count} passes over the rows, more than the {MAX_PASSES} "
                               "one kernel makes"), None
    if extra > RECOMPUTE_MAX_COST:
        return Reason.PASSES, (f"{extra} more operations per element, more than the "
                               f"{RECOMPUTE_MAX_COST} worth repeating"), costliest
    return Schedule(reduced, count, frozenset(rows), columns, accumulating, computed, stored)


def schedule(region: Region) -> Schedule:
    """The passes of a region that accumulates reductions (``region.reduced``)."""
    found = _schedule(region.nodes, region.reduced, region.ones, set(region.outputs))
    assert isinstance(found, Schedule), f"region {region.index}: {found}"
    return found


def _broadcasts_into(small: tuple[bool, ...], large: tuple[bool, ...]) -> bool:
    """A strictly smaller loop shape that numpy broadcasting stretches to ``large``."""
    if small == large or len(small) > len(large) or all(small):
        return False  # all-unit (0-d) work runs once, in a kernel's prelude
    offset = len(large) - len(small)
    return all(one or not large[axis + offset] for axis, one in enumerate(small))


def is_kernel_input(node: Node) -> bool:
    """0-d constants are written into the kernel source; everything else is an operand."""
    return not (node.kind == CONST and node.ndim == 0)


ARGUMENT_SIZES = "arguments"


def size_classes(nodes: Sequence[Node]) -> dict[Node, object]:
    """Where each node's free sizes come from (None when it has none).

    Free sizes of arguments, and of numpy calls on them, are never 1, so two values of one
    shape pattern that meet in a broadcast have equal sizes: ``"arguments"``.  A size that
    depends on the values (``x[mask]``, a numpy node with ``moving`` axes) can be anything,
    1 included, so its values form a class of their own (that node), and an elementwise
    node broadcasting values of different classes starts another (itself): two values of
    different classes may share a shape pattern and differ in size at run time, so they
    never share a loop.  ``nodes`` are in topological order.
    """
    found: dict[Node, object] = {}
    for node in nodes:
        if None not in node.shape:
            found[node] = None
        elif node.kind == NUMPY and node.moving:
            found[node] = node
        elif node.kind != ELEMENTWISE and not is_elementwise_call(node):  # float16 work
            found[node] = ARGUMENT_SIZES
        else:
            sources = {found.get(source, ARGUMENT_SIZES) for source in node.inputs
                       if None in source.shape}
            found[node] = sources.pop() if len(sources) == 1 else node
    return found


class Lengths:
    """Which values' axes have equal lengths whatever the arguments' sizes: numpy's
    broadcast makes an elementwise operation's operands as long as its result along each
    axis where both are longer than one (or it raises); any other node's lengths are its
    own.  Axes count from the last (1), as broadcasting aligns them."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.parent: dict[tuple[Node, int], tuple[Node, int]] = {}
        for node in nodes:
            if node.kind != ELEMENTWISE and not is_elementwise_call(node):
                continue
            for axis in range(1, node.ndim + 1):
                if node.shape[-axis] == 1:
                    continue
                for source in node.inputs:
                    if source.ndim >= axis and source.shape[-axis] != 1:
                        self._union((node, axis), (source, axis))

    def _find(self, key: tuple[Node, int]) -> tuple[Node, int]:
        root = key
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while self.parent.get(key, key) != root:
            self.parent[key], key = root, self.parent[key]
        return root

    def _union(self, one: tuple[Node, int], other: tuple[Node, int]) -> None:
        first, second = self._find(one), self._find(other)
        if first != second:
            self.parent[second] = first

    def equal(self, one: Node, other: Node, axis: int) -> bool:
        """Whether ``one`` and ``other`` are as long along ``axis`` (from the last)."""
        known = one.shape[-axis], other.shape[-axis]
        if None not in known:
            return known[0] == known[1]
        return self._find((one, axis)) == self._find((other, axis))


def _same_class(first: object, second: object) -> bool:
    return first is None or second is None or first is second


class _Clusters:
    """Union-find over node positions with contracted-graph ancestor bitsets, and the
    merges refused so far (``refusals``)."""

    def __init__(self, nodes: Sequence[Node], graph: Graph, fuse_reductions: bool) -> None:
        self.nodes = nodes
        self.fuse_reductions = fuse_reductions
        self.refusals: list[Refusal] = []
        self.position = {node: index for index, node in enumerate(nodes)}
        size = len(nodes)
        self.parent = list(range(size))
        self.members = [1 << index for index in range(size)]
        self.ancestors = [0] * size
        self.producers: list[set[int]] = [set() for _ in range(size)]
        self.consumers: list[set[int]] = [set() for _ in range(size)]
        self.fusible = [node.kind == ELEMENTWISE for node in nodes]
        self.loop = [node.ones for node in nodes]  # each cluster's loop shape
        classes = self.classes = size_classes(nodes)
        self._lengths: Lengths | None = None  # made when first asked (``_rows_apart``)
        self.size_class = [classes[node] for node in nodes]  # where its free sizes come from
        self.cost = [op_cost(node) for node in nodes]  # each cluster's work per element
        self.errstate = [node.errstate for node in nodes]  # shared by a cluster's members
        self.returned = set(graph.outputs)
        self.graph = graph
        # Users of a cluster's fused reductions: a reduction folded along the rows is
        # complete only after the loop, so none of them may join its cluster; nor may
        # users of an accumulation whose result does not line up with the loop.
        self.after_loop = [0] * size
        self.epilogues = [fuse_reductions and epilogue(node) is not None for node in nodes]
        # Whether a cluster folds reductions along its rows (``epilogue``); the axes its
        # accumulations reduce across its rows (``accumulation``), or None.  One cluster
        # never does both.
        self.folding = list(self.epilogues)
        self.reduced: list[tuple[int, ...] | None] = [
            reduced_axes(node) if fuse_reductions and accumulation(node) is not None else None
            for node in nodes]
        for index, node in enumerate(nodes):
            fused = self.epilogues[index] or self.reduced[index] is not None
            if fused and node.inputs[0].kind != ELEMENTWISE:
                # a reduction of an argument: a loop of its own, merged with other work
                # reading the argument by the horizontal sweep
                self.fusible[index] = True
                self.loop[index] = node.inputs[0].ones
                self.size_class[index] = classes.get(node.inputs[0], ARGUMENT_SIZES)
            if self.epilogues[index] or (self.reduced[index] is not None and not in_line(node)):
                for user in graph.consumers.get(node, ()):
                    self.after_loop[index] |= 1 << self.position[user]

    def find(self, cluster: int) -> int:
        root = cluster
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[cluster] != root:
            self.parent[cluster], cluster = root, self.parent[cluster]
        return root

    def add(self, index: int) -> None:
        node = self.nodes[index]
        for source in node.inputs:
            if not is_kernel_input(source):
                continue  # written into the kernel's source: no dependency to track
            producer = self.find(self.position[source])
            self.producers[index].add(producer)
            self.consumers[producer].add(index)
            self.ancestors[index] |= self.ancestors[producer] | self.members[producer]

    def external_producers(self, clusters: set[int]) -> set[int]:
        return self.roots(p for cluster in clusters for p in self.producers[cluster]) - clusters

    def joins_convex(self, index: int, clusters: set[int]) -> bool:
        """``is_convex(clusters | {index})`` for ``index`` just added (a node no cluster
        consumes yet) and clusters (each convex): a path leaving them and coming back
        enters ``index`` through one of its producers, or one of the clusters through a
        value that depends on another of them, which only a cluster depending on another
        can have (then every producer is looked at, as ``is_convex`` does).  A chain of
        thousands of steps (``s += x[i] * 2``) is merged without walking its cluster's
        producers at each step."""
        group = clusters | {index}
        members = self._loop_members(group)
        if members is None:
            return False
        if any(self.ancestors[producer] & members
               for producer in self.roots(self.producers[index]) - group):
            return False
        if any(self.ancestors[cluster] & (members & ~self.members[cluster])
               for cluster in clusters):
            return self.is_convex(group)
        return True

    def is_convex(self, clusters: set[int]) -> bool:
        """True if merging ``clusters`` creates no path that leaves and re-enters them."""
        members = self._loop_members(clusters)
        return members is not None and all(
            not self.ancestors[p] & members for p in self.external_producers(clusters))

    def _loop_members(self, clusters: set[int]) -> int | None:
        """The members of ``clusters`` joined, or None when one of them must run after
        another's loop (a user of a reduction folded along its rows)."""
        members = after_loop = 0
        for cluster in clusters:
            members |= self.members[cluster]
            after_loop |= self.after_loop[cluster]
        return None if after_loop & members else members

    def conflict(self, clusters: set[int]) -> Problem | None:
        """Why ``clusters`` cannot run as one kernel although they are convex (None when
        they can): one folds reductions along its rows and another accumulates across
        them, or they accumulate over different axes, or the passes over the rows would
        be too many or recompute too much (``_schedule``)."""
        reduced = {self.reduced[cluster] for cluster in clusters} - {None}
        if not reduced:
            return None
        if len(reduced) > 1:
            return Reason.REDUCED_AXES, ("they accumulate reductions over different axes, "
                                         "and one kernel's rows run along one set of "
                                         "axes"), None
        if any(self.folding[cluster] for cluster in clusters):
            return Reason.REDUCED_AXES, ("one folds reductions along its rows, the other "
                                         "accumulates reductions across them"), None
        members = 0
        for cluster in clusters:
            members |= self.members[cluster]
        nodes = []
        while members:
            low = members & -members
            nodes.append(self.nodes[low.bit_length() - 1])
            members ^= low
        inside = set(nodes)
        returned, consumers = self.returned, self.graph.consumers
        outputs = {node for node in nodes
                   if node in returned or not inside.issuperset(consumers[node])}
        sources = {source for node in nodes for source in node.inputs
                   if source not in inside and is_kernel_input(source)}
        if len(sources) + len(outputs) > MAX_OPERANDS:
            return Reason.OPERAND_CAP, (f"{len(sources) + len(outputs)} operands, over "
                                        f"numpy's limit of {MAX_OPERANDS} per gufunc"), None
        axes: tuple[int, ...] = reduced.pop()  # type: ignore[assignment]
        loop = max((self.loop[cluster] for cluster in clusters),
                   key=lambda ones: (len(ones), -sum(ones)))
        lower = next((node for node in nodes if accumulation(node) is not None
                      and node.inputs[0].ndim != len(loop)), None)
        if lower is not None:
            # its axes are counted in its input's dimensions, which broadcast against the
            # loop's last ones: b.mean(axis=0) of a matrix reduces the second axis of a
            # loop over a stack of matrices
            return Reason.REDUCED_AXES, ("one accumulates over an axis of a value of fewer "
                                         "dimensions than the loop, another axis of the "
                                         "loop"), lower
        rows = self._rows_apart(nodes, sources, axes, len(loop))
        if rows is not None:
            return Reason.ROW_LENGTHS, ("one kernel's passes run over one set of rows, and "
                                        "these may differ in length at run time"), rows
        found = _schedule(nodes, axes, loop, outputs)
        return None if isinstance(found, Schedule) else found

    def _rows_apart(self, nodes: Sequence[Node], sources: set[Node], axes: tuple[int, ...],
                    ndim: int) -> Node | None:
        """A value of a region accumulating across the rows ``axes`` (of a loop of
        ``ndim`` axes) not known to be as long along them as the region's others (see
        ``Lengths``): ``x[1:] - x.mean(axis=0)`` subtracts from fewer rows than the mean
        adds up.  None when every value varying along them is."""
        # the values of the rows: the members' own but the fused reductions' (computed
        # from the rows, not on them), and the values the members read
        if self._lengths is None:
            self._lengths = Lengths(self.nodes)
        values = [node for node in nodes if node.kind != NUMPY] + list(sources)
        for axis in axes:
            along = [node for node in values if varies(node, (axis,), ndim) is True]
            for node in along[1:]:
                if not self._lengths.equal(along[0], node, ndim - axis):
                    return node
        return None

    def refuse(self, first: Node, second: Node, reason: Reason, detail: str = "",
               via: Node | None = None, shared: Node | None = None) -> None:
        self.refusals.append(Refusal(first, second, reason, detail, via, shared))

    def refuse_not_convex(self, first: Node, second: Node, clusters: set[int],
                          shared: Node | None = None) -> None:
        """Record why ``is_convex(clusters)`` said no: a member reads a reduction that the
        merged loop would compute (``REDUCTION_IN_LOOP``, via that reduction), or an
        outside cluster both reads the merged part and feeds it (``NOT_CONVEX``, via that
        cluster's first node)."""
        members = after_loop = 0
        for cluster in clusters:
            members |= self.members[cluster]
            after_loop |= self.after_loop[cluster]
        early = after_loop & members
        if early:
            reader = self.nodes[(early & -early).bit_length() - 1]
            # a reduction folded along the rows, or an accumulation not in line with them
            index = self.position[reader]
            reduction = next(source for source in reader.inputs if source in self.position
                             and members >> self.position[source] & 1
                             and self.after_loop[self.position[source]] >> index & 1)
            self.refuse(first, second, Reason.REDUCTION_IN_LOOP, via=reduction, shared=shared)
            return
        outside = next(p for p in self.external_producers(clusters)
                       if self.ancestors[p] & members)
        self.refuse(first, second, Reason.NOT_CONVEX, via=self.nodes[outside], shared=shared)

    def same_errstate(self, first: Node, second: Node, one: int, other: int,
                      shared: Node | None = None) -> bool:
        """Whether clusters ``one`` and ``other`` have the same floating-point error
        handling; if not, record it (``ERRSTATE``)."""
        if self.errstate[one] == self.errstate[other]:
            return True
        self.refuse(first, second, Reason.ERRSTATE, _errstates_text(
            self.errstate[one], self.errstate[other]), shared=shared)
        return False

    def refuse_numpy_call(self, first: Node, second: Node, call: Node) -> None:
        """``call`` (``first`` or ``second``) is a numpy call: it joins no kernel."""
        self.refuse(first, second, Reason.NOT_ELEMENTWISE,
                    _numpy_call_reason(call, self.fuse_reductions), via=call)

    def roots(self, clusters: Iterable[int]) -> set[int]:
        """``{find(cluster) for cluster in clusters}``, without a call per cluster when
        the parent is a root (the common case after path compression)."""
        parent = self.parent
        found = set()
        for cluster in clusters:
            up = parent[cluster]
            found.add(up if parent[up] == up else self.find(cluster))
        return found

    def merge(self, clusters: set[int]) -> int:
        root = min(clusters)
        members = 0
        for cluster in clusters:
            members |= self.members[cluster]
        # What the merged cluster depends on: what its parts depend on, but themselves
        # (as the parts' ancestors hold a member of each producer, so does this).  The
        # parts' producer sets are joined into the largest (ids in it may be clusters
        # merged since, or members of this one: ``external_producers`` sorts them out): a
        # chain of thousands of steps (``s += x[i]``) merged in time linear in its length.
        ancestors = 0
        for cluster in clusters:
            ancestors |= self.ancestors[cluster]
        ancestors &= ~members
        widest = max(clusters, key=lambda cluster: len(self.producers[cluster]))
        producers = self.producers[widest]
        for cluster in clusters:
            if cluster != widest:
                producers |= self.producers[cluster]
        # Consumers of a part that already depended on all the merged cluster depends on
        # gain nothing: only the others are updated (see _propagate).
        updated = [consumer for cluster in clusters
                   if ancestors & ~(self.ancestors[cluster] | self.members[cluster])
                   for consumer in self.consumers[cluster]]
        # The parts' consumer sets, joined into the largest: ids in it may be clusters
        # merged since (find() gives their root) or, later, members of this one.
        largest = max(clusters, key=lambda cluster: len(self.consumers[cluster]))
        consumers = self.consumers[largest]
        for cluster in clusters:
            if cluster != largest:
                consumers |= self.consumers[cluster]
        consumers -= clusters
        after_loop = 0
        self.folding[root] = any(self.folding[cluster] for cluster in clusters)
        self.reduced[root] = next((self.reduced[cluster] for cluster in clusters
                                   if self.reduced[cluster] is not None), None)
        loop = max((self.loop[cluster] for cluster in clusters),
                   key=lambda ones: (len(ones), -sum(ones)))
        size_class = next((self.size_class[cluster] for cluster in clusters
                           if self.size_class[cluster] is not None), None)
        cost = sum(self.cost[cluster] for cluster in clusters)
        for cluster in clusters:
            self.parent[cluster] = root
            after_loop |= self.after_loop[cluster]
        self.after_loop[root] = after_loop
        self.loop[root] = loop
        self.size_class[root] = size_class
        self.cost[root] = cost
        self.members[root] = members
        self.ancestors[root] = ancestors
        self.producers[root] = producers
        self.consumers[root] = consumers
        if updated:
            self._propagate(self.roots(updated) - {root}, ancestors)
        return root

    def _propagate(self, start: set[int], gained: int) -> None:
        """Every cluster downstream of a merge now depends on everything the merged
        cluster depends on.

        Its members need not be added: a cluster downstream of it already holds a member
        of one of its parts (``add`` gives a cluster its producers' members), and the
        tests read ancestors only against whole clusters (``ancestors & members``), so one
        member stands for the merged cluster.  Adding them would send every merge down
        the whole cone of the cluster's consumers."""
        stack = list(start)
        while stack:
            cluster = self.find(stack.pop())
            if self.ancestors[cluster] & gained == gained:
                continue
            self.ancestors[cluster] |= gained
            stack.extend(self.consumers[cluster])


def _is_step(node: Node) -> bool:
    """Computed by a kernel or a numpy call (arguments and constants are not steps)."""
    return node.kind not in (INPUT, CONST)


def _fuse_vertically(clusters: _Clusters) -> None:
    """Merge each elementwise node with the clusters of its producers, and each fusible
    reduction with its input's; every producer left apart gets a refusal."""
    nodes = clusters.nodes
    for index, node in enumerate(nodes):
        clusters.add(index)
        if clusters.epilogues[index] or clusters.reduced[index] is not None:
            source = node.inputs[0]
            if source.kind == ELEMENTWISE:
                producer = clusters.find(clusters.position[source])
                if not clusters.same_errstate(source, node, producer, index):
                    continue
                if not clusters.is_convex({index, producer}):
                    clusters.refuse_not_convex(source, node, {index, producer})
                elif (conflict := clusters.conflict({index, producer})) is not None:
                    clusters.refuse(source, node, *conflict)
                else:
                    clusters.merge({index, producer})
            continue
        if node.kind != ELEMENTWISE:
            for source in node.inputs:
                if _is_step(source):
                    clusters.refuse_numpy_call(source, node, node)
            continue
        group = {index}
        for source in node.inputs:
            candidate = clusters.find(clusters.position[source])
            if candidate in group:
                continue
            if not clusters.fusible[candidate]:
                if _is_step(source):
                    clusters.refuse_numpy_call(source, node, source)
                continue
            if not _same_class(clusters.size_class[candidate], clusters.size_class[index]):
                _refuse_size_class(clusters, source, node, candidate, index)
                continue
            if not clusters.same_errstate(source, node, candidate, index):
                continue
            if clusters.loop[candidate] != node.ones and not _column_value(
                    clusters, candidate, node) and not _recomputable(
                    clusters, candidate, source, node):
                continue
            if not clusters.joins_convex(index, (group - {index}) | {candidate}):
                clusters.refuse_not_convex(source, node, group | {candidate})
                continue
            conflict = clusters.conflict(group | {candidate})
            if conflict is not None:
                clusters.refuse(source, node, *conflict)
                continue
            group.add(candidate)
        if len(group) > 1:
            clusters.merge(group)


def _column_value(clusters: _Clusters, candidate: int, node: Node) -> bool:
    """Whether ``node``, of a smaller loop shape than the cluster ``candidate`` that
    accumulates reductions, can join it as a value computed once per column: it is
    constant along the accumulated axes and broadcasts into the cluster's loop."""
    reduced, loop = clusters.reduced[candidate], clusters.loop[candidate]
    return reduced is not None and _broadcasts_into(node.ones, loop) and \
        varies(node, reduced, len(loop)) is False


def _refuse_size_class(clusters: _Clusters, first: Node, second: Node, one: int,
                       other: int, shared: Node | None = None) -> None:
    """Clusters ``one`` and ``other`` have different size classes: record it, via the
    node that starts one of the classes (see ``size_classes``)."""
    starts = [start for start in (clusters.size_class[one], clusters.size_class[other])
              if isinstance(start, Node)]
    via = starts[0]
    detail = ("its size depends on the data" if via.kind != ELEMENTWISE else
              "it broadcasts a size that depends on the data with other sizes")
    clusters.refuse(first, second, Reason.SIZE_CLASS, detail, via, shared)


def _loop_text(ones: tuple[bool, ...]) -> str:
    """A loop shape as ``type_str`` writes shapes: ``[n,1]``."""
    return "[" + ",".join("1" if one else "n" for one in ones) + "]"


_HOLDS_A_REDUCTION = "it holds a reduction, complete only after its own loop"


def _recomputable(clusters: _Clusters, candidate: int, source: Node, node: Node) -> bool:
    """True if the smaller-shaped cluster ``candidate`` (computing ``source``) should be
    computed inside the loop of ``node`` (see ``RECOMPUTE_MAX_COST``): cheap, read by
    ``node`` alone, not returned and holding no reduction.  When it is not, the refusal
    says which of these fails."""
    loop = clusters.loop[candidate]
    if not _broadcasts_into(loop, node.ones):
        clusters.refuse(source, node, Reason.LOOP_SHAPE,
                        f"{_loop_text(loop)} vs {_loop_text(node.ones)}")
        return False
    if clusters.cost[candidate] > RECOMPUTE_MAX_COST:
        clusters.refuse(source, node, Reason.NOT_RECOMPUTED,
                        f"it costs {clusters.cost[candidate]} operations per element, more "
                        f"than the {RECOMPUTE_MAX_COST} worth repeating for every row")
        return False
    if clusters.after_loop[candidate]:
        clusters.refuse(source, node, Reason.NOT_RECOMPUTED, _HOLDS_A_REDUCTION)
        return False
    members = clusters.members[candidate]
    consumers = clusters.graph.consumers
    for position, member in enumerate(clusters.nodes):
        if not members >> position & 1:
            continue
        if member.kind != ELEMENTWISE:
            clusters.refuse(source, node, Reason.NOT_RECOMPUTED, _HOLDS_A_REDUCTION, member)
            return False
        if member in clusters.returned:
            clusters.refuse(source, node, Reason.NOT_RECOMPUTED,
                            "it is returned, so it is stored anyway", member)
            return False
        for user in consumers.get(member, ()):
            if user is not node and not members >> clusters.position[user] & 1:
                clusters.refuse(source, node, Reason.NOT_RECOMPUTED,
                                "it is also read by another node", user)
                return False
    return True


def _fuse_horizontally(clusters: _Clusters) -> None:
    """Merge sibling regions that read the same value and share a loop shape.  Each
    sibling tried against another and left apart gets a refusal; so does each sibling too
    large for the shared value, against the first such sibling of its loop shape."""
    for index, shared in enumerate(clusters.nodes):
        if clusters.find(index) != index:
            continue
        siblings = sorted(clusters.roots(clusters.consumers[index]) - {index})
        merged: list[int] = []
        unsized: dict[tuple[bool, ...], int] = {}
        for sibling in siblings:
            sibling = clusters.find(sibling)
            if not clusters.fusible[sibling]:
                continue
            if not _same_size(shared, clusters.loop[sibling]):
                _refuse_unsized(clusters, unsized, sibling, shared)
                continue
            for slot, other in enumerate(merged):
                other = clusters.find(other)
                if other == sibling:
                    break
                same_loop = clusters.loop[other] == clusters.loop[sibling] and _same_class(
                    clusters.size_class[other], clusters.size_class[sibling]) and \
                    clusters.errstate[other] == clusters.errstate[sibling]
                if same_loop and clusters.is_convex({other, sibling}) and \
                        clusters.conflict({other, sibling}) is None:
                    merged[slot] = clusters.merge({other, sibling})
                    break
                _refuse_siblings(clusters, other, sibling, shared)
            else:
                merged.append(sibling)


def _refuse_unsized(clusters: _Clusters, unsized: dict[tuple[bool, ...], int], sibling: int,
                    shared: Node) -> None:
    """``sibling`` reads ``shared`` but loops over more than its shape: record it against
    the first such sibling of the same loop shape (``unsized``), the one it could
    otherwise have joined."""
    loop = clusters.loop[sibling]
    first = unsized.setdefault(loop, sibling)
    if first != sibling:
        clusters.refuse(clusters.nodes[first], clusters.nodes[sibling], Reason.SIBLING_SIZE,
                        f"{_loop_text(shared.ones)} is smaller than their {_loop_text(loop)} "
                        "loops, so their sizes may differ at run time", shared=shared)


def _refuse_siblings(clusters: _Clusters, other: int, sibling: int, shared: Node) -> None:
    """Record why siblings ``other`` and ``sibling`` (both reading ``shared``) stay apart:
    the first of the tests in ``_fuse_horizontally`` that said no."""
    first, second = clusters.nodes[other], clusters.nodes[sibling]
    one, two = clusters.loop[other], clusters.loop[sibling]
    if one != two:
        clusters.refuse(first, second, Reason.LOOP_SHAPE,
                        f"{_loop_text(one)} vs {_loop_text(two)}", shared=shared)
    elif not _same_class(clusters.size_class[other], clusters.size_class[sibling]):
        _refuse_size_class(clusters, first, second, other, sibling, shared)
    elif clusters.same_errstate(first, second, other, sibling, shared):
        if clusters.is_convex({other, sibling}):
            reason, detail, via = clusters.conflict({other, sibling}) or (
                Reason.NOT_CONVEX, "", None)
            clusters.refuse(first, second, reason, detail, via, shared)
        else:
            clusters.refuse_not_convex(first, second, {other, sibling}, shared)


def _errstates_text(first: ErrState | None, second: ErrState | None) -> str:
    return f"{errstate_text(first)} vs {errstate_text(second)}"


def _same_size(shared: Node, loop: tuple[bool, ...]) -> bool:
    """Siblings are certain to have equal sizes only when the value they share has their
    full loop shape; two consumers of a scalar may have different sizes at run time."""
    return shared.ones == loop


def _region_io(members: Sequence[Node], graph: Graph) -> tuple[tuple[Node, ...], tuple[Node, ...]]:
    member_set = set(members)
    returned = graph.returned
    consumers = graph.consumers
    inputs: dict[Node, None] = {}
    outputs = []
    for node in members:
        for source in node.inputs:
            if source not in member_set and is_kernel_input(source):
                inputs[source] = None
        if node in returned or not member_set.issuperset(consumers[node]):
            outputs.append(node)
    return tuple(inputs), tuple(outputs)


Io = tuple[tuple[Node, ...], tuple[Node, ...]]  # a region's inputs and outputs


def _split(members: list[Node], graph: Graph, refusals: list[Refusal],
           io: Io | None = None) -> list[tuple[list[Node], Io]]:
    """Split a region over the operand cap into topological prefix and suffix (both stay
    convex: a path between them would be a path leaving and re-entering the region), each
    with its inputs and outputs (``io``, when the caller has them already).  A fused
    reduction stays with its input: nothing in the region reads it.  Each split is
    recorded in ``refusals`` (``_refuse_split``)."""
    io = io if io is not None else _region_io(members, graph)
    operands = len(io[0]) + len(io[1])
    if operands <= MAX_OPERANDS or len(members) == 1:
        return [(members, io)]
    loop = [node for node in members if node.kind == ELEMENTWISE]
    if len(loop) <= 1:
        return [(members, io)]
    half = len(loop) // 2
    parts = [set(loop[:half]), set(loop[half:])]
    for node in members:
        if node.kind != ELEMENTWISE:
            part = parts[1] if node.inputs[0] in parts[1] else parts[0]
            part.add(node)
    prefix, suffix = ([node for node in members if node in part] for part in parts)
    suffix_io = _region_io(suffix, graph)
    _refuse_split(prefix, suffix, parts, suffix_io[0], graph, operands, refusals)
    return [*_split(prefix, graph, refusals), *_split(suffix, graph, refusals, suffix_io)]


def _refuse_split(prefix: list[Node], suffix: list[Node], parts: list[set[Node]],
                  suffix_inputs: Sequence[Node], graph: Graph, operands: int,
                  refusals: list[Refusal]) -> None:
    """One refusal per value the ``suffix`` reads from the ``prefix`` and reader of it
    (``parts`` are their sets), or one between the halves' first nodes when the suffix
    reads nothing from the prefix."""
    detail = f"{operands} operands, over numpy's limit of {MAX_OPERANDS} per gufunc"
    before, after = parts
    crossing = [Refusal(source, user, Reason.OPERAND_CAP, detail)
                for source in suffix_inputs if source in before
                for user in graph.consumers[source] if user in after]
    refusals += crossing or [Refusal(prefix[0], suffix[0], Reason.OPERAND_CAP, detail)]


def _execution_order(groups: list[list[Node]]) -> list[list[Node]]:
    """Order regions so that each comes after every region it reads from (Kahn)."""
    owner = {node: index for index, group in enumerate(groups) for node in group}
    needs: list[set[int]] = [set() for _ in groups]
    for index, group in enumerate(groups):
        for node in group:
            for source in _upstream_regions(source_node=node, owner=owner):
                if source != index:
                    needs[index].add(source)
    order: list[int] = []
    ready = [index for index in range(len(groups)) if not needs[index]]
    heapq.heapify(ready)
    users: list[list[int]] = [[] for _ in groups]
    for index, required in enumerate(needs):
        for source in required:
            users[source].append(index)
    remaining = [len(required) for required in needs]
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for user in users[index]:
            remaining[user] -= 1
            if remaining[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != len(groups):
        raise AssertionError("fusion regions form a cycle; this is a numfuse bug")
    return [groups[index] for index in order]


def _upstream_regions(source_node: Node, owner: dict[Node, int]) -> set[int]:
    """Regions feeding ``source_node`` directly or through non-fused nodes."""
    found: set[int] = set()
    stack = list(source_node.inputs)
    seen: set[Node] = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node in owner:
            found.add(owner[node])
        else:
            stack.extend(node.inputs)
    return found


def partition(graph: Graph, fuse_reductions: bool = True) -> Plan:
    """Group the graph's elementwise nodes into fusion regions (see the module docstring).
    ``fuse_reductions=False`` leaves every reduction a numpy call."""
    nodes = graph.nodes
    clusters = _Clusters(nodes, graph, fuse_reductions)
    _fuse_vertically(clusters)
    _fuse_horizontally(clusters)
    grouped: dict[int, list[Node]] = {}
    for index, node in enumerate(nodes):
        if node.kind == ELEMENTWISE or clusters.fusible[clusters.find(index)]:
            grouped.setdefault(clusters.find(index), []).append(node)
    _lone_reductions(grouped)
    fused = {node for members in grouped.values() for node in members}
    refusals = clusters.refusals
    parts = [part for members in grouped.values() for part in _split(members, graph, refusals)]
    io = {id(members): part_io for members, part_io in parts}
    groups = [members for members, _ in parts]
    groups += [[node] for node in nodes if node.kind == NUMPY and node not in fused]
    steps: list[Region | Node] = []
    for members in _execution_order(groups):
        if members[0].kind == NUMPY and members[0] not in fused:
            steps.append(members[0])
            continue
        inputs, outputs = io[id(members)]
        steps.append(Region(0, tuple(members), inputs, outputs, reduced=next(
            (reduced_axes(node) for node in members if accumulation(node) is not None), ())))
    steps = _inline_scalar_regions(steps, graph, refusals)
    regions: list[Region] = []
    for position, step in enumerate(steps):
        if isinstance(step, Region):
            steps[position] = dataclasses.replace(step, index=len(regions))
            regions.append(steps[position])  # type: ignore[arg-type]
    owner = {node: region.index for region in regions for node in region.nodes}
    bordering = _bordering(regions, owner, refusals)
    for position, step in enumerate(steps):
        if isinstance(step, Region):
            donate = _donations(step, graph, owner, clusters.classes)
            borders = tuple(bordering.get(step.index, ()))
            if donate or borders:
                steps[position] = regions[step.index] = dataclasses.replace(
                    step, donate=donate, refusals=borders)
    form_of = {region.index: _form(region) for region in regions}
    numbers_of = {region.index: tuple(_numbers(region)) for region in regions
                  if form_of[region.index] is not None}
    forms: dict[Any, set[tuple[Any, ...]]] = {}  # a form: the numbers its regions use
    for index, numbers in numbers_of.items():
        forms.setdefault(form_of[index], set()).add(numbers)
    for position, step in enumerate(steps):
        if isinstance(step, Region) and len(forms.get(form_of[step.index], ())) > 1:
            steps[position] = regions[step.index] = _lifted(step, numbers_of[step.index])
    return Plan(graph, tuple(regions), tuple(steps), tuple(refusals))


# The dtypes of the numbers a kernel may take as operands instead of writing them into its
# source (a float's or an int's conversion to the loop's dtype is then the kernel's cast).
_LIFTED_DTYPES = (np.dtype(np.float64), np.dtype(np.int64))


def _lifted(region: Region, found: Sequence[Node]) -> Region:
    """``region`` taking its numbers ``found`` (``_numbers``) as operands
    (``()`` inputs after its own), for a region of the same form as another but for its
    numbers: a loop whose number changes at each step (``x - (0.1 / t) * g``, a
    learning-rate schedule, Adam's ``1 - b1**t``) then compiles one kernel, not one per
    step (200 steps: 200 kernels, 6 s).  Within numpy's limit on a gufunc's operands."""
    numbers = tuple(dict.fromkeys(found))
    if len(region.inputs) + len(numbers) + len(region.outputs) > MAX_OPERANDS:
        return region
    return dataclasses.replace(region, inputs=(*region.inputs, *numbers))


def _numbers(region: Region) -> list[Node]:
    """The region's 0-d constants of ``_LIFTED_DTYPES`` that convert to the loop dtypes
    of their uses as the kernel's cast converts them, in the order its members use them:
    an int within the range of int64 and of the loop's dtype, a float used in a float
    loop without overflowing it (an overflowing conversion warns "cast" from its
    literal)."""
    uses: dict[Node, list[np.dtype]] = {}
    for node in (*region.prelude, *region.nodes):
        for source, dtype in zip(node.inputs, getattr(node, "loop", ()), strict=False):
            if source.kind == CONST and source.ndim == 0 and source.dtype in _LIFTED_DTYPES:
                uses.setdefault(source, []).append(dtype)
    return [source for source, dtypes in uses.items()
            if all(_converts_exactly(source.value.value, dtype) for dtype in dtypes)]


def _converts_exactly(value: Any, dtype: np.dtype) -> bool:
    """Whether the kernel's cast of the number ``value`` (an int: from int64) to ``dtype``
    is numpy's conversion of it, raising no flag."""
    if isinstance(value, (bool, np.bool_)) or dtype.kind not in "fciu":
        return False
    if isinstance(value, (int, np.integer)):
        number = int(value)
        return -(2**63) <= number < 2**63 and (dtype.kind in "fc" or (
            int(np.iinfo(dtype).min) <= number <= int(np.iinfo(dtype).max)))
    return dtype.kind in "fc" and not overflows_in_cast(value, dtype)


def _form(region: Region) -> Any:
    """What ``region`` computes, but the values of its numbers (hashable); None for a
    kernel of passes (left as it is)."""
    form: Any = None
    if not region.reduced:
        position = {node: index for index, node in enumerate(region.inputs)}
        members = []
        for node in (*region.prelude, *region.nodes):
            position[node] = len(position)
            members.append((node.op, node.dtype, node.shape, node.weak, node.scalar,
                            tuple(position.get(source, (source.dtype, source.weak))
                                  for source in node.inputs)))
        form = (tuple((node.dtype, node.shape) for node in region.inputs), tuple(members),
                tuple(position[node] for node in region.outputs), region.donate,
                len(region.prelude))
    return form


def _prelude_regions(regions: Sequence[Region]) -> dict[Node, tuple[int, ...]]:
    """The regions computing each prelude node: each kernel reading scalar work computes
    it in its own prelude (a member is computed by its region alone)."""
    found: dict[Node, tuple[int, ...]] = {}
    for region in regions:
        for node in region.prelude:
            found[node] = (*found.get(node, ()), region.index)
    return found


def _regions_computing(node: Node, owner: dict[Node, int],
                       preludes: dict[Node, tuple[int, ...]]) -> tuple[int, ...]:
    index = owner.get(node)
    return (index,) if index is not None else preludes.get(node, ())


def _bordering(regions: Sequence[Region], owner: dict[Node, int],
               refusals: Iterable[Refusal]) -> dict[int, list[Refusal]]:
    """For each region, the refusals between one of its nodes and a node of another step
    (a refusal whose two nodes ended up in one region is moot).  ``owner`` gives each
    member's region."""
    preludes = _prelude_regions(regions)
    found: dict[int, list[Refusal]] = {}
    for refusal in refusals:
        first = _regions_computing(refusal.first, owner, preludes)
        second = _regions_computing(refusal.second, owner, preludes)
        if any(index in second for index in first):
            continue
        for index in (*first, *second):
            found.setdefault(index, []).append(refusal)
    return found


def _lone_reductions(grouped: dict[int, list[Node]]) -> None:
    """A reduction of an argument gets a kernel only when that saves a pass over it (it
    shares the loop with other work reading the argument); alone, numpy's own reduction
    loop is as fast, so it stays a numpy call."""
    for root, members in list(grouped.items()):
        if len(members) == 1 and members[0].kind == NUMPY:
            del grouped[root]


def _donations(region: Region, graph: Graph, owner: dict[Node, int],
               classes: dict[Node, object]) -> tuple[tuple[int, int], ...]:
    """Outputs the kernel can write into an input's buffer instead of a new array.

    The input must be a temporary: computed by an earlier kernel (elementwise, so a fresh
    array of its own), not returned, read by no later kernel and by no numpy call (which
    could hold a view of it), with the output's dtype and full loop shape.  The kernel
    reads every input at index ``i`` before it stores at ``i``, so writing over the input
    is safe.  ``w / w.sum()`` then needs no second array of ``w``'s size.
    """
    if region.reduced:
        return ()  # its passes read the inputs again after storing outputs
    returned = graph.returned
    temporaries = [
        (position, source) for position, source in enumerate(region.inputs)
        if source.kind == ELEMENTWISE and source not in returned and all(
            owner.get(user, region.index + 1) <= region.index
            for user in graph.consumers.get(source, ()))]
    pairs: list[tuple[int, int]] = []
    for out_position, output in enumerate(region.outputs):
        if output.kind != ELEMENTWISE or output.ones != region.ones:
            continue
        for slot, (in_position, source) in enumerate(temporaries):
            if source.dtype == output.dtype and source.ones == output.ones and \
                    classes.get(source) is classes.get(output):
                pairs.append((out_position, in_position))
                del temporaries[slot]
                break
    return tuple(pairs)


def _inline_scalar_regions(steps: list[Region | Node], graph: Graph,
                           refusals: list[Refusal]) -> list[Region | Node]:
    """Fold regions of 0-d values into the preludes of the kernels that read them.

    Such a region (``-r``, ``0.5 * sigma ** 2`` on scalar arguments) would otherwise be a
    kernel call of its own on length-1 arrays.  It qualifies when none of its values is
    returned or read by anything but kernels that loop over at least one axis; one that
    does not gets a refusal for each value such a kernel reads from it.
    """
    owner = {node: step for step in steps if isinstance(step, Region) for node in step.nodes}
    scalar = set()
    for step in steps:
        if isinstance(step, Region) and _is_scalar_work(step):
            kept = _kept_out_of_preludes(step, owner, graph)
            if kept is None:
                scalar.add(step)
            else:
                _refuse_preludes(step, owner, graph, kept, refusals)
    if not scalar:
        return steps
    result: list[Region | Node] = []
    for step in steps:
        if step in scalar:
            continue
        if not isinstance(step, Region):
            result.append(step)
            continue
        prelude = _prelude_for(step, owner, scalar)
        if not prelude:
            result.append(step)
            continue
        inputs, _ = _region_io([*prelude, *step.nodes], graph)
        result.append(dataclasses.replace(step, inputs=inputs, prelude=tuple(prelude)))
    return result


def _is_scalar_work(region: Region) -> bool:
    return not any(node.ndim or node.kind != ELEMENTWISE for node in region.nodes)


def _kept_out_of_preludes(region: Region, owner: dict[Node, Region], graph: Graph
                          ) -> str | None:
    """Why the scalar ``region`` cannot be folded into the preludes of the kernels that
    read it (None when it can)."""
    for output in region.outputs:
        if output in graph.returned:
            return "it is returned"
        for user in graph.consumers[output]:
            consumer = owner.get(user)
            if consumer is None:
                return "a numpy call reads it"
            if consumer is region:
                continue  # folded with it, into the same preludes
            if all(consumer.ones):
                return "a kernel without a loop reads it"
            if consumer.errstate != region.errstate:
                return "a kernel under other floating-point error handling reads it"
    return None


def _refuse_preludes(region: Region, owner: dict[Node, Region], graph: Graph, why: str,
                     refusals: list[Refusal]) -> None:
    """One refusal per value of the scalar ``region`` that a looping kernel reads: that
    kernel has other floating-point error handling (``ERRSTATE``), or ``why``."""
    for output in region.outputs:
        for user in graph.consumers[output]:
            consumer = owner.get(user)
            if consumer is None or consumer is region or all(consumer.ones):
                continue
            if consumer.errstate != region.errstate:
                refusals.append(Refusal(output, user, Reason.ERRSTATE, _errstates_text(
                    region.errstate, consumer.errstate)))
            else:
                refusals.append(Refusal(output, user, Reason.NOT_IN_PRELUDE, why))


def _prelude_for(region: Region, owner: dict[Node, Region], scalar: set[Region]) -> list[Node]:
    """All members of the scalar regions ``region`` reads, directly or through each other,
    in an order where every node follows its inputs."""
    needed: list[Region] = []
    pending = [owner[node] for node in region.inputs if owner.get(node) in scalar]
    while pending:
        source = pending.pop()
        if source in needed:
            continue
        needed.append(source)
        pending += [owner[node] for node in source.inputs if owner.get(node) in scalar]
    members = {node for source in needed for node in source.nodes}
    return [node for node in toposort(members) if node in members]


def check_plan(plan: Plan) -> None:
    """Assert the invariants in the module docstring; used after partitioning in tests."""
    graph = plan.graph
    owner: dict[Node, int] = {}
    for region in plan.regions:
        assert region.nodes, "empty region"
        members = set(region.nodes)
        assert all(node.errstate == region.errstate for node in (*region.prelude,
                                                                 *region.nodes)), (
            f"region {region.index} mixes floating-point error handling")
        for node in region.nodes:
            assert node not in owner, f"{node} is in two regions"
            owner[node] = region.index
            if node.kind != ELEMENTWISE:
                assert node.inputs[0] in members or node.inputs[0].kind != ELEMENTWISE, (
                    f"{node} reduces a value of another region")
                if accumulation(node) is not None:
                    assert reduced_axes(node) == region.reduced, (
                        f"{node} accumulates over other axes than its region's")
                    assert in_line(node) or not members & set(graph.consumers[node]), (
                        f"{node} is read in its region but does not line up with its loop")
                    continue
                assert epilogue(node) is not None, f"{node} is neither elementwise nor fusible"
                assert not region.reduced, f"{node} is folded in a region of passes"
                assert not members & set(graph.consumers.get(node, ())), (
                    f"{node} is read inside the loop that computes it")
                continue
            if node.ones != region.ones:
                assert _broadcasts_into(node.ones, region.ones), (
                    f"{node} has a loop shape that does not broadcast into its region's")
                assert node not in region.outputs or (region.reduced and varies(
                    node, region.reduced, len(region.ones)) is False), (
                    f"{node} is recomputed yet an output")
        assert len(region.inputs) + len(region.outputs) <= MAX_OPERANDS
        if region.reduced:
            assert not region.donate, f"region {region.index} of passes writes an input"
            schedule(region)  # asserts it has one
    in_prelude = {node for region in plan.regions for node in region.prelude}
    for node in graph.nodes:
        if node.kind == ELEMENTWISE:
            assert node in owner or node in in_prelude, f"{node} is in no region"
            assert not (node in owner and node in in_prelude), f"{node} is computed twice"
    for node in in_prelude:
        assert node.ndim == 0, f"{node} in a prelude is not 0-d"
    for region in plan.regions:
        for node in region.nodes:
            for upstream in _upstream_regions(node, owner):
                assert upstream <= region.index, (
                    f"region {region.index} reads region {upstream}, which runs later"
                )
        _assert_convex(region, graph, owner)
    _assert_crossings_refused(plan)


def _assert_crossings_refused(plan: Plan) -> None:
    """Each value crossing between a region and another step has a refusal, in that
    region's ``refusals``, for exactly that value and its reader.  Scalar work in the
    preludes of several kernels crosses nothing where its reader's kernel computes it
    too (as ``_bordering`` finds)."""
    consumers = plan.graph.consumers
    owner = {node: region.index for region in plan.regions for node in region.nodes}
    preludes = _prelude_regions(plan.regions)
    for region in plan.regions:
        recorded = {(refusal.first, refusal.second) for refusal in region.refusals}
        for node in (*region.prelude, *region.nodes):
            crossing = [(source, node) for source in node.inputs if _is_step(source)]
            crossing += [(node, user) for user in consumers.get(node, ())]
            for source, user in crossing:
                computing = (_regions_computing(source, owner, preludes),
                             _regions_computing(user, owner, preludes))
                apart = region.index not in computing[0] or region.index not in computing[1]
                if apart and set(computing[0]) & set(computing[1]):
                    continue  # another kernel computes both (a duplicated prelude)
                assert not apart or (source, user) in recorded, (
                    f"region {region.index} has no refusal for {source} -> {user}")


def _assert_convex(region: Region, graph: Graph, owner: dict[Node, int]) -> None:
    """No path from a member through a non-member back into the region."""
    members = set(region.nodes)
    returning = path_through_outside(region.nodes, members, members, graph)
    assert returning is None, f"region {region.index} is not convex (via {returning})"


def path_through_outside(sources: Sequence[Node], inside: set[Node], targets: set[Node],
                         graph: Graph) -> Node | None:
    """A node of ``targets`` reached from ``sources`` by a path that leaves ``inside``,
    or None.  Convexity of ``inside`` means no such path back into ``inside`` exists."""
    frontier = [user for node in sources for user in graph.consumers[node]
                if user not in inside]
    seen: set[Node] = set()
    while frontier:
        node = frontier.pop()
        if node in seen:
            continue
        seen.add(node)
        for user in graph.consumers[node]:
            if user in targets:
                return user
            if user not in inside:
                frontier.append(user)
    return None
