"""The knowledge graph behind BubbleRAG: an immutable CSR multigraph with C++ search kernels.

:class:`Graph` wraps ``core._native.Graph`` (``csrc/include/bridge/graph.hpp``): an
undirected multigraph over nodes ``0..N-1`` and edges ``0..E-1`` (edge ``e`` joins
``heads[e]`` and ``tails[e]``), with two searches:

- :meth:`Graph.localize`: the breadth-first neighbourhood of some seed nodes, capped;
- :meth:`Graph.bubble`: BubbleRAG's bubble expansion, which grows low-cost paths from
  groups of anchor seeds (one group per query concept) until they meet and returns the
  candidate evidence graphs (CEGs) they form, ranked.

The graph is immutable (rebuild it when the knowledge graph changes; building is a counting
sort, about linear in the number of edges), carries no retrieval policy, and both searches
release the GIL and are safe to call from several threads at once. Node and edge ids are
integers; costs are float32; every bad input raises ``ValueError`` (or ``TypeError`` for a
wrong type) with a message saying what to change.
"""

from __future__ import annotations

import math
import numbers
import operator
import os
from collections.abc import Iterable
from enum import IntEnum
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from core import _native
from core.persist import atomic_write_bytes, read_bytes

__all__ = ["BubbleResult", "CegKind", "Graph", "ceg_at"]

IntsLike = Iterable[int] | npt.NDArray[np.integer]
FloatsLike = Iterable[float] | npt.NDArray[np.floating] | npt.NDArray[np.integer]
MaskLike = Iterable[bool] | Iterable[int] | npt.NDArray[np.bool_] | npt.NDArray[np.integer]


class CegKind(IntEnum):
    """How a candidate evidence graph was formed (the ``kind`` column of :class:`BubbleResult`)."""

    MEETING = 0
    """Paths from two or more different seed groups met at a node."""
    WITHIN_GROUP = 1
    """Paths from two different seeds of the same group met at a node (score penalised)."""
    FALLBACK = 2
    """No paths met: one seed alone, with its anchor edge."""


class BubbleResult(TypedDict):
    """Columns of :meth:`Graph.bubble`: ``C`` candidate evidence graphs, best (lowest score) first.

    CEG ``c`` has nodes ``nodes[node_offsets[c]:node_offsets[c + 1]]`` and edges
    ``edges[edge_offsets[c]:edge_offsets[c + 1]]`` (each sorted, unique); :func:`ceg_at`
    slices them out.
    """

    node_offsets: npt.NDArray[np.int64]
    """``C + 1`` offsets into ``nodes``."""
    nodes: npt.NDArray[np.int64]
    """Every CEG's sorted node ids, concatenated."""
    edge_offsets: npt.NDArray[np.int64]
    """``C + 1`` offsets into ``edges``."""
    edges: npt.NDArray[np.int64]
    """Every CEG's sorted edge ids, concatenated."""
    score: npt.NDArray[np.float32]
    """``mean_cost + alpha * uncovered weight / total weight``, times ``1 + within_group_penalty``
    for within-group CEGs. Lower is better; the rows are sorted by it."""
    mean_cost: npt.NDArray[np.float32]
    """Mean of ``node_cost`` over the nodes and ``edge_cost`` over the edges."""
    path_cost: npt.NDArray[np.float32]
    """Sum of the joined paths' costs to the meeting node (seed costs included); for a
    fallback CEG, the seed's cost."""
    covered: npt.NDArray[np.uint64]
    """Bit ``g`` set when group ``g`` contributed a path or has a seed inside the CEG."""
    kind: npt.NDArray[np.uint8]
    """A :class:`CegKind` value."""
    meeting_node: npt.NDArray[np.int64]
    """The node where the paths met (the seed node for a fallback CEG)."""


def ceg_at(result: BubbleResult, i: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The nodes and edges of CEG ``i`` of a :meth:`Graph.bubble` result.

    Args:
        result: A bubble result.
        i: The CEG's row, ``0 <= i < len(result["score"])``.

    Returns:
        ``(nodes, edges)``, both sorted int64 arrays (views into ``result``).

    Raises:
        IndexError: ``i`` is out of range.
    """
    count = len(result["score"])
    if not 0 <= i < count:
        raise IndexError(f"CEG {i} does not exist (the result holds {count})")
    no, eo = result["node_offsets"], result["edge_offsets"]
    return result["nodes"][no[i] : no[i + 1]], result["edges"][eo[i] : eo[i + 1]]


def _as_int(name: str, value: object) -> int:
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be an integer, got a bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None


def _as_float(name: str, value: object) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    out = float(value)
    if math.isnan(out):
        raise ValueError(f"{name} must not be NaN")
    return out


class Graph:
    """An immutable undirected multigraph in CSR form, with BubbleRAG's search kernels.

    Every edge is listed in the adjacency of both endpoints as ``(neighbour, edge id)``, in
    edge-id order; parallel edges are kept and a self-loop appears twice in its node's list
    (so it adds 2 to the degree, as in networkx). Self-loops are ignored by the searches.

    Setup:
        Node ids are ``0..num_nodes - 1``; map your entities to them first (``core.strategies.bubble.kg``).

    Key init args:
        num_nodes: Number of nodes ``N`` (isolated nodes allowed), below 2^31 - 1.
        heads: ``E`` integer node ids, one end of each edge.
        tails: ``E`` integer node ids, the other end.

    Example:
        >>> g = Graph(4, heads=[0, 1, 2, 3], tails=[1, 2, 3, 0])
        >>> g.degree().tolist()
        [2, 2, 2, 2]
        >>> g.localize([0], hops=1).tolist()
        [0, 1, 3]
        >>> r = g.bubble(
        ...     group_offsets=[0, 1, 2], seed_nodes=[0, 2], seed_edges=[-1, -1], seed_costs=[0, 0],
        ...     node_cost=[0.1] * 4, edge_cost=[0.5, 0.5, 0.1, 0.1], allowed=[1] * 4,
        ...     group_weights=[1, 1], max_cegs=1,
        ... )
        >>> ceg_at(r, 0)[0].tolist(), ceg_at(r, 0)[1].tolist()
        ([0, 2, 3], [2, 3])

    Raises:
        ValueError: A node id outside ``[0, num_nodes)``, or ``heads`` and ``tails`` of
            different lengths.
        TypeError: Non-integer ids.
    """

    __slots__ = ("_native",)
    _what = "knowledge graph file"

    def __init__(self, num_nodes: int, heads: IntsLike, tails: IntsLike) -> None:
        self._native = _native.Graph(_as_int("num_nodes", num_nodes), heads, tails)

    @classmethod
    def _wrap(cls, native: _native.Graph) -> Graph:
        obj = cls.__new__(cls)
        obj._native = native
        return obj

    @property
    def num_nodes(self) -> int:
        """Number of nodes ``N``."""
        return self._native.num_nodes

    @property
    def num_edges(self) -> int:
        """Number of edges ``E``."""
        return self._native.num_edges

    def heads(self) -> npt.NDArray[np.int64]:
        """One end of every edge (a copy), indexed by edge id."""
        return self._native.heads()

    def tails(self) -> npt.NDArray[np.int64]:
        """The other end of every edge (a copy), indexed by edge id."""
        return self._native.tails()

    def degree(self) -> npt.NDArray[np.int64]:
        """Adjacency-list length of every node (self-loops count 2)."""
        return self._native.degree()

    def neighbors(self, node: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The adjacency of ``node``.

        Args:
            node: A node id.

        Returns:
            ``(neighbour ids, edge ids)``, aligned, in edge-id order.

        Raises:
            ValueError: ``node`` does not exist.
        """
        return self._native.neighbors(_as_int("node", node))

    def localize(self, seeds: IntsLike, hops: int, max_nodes: int = 0) -> npt.NDArray[np.int64]:
        """Nodes within ``hops`` hops of any seed, breadth-first.

        The sorted, unique seeds come first, then the nodes one hop away in discovery order,
        then two hops, and so on; a capped result is a prefix of the uncapped one. The cost
        depends on the neighbourhood explored, never on the graph's size.

        Args:
            seeds: Seed node ids (duplicates allowed).
            hops: Largest hop distance, ``>= 0``.
            max_nodes: Stop once this many nodes are collected; 0 means no cap.

        Returns:
            The node ids, int64, in breadth-first order.

        Raises:
            ValueError: A seed does not exist, or a negative ``hops`` / ``max_nodes``.
        """
        return self._native.localize(seeds, _as_int("hops", hops), _as_int("max_nodes", max_nodes))

    def bubble(
        self,
        group_offsets: IntsLike,
        seed_nodes: IntsLike,
        seed_edges: IntsLike,
        seed_costs: FloatsLike,
        node_cost: FloatsLike,
        edge_cost: FloatsLike,
        allowed: MaskLike,
        group_weights: FloatsLike,
        alpha: float = 1.0,
        max_cegs: int = 10,
        max_path_cost: float = math.inf,
        within_group_penalty: float = 0.5,
    ) -> BubbleResult:
        """BubbleRAG's bubble expansion: fuses low-cost paths from seed groups into ranked CEGs.

        Seed group ``g`` owns seeds ``group_offsets[g]:group_offsets[g + 1]``. Paths from
        every group grow at once, cheapest first (multi-source Dijkstra); a node reached by a
        second group is a meeting point, and the union of each group's best path to it is a
        candidate evidence graph (CEG). The search stops at ``max_cegs`` distinct CEGs. If
        there are fewer, pairs of different seeds of one group that meet add CEGs (score
        times ``1 + within_group_penalty``); if there are none at all, each seed alone is a
        CEG. Full description: ``csrc/include/bridge/graph.hpp``.

        Args:
            group_offsets: ``G + 1`` offsets into the seed arrays, from 0 to ``S``; ``G <= 64``.
            seed_nodes: ``S`` seed node ids; every seed must be ``allowed``.
            seed_edges: ``S`` anchor edge ids (the edge is part of the seed's path and must
                touch the seed node), or -1 for a plain node seed.
            seed_costs: ``S`` finite starting costs, ``>= 0``.
            node_cost: ``N`` node costs ``>= 0`` (for example ``1 - cos(query, node)``); used
                for the CEG's mean cost.
            edge_cost: ``E`` edge costs ``>= 0``; path costs add them; ``+inf`` is never
                traversed.
            allowed: ``N`` flags; only nodes with a nonzero flag are visited (for example
                the :meth:`localize` neighbourhood).
            group_weights: ``G`` weights ``>= 0`` of the groups in the coverage penalty.
            alpha: Weight of the coverage penalty, ``>= 0``.
            max_cegs: Most CEGs to return, ``>= 1``.
            max_path_cost: Paths are not extended beyond this cost.
            within_group_penalty: Score penalty for within-group CEGs, ``>= 0``.

        Returns:
            The CEGs, best first, as a :class:`BubbleResult` of numpy columns; never empty
            when there are seeds.

        Raises:
            ValueError: Any malformed input: lengths, offsets, ids out of range, a seed
                outside ``allowed``, an anchor edge not touching its seed, NaN or negative
                costs, bad scalars.
            TypeError: Non-integer ids or non-numeric costs.
        """
        return self._native.bubble(
            group_offsets,
            seed_nodes,
            seed_edges,
            seed_costs,
            node_cost,
            edge_cost,
            allowed,
            group_weights,
            _as_float("alpha", alpha),
            _as_int("max_cegs", max_cegs),
            _as_float("max_path_cost", max_path_cost),
            _as_float("within_group_penalty", within_group_penalty),
        )

    def memory_bytes(self) -> int:
        """Bytes held by the graph's arrays."""
        return self._native.memory_bytes()

    def to_bytes(self) -> bytes:
        """Serialises the graph (magic, version, sizes, degrees, edge list, checksum)."""
        return self._native.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Graph:
        """Rebuilds a graph from :meth:`to_bytes` output, checking every field.

        Args:
            data: The serialised bytes.

        Returns:
            The graph.

        Raises:
            TypeError: ``data`` is not bytes-like.
            ValueError: The buffer is truncated, corrupted or of another format version.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        return cls._wrap(_native.Graph.from_bytes(bytes(data)))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes :meth:`to_bytes` to ``path`` atomically (temporary file, fsync, rename).

        Args:
            path: Destination file; its directory must exist.
        """
        atomic_write_bytes(path, self.to_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Graph:
        """Loads a graph saved with :meth:`save`.

        Args:
            path: The file to read.

        Returns:
            The graph.

        Raises:
            FileNotFoundError: No file at ``path``.
            ValueError: The file is truncated, corrupted or of another format version.
        """
        data = read_bytes(path, cls._what)
        try:
            return cls.from_bytes(data)
        except ValueError as exc:
            raise ValueError(f"{os.fspath(path)}: {exc}") from exc

    def __repr__(self) -> str:
        return f"Graph(nodes={self.num_nodes}, edges={self.num_edges})"
