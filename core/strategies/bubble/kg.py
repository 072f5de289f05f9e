"""A text knowledge graph: named nodes, relation edges, their embeddings, and their source chunks.

Nodes are entity names merged by :func:`core.text.normalize_entity` (so "the Beatles" and
"Beatles" are one node); each node remembers the chunks that mention it. Edges are triples
("head relation tail"), each with the chunk it came from (or -1 when the graph came from
elsewhere). Nodes and edges are embedded (an edge by its triple text, so a query can match a
relation). The structure lives in C++ (:class:`core.native.graph.Graph`, CSR adjacency); this module
keeps the texts and vectors, grows the graph, and converts to and from networkx.

No schema is assumed: any networkx graph whose nodes and edges carry some text can be loaded
with :meth:`KnowledgeGraph.from_networkx` (the "black-box" case).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from core.embed import Embedder
from core.native.graph import Graph
from core.persist import (
    FileData,
    array_from_bytes,
    array_to_bytes,
    array_view,
    json_from_bytes,
    json_to_bytes,
)
from core.strategies.bubble.triples import Triple
from core.strategies.common import embed_in_batches, mask_at, normalise_rows
from core.text import normalize_entity
from core.vector_index import DEFAULT_EXACT_BELOW, HEADER_FILE, VectorIndex

__all__ = ["KnowledgeGraph"]

FloatMatrix = npt.NDArray[np.float32]
logger = logging.getLogger("bridge_rag.bubble")
_NO_CHUNK = -1
_COMPOSED_KINDS = frozenset({"cooccurrence", "title"})


class KnowledgeGraph:
    """Nodes, edges, their texts, vectors and source chunks, over a C++ CSR graph.

    Attributes:
        node_names: Display name of each node: its spelling in the mention that created it,
            until that mention's chunk is deleted (then one from a live edge, else its
            normalised key).
        node_chunks: Chunk rows that mention each node.
        edge_head, edge_tail: Node ids of each edge.
        edge_head_name, edge_tail_name: How the edge's own chunk spells its two ends (nodes are
            merged by normalised name; an edge's text always spells them as its chunk does,
            so what a filtered query returns is spelt by the rows it allows). None where the
            spelling is unknown (an index saved before edges kept it): the node's name.
        edge_relation: Relation words of each edge.
        edge_kind: How each edge was found (``svo``, ``cooccurrence``, ``llm``, ``title``, ``graph``).
        edge_chunk: Source chunk row of each edge (-1: none).
        edge_alive: False for edges whose chunk was deleted.
    """

    def __init__(self, dimension: int) -> None:
        """An empty graph for ``dimension``-dimensional embeddings."""
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise ValueError(f"dimension must be a positive int, got {dimension!r}")
        self.dimension = dimension
        self.node_names: list[str] = []
        self.node_chunks: list[list[int]] = []
        self._node_index: dict[str, int] = {}
        self._name_chunk: list[int] = []  # node -> the chunk row its display name is spelt from (-1: none)
        self._stale_names: set[int] = set()  # nodes renamed by a delete, their vectors not yet re-embedded
        self.edge_head: list[int] = []
        self.edge_tail: list[int] = []
        self.edge_head_name: list[str | None] = []
        self.edge_tail_name: list[str | None] = []
        self.edge_relation: list[str] = []
        self.edge_kind: list[str] = []
        self.edge_chunk: list[int] = []
        self.edge_alive: list[bool] = []
        self.node_matrix: FloatMatrix = np.zeros((0, dimension), dtype=np.float32)
        self.edge_matrix: FloatMatrix = np.zeros((0, dimension), dtype=np.float32)
        self._lock = threading.RLock()
        self._graph: Graph | None = None
        self._edge_ids = np.zeros(0, dtype=np.int64)  # native edge id -> edge id
        self._heads = np.zeros(0, dtype=np.int64)
        self._tails = np.zeros(0, dtype=np.int64)
        self._native_ends: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
        self._to_native: npt.NDArray[np.int64] | None = None
        self._anchor_indexes: tuple[VectorIndex, VectorIndex] | None = None
        self._anchor_node_rows = 0  # rows of node_matrix the node index has seen
        self._anchor_edge_rows = 0  # rows of edge_matrix the edge index has seen
        self._anchor_exact_below = DEFAULT_EXACT_BELOW
        self._live_edges = np.zeros(0, dtype=bool)
        self._mention_version = 0  # bumped whenever a node's chunks or an edge's chunk change
        self._mention_csr: (
            tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None
        ) = None

    # ------------------------------------------------------------------ sizes and lookups
    @property
    def num_nodes(self) -> int:
        """Nodes (including nodes whose chunks were all deleted)."""
        return len(self.node_names)

    @property
    def has_stale_names(self) -> bool:
        """Whether a delete renamed nodes whose vectors :meth:`embed_missing` has not yet redone."""
        return bool(self._stale_names)

    @property
    def num_edges(self) -> int:
        """Live edges."""
        return int(sum(self.edge_alive))

    def node_id(self, name: str) -> int | None:
        """The node of an entity name (normalised), or None."""
        return self._node_index.get(normalize_entity(name))

    def edge_text(self, edge: int) -> str:
        """``"head relation tail"`` of an edge, its ends spelt as the edge's own chunk spells them."""
        head = self.edge_head_name[edge] or self.node_names[self.edge_head[edge]]
        tail = self.edge_tail_name[edge] or self.node_names[self.edge_tail[edge]]
        return " ".join(p for p in (head, self.edge_relation[edge], tail) if p)

    @property
    def heads(self) -> npt.NDArray[np.int64]:
        """Head node of every edge (int64 array)."""
        self._ensure_graph()
        return self._heads

    @property
    def tails(self) -> npt.NDArray[np.int64]:
        """Tail node of every edge (int64 array)."""
        self._ensure_graph()
        return self._tails

    @property
    def graph(self) -> Graph:
        """The C++ CSR graph over the live edges (rebuilt lazily after changes)."""
        return self._ensure_graph()

    def native_edge_ids(self) -> npt.NDArray[np.int64]:
        """Edge id of each edge of :attr:`graph` (it holds the live edges only)."""
        self._ensure_graph()
        return self._edge_ids

    def native_ends(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Head and tail node of each edge of :attr:`graph` (its own edge order)."""
        with self._lock:
            self._ensure_graph()
            if self._native_ends is None:
                self._native_ends = (self._heads[self._edge_ids], self._tails[self._edge_ids])
            return self._native_ends

    def to_native(self) -> npt.NDArray[np.int64]:
        """Edge id -> edge of :attr:`graph` (-1 for dead edges)."""
        with self._lock:
            self._ensure_graph()
            if self._to_native is None:
                out = np.full(len(self.edge_head), -1, dtype=np.int64)
                out[self._edge_ids] = np.arange(len(self._edge_ids), dtype=np.int64)
                self._to_native = out
            return self._to_native

    def anchor_indexes(self, exact_below: int = DEFAULT_EXACT_BELOW) -> tuple[VectorIndex, VectorIndex]:
        """Vector indexes of the anchor candidates (:class:`core.vector_index.VectorIndex`).

        The first indexes the rows of ``node_matrix`` of named nodes; the second the rows of
        ``edge_matrix`` of live embedded relation edges (co-occurrence and title edges, whose
        vectors are sums of their ends, are left out): search it with :attr:`live_edges` (or
        a filter's edge mask) as the allowed rows. Both are built on first use; rows embedded
        later are inserted into a copy that then replaces the index, so a search in flight
        never sees a half-grown graph. A deletion that blanks vectors drops both, and the next
        use builds them over the rows still alive: the cost of a rebuild follows the live
        graph, not every row ever added. Sets smaller than ``exact_below`` are searched exactly.
        """
        with self._lock:
            cached = self._anchor_indexes
            n_nodes, n_edges = self.node_matrix.shape[0], self.edge_matrix.shape[0]
            if cached is None or self._anchor_exact_below != exact_below:
                nodes = VectorIndex.build(self.node_matrix, self._named_rows(0), exact_below=exact_below)
                edges = VectorIndex.build(self.edge_matrix, self._relation_rows(0), exact_below=exact_below)
                self._anchor_indexes, self._anchor_exact_below = (nodes, edges), exact_below
                self._anchor_node_rows, self._anchor_edge_rows = n_nodes, n_edges
            elif self._anchor_node_rows < n_nodes or self._anchor_edge_rows < n_edges:
                nodes = cached[0].with_rows(self.node_matrix, self._named_rows(self._anchor_node_rows))
                edges = cached[1].with_rows(self.edge_matrix, self._relation_rows(self._anchor_edge_rows))
                self._anchor_indexes = (nodes, edges)
                self._anchor_node_rows, self._anchor_edge_rows = n_nodes, n_edges
            else:
                nodes, edges = cached
            return nodes, edges

    @property
    def live_edges(self) -> npt.NDArray[np.bool_]:
        """One bool per edge id: the edge is alive (its chunk was not deleted); read-only."""
        self._ensure_graph()
        return self._live_edges

    def chunk_masks(self, live: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """The nodes and edges a set of chunks allows (a metadata filter's live chunks).

        A node is allowed when at least one of the chunks that mention it is; an edge when
        its chunk is (an edge of no chunk is outside every filter).

        Args:
            live: One bool per chunk row.

        Returns:
            ``(node_ok, edge_ok)``: one bool per node and one per edge (edge ids).
        """
        with self._lock:
            csr = self._mention_csr
            if csr is None or csr[0] != self._mention_version:
                counts = np.fromiter(
                    (len(r) for r in self.node_chunks), dtype=np.int64, count=len(self.node_chunks)
                )
                offsets = np.zeros(len(self.node_chunks) + 1, dtype=np.int64)
                offsets[1:] = np.cumsum(counts)
                flat = np.fromiter(
                    (r for rows in self.node_chunks for r in rows), dtype=np.int64, count=int(offsets[-1])
                )
                csr = (self._mention_version, offsets, flat, np.asarray(self.edge_chunk, dtype=np.int64))
                self._mention_csr = csr
        _, offsets, flat, edge_chunk = csr
        cum = np.concatenate([[0], np.cumsum(mask_at(live, flat))])
        node_ok = (cum[offsets[1:]] - cum[offsets[:-1]]) > 0
        return node_ok, mask_at(live, edge_chunk)

    def _relation_rows(self, first: int, *, dead: bool = False) -> npt.NDArray[np.int64]:
        """Embedded relation edges (not co-occurrence or title) from ``first`` on; dead ones if ``dead``."""
        end = self.edge_matrix.shape[0]
        kinds, alive = self.edge_kind[first:end], self.edge_alive[first:end]
        return np.asarray(
            [
                first + i
                for i, (kind, ok) in enumerate(zip(kinds, alive, strict=True))
                if kind not in _COMPOSED_KINDS and (ok or dead)
            ],
            dtype=np.int64,
        )

    def _named_rows(self, first: int) -> npt.NDArray[np.int64]:
        """Embedded nodes from ``first`` on that still have a name (deletion blanks orphans)."""
        names = self.node_names[first : self.node_matrix.shape[0]]
        return np.asarray([first + i for i, name in enumerate(names) if name], dtype=np.int64)

    def _changed(self) -> None:
        """Drops every structure derived from the edge lists (rebuilt lazily)."""
        self._graph = None
        self._native_ends = None
        self._to_native = None

    def _ensure_graph(self) -> Graph:
        with self._lock:
            if self._graph is None:
                self._heads = np.asarray(self.edge_head, dtype=np.int64)
                self._tails = np.asarray(self.edge_tail, dtype=np.int64)
                alive = np.asarray(self.edge_alive, dtype=bool)
                alive.flags.writeable = False
                self._live_edges = alive
                self._edge_ids = np.flatnonzero(alive).astype(np.int64)
                self._graph = Graph(self.num_nodes, self._heads[alive], self._tails[alive])
            return self._graph

    # ------------------------------------------------------------------ growth
    def add_node(self, name: str, chunk: int = _NO_CHUNK) -> int | None:
        """The node for ``name`` (created when new); records ``chunk`` as a mention.

        Returns:
            The node id, or None when the name normalises to nothing.
        """
        key = normalize_entity(name)
        if not key:
            return None
        with self._lock:
            node = self._node_index.get(key)
            if node is None:
                node = len(self.node_names)
                self._node_index[key] = node
                self.node_names.append(" ".join(name.split()))
                self._name_chunk.append(chunk)
                self.node_chunks.append([])
                self._changed()
                self._mention_version += 1
            if chunk >= 0 and (not self.node_chunks[node] or self.node_chunks[node][-1] != chunk):
                self.node_chunks[node].append(chunk)
                self._mention_version += 1
            return node

    def add_triples(self, triples: Iterable[Triple], chunk: int = _NO_CHUNK) -> int:
        """Adds the triples of one chunk (nodes are merged by normalised name).

        Returns:
            How many edges were added.
        """
        added = 0
        with self._lock:
            for t in triples:
                head, tail = self.add_node(t.head, chunk), self.add_node(t.tail, chunk)
                if head is None or tail is None or head == tail:
                    continue
                spelt = (self._spelling(t.head, head), self._spelling(t.tail, tail))
                self._add_edge(head, tail, spelt, t.relation, t.kind, chunk)
                added += 1
            if added:
                self._changed()
                self._mention_version += 1
        return added

    def _spelling(self, name: str, node: int) -> str:
        """``name`` as an edge end (whitespace collapsed; the node's own string when equal)."""
        spelt = " ".join(name.split())
        return self.node_names[node] if spelt == self.node_names[node] else spelt

    def _add_edge(
        self, head: int, tail: int, spelt: tuple[str, str], relation: str, kind: str, chunk: int
    ) -> None:
        """Appends a live edge to every per-edge list (``spelt``: how its chunk spells its ends)."""
        self.edge_head.append(head)
        self.edge_tail.append(tail)
        self.edge_head_name.append(spelt[0])
        self.edge_tail_name.append(spelt[1])
        self.edge_relation.append(" ".join(relation.split()))
        self.edge_kind.append(kind)
        self.edge_chunk.append(chunk)
        self.edge_alive.append(True)

    def remove_chunks(self, chunks: Iterable[int]) -> int:
        """Drops the edges and mentions of deleted chunks.

        Returns:
            How many edges were removed.
        """
        gone = set(chunks)
        removed = 0
        with self._lock:
            dead_edges = []
            for e, c in enumerate(self.edge_chunk):
                if c in gone and self.edge_alive[e]:
                    self.edge_alive[e] = False
                    dead_edges.append(e)
                    removed += 1
            touched = []
            for n, rows in enumerate(self.node_chunks):
                if any(r in gone for r in rows):
                    self.node_chunks[n] = [r for r in rows if r not in gone]
                    touched.append(n)
            self._forget(dead_edges, touched, gone)
            self._changed()
            self._mention_version += 1
        return removed

    def _forget(self, dead_edges: list[int], touched: list[int], gone: set[int]) -> None:
        """Blanks what deleted chunks alone held.

        Dead edges lose their relation, their ends' spellings and their vector; nodes no live
        chunk or edge keeps lose their name and vector; a node kept whose name was spelt by a
        deleted chunk is renamed (:meth:`_rename`). The anchor indexes (which hold vectors) are
        rebuilt over the live rows on next use. Node and edge numbers stay.
        """
        ends = {n for e, a in enumerate(self.edge_alive) if a for n in (self.edge_head[e], self.edge_tail[e])}
        orphans = [n for n in touched if not self.node_chunks[n] and n not in ends and self.node_names[n]]
        renamed = [
            n
            for n in {
                *touched,
                *(self.edge_head[e] for e in dead_edges),
                *(self.edge_tail[e] for e in dead_edges),
            }
            if self._name_chunk[n] in gone and n not in orphans and self.node_names[n]
        ]
        if not dead_edges and not orphans and not renamed:
            return
        for e in dead_edges:
            self.edge_relation[e] = self.edge_head_name[e] = self.edge_tail_name[e] = ""
        self._rename(sorted(renamed))
        edge_matrix = np.array(self.edge_matrix, dtype=np.float32, copy=True)
        edge_matrix[dead_edges] = 0.0
        node_matrix = np.array(self.node_matrix, dtype=np.float32, copy=True)
        keys = self._node_keys() if orphans else []
        for n in orphans:
            key = keys[n]  # a renamed node's name need not normalise to its key
            if key and self._node_index.get(key) == n:
                del self._node_index[key]
            self.node_names[n] = ""
            self._name_chunk[n] = _NO_CHUNK
        node_matrix[orphans] = 0.0
        stale = sorted(n for n in self._stale_names if n < node_matrix.shape[0])
        node_matrix[stale] = 0.0  # re-embedded under the new name (embed_missing)
        self.node_matrix, self.edge_matrix = node_matrix, edge_matrix
        self._anchor_indexes = None

    def _rename(self, nodes: list[int]) -> None:
        """Names each node as a live edge's chunk spells it, else by its normalised key.

        For nodes kept after a delete whose display name the deleted chunk spelt (another
        tenant's spelling, a deleted document's): the name, saved and embedded, is then spelt
        by a live chunk. An edge whose spelling is unknown (None) follows the new name.
        """
        if not nodes:
            return
        wanted = set(nodes)
        found: dict[int, tuple[str, int]] = {}
        for e, ok in enumerate(self.edge_alive):
            if not ok:
                continue
            for node, name in (  # a known spelling (None: unknown, it follows the node's name)
                (self.edge_head[e], self.edge_head_name[e]),
                (self.edge_tail[e], self.edge_tail_name[e]),
            ):
                if node in wanted and node not in found and name:
                    found[node] = (name, self.edge_chunk[e])
        keys = self._node_keys()
        for n in nodes:
            old = self.node_names[n]
            name, chunk = found.get(n, (keys[n] or normalize_entity(old), _NO_CHUNK))
            self.node_names[n], self._name_chunk[n] = str(name), chunk
            if name != old:
                self._stale_names.add(n)

    def embed_missing(self, embedder: Embedder, *, show_progress: bool = False) -> int:
        """Embeds the nodes and edges added since the last call (duplicate texts once).

        Nodes are embedded by name. Relation edges (``svo``, ``llm``, ``graph``) are embedded by
        their text ``"head relation tail"``, so a query can match the relation. Co-occurrence
        and title edges, whose relation words say little, get the normalised sum of their two
        end nodes' vectors instead: no model call, which keeps the build cheap (they are most
        of the edges).

        Returns:
            How many distinct texts were embedded.
        """
        with self._lock:
            first_edge = self.edge_matrix.shape[0]
            new_nodes = self.node_names[self.node_matrix.shape[0] :]
            renamed = sorted(
                n for n in self._stale_names if n < self.node_matrix.shape[0] and self.node_names[n]
            )
            new_edges = range(first_edge, len(self.edge_head))
            texts = {e: self.edge_text(e) for e in new_edges if self.edge_kind[e] not in _COMPOSED_KINDS}
            unique = list(
                dict.fromkeys([*new_nodes, *(self.node_names[n] for n in renamed), *texts.values()])
            )
            if unique:
                vectors = normalise_rows(
                    embed_in_batches(embedder, unique, show_progress=show_progress, desc="embedding graph")
                )
            else:
                vectors = np.zeros((0, self.dimension), dtype=np.float32)
            row = {text: i for i, text in enumerate(unique)}
            nodes = vectors[[row[t] for t in new_nodes]] if new_nodes else vectors[:0]
            matrix = np.vstack([self.node_matrix, nodes])  # a new array: readers keep the old one
            if renamed:
                matrix[renamed] = vectors[[row[self.node_names[n]] for n in renamed]]
                self._anchor_indexes = None  # the renamed nodes' rows changed
            self._stale_names.clear()
            self.node_matrix = np.ascontiguousarray(matrix, dtype=np.float32)
            edges = np.zeros((len(new_edges), self.dimension), dtype=np.float32)
            for i, e in enumerate(new_edges):
                edges[i] = vectors[row[texts[e]]] if e in texts else self._composed(e)
            edge_matrix = np.vstack([self.edge_matrix, normalise_rows(edges)])  # a new array
            if renamed:  # composed edges at a renamed node: summed anew from its new vector
                touched = set(renamed)
                recomposed = [
                    e
                    for e in range(first_edge)
                    if self.edge_alive[e]
                    and self.edge_kind[e] in _COMPOSED_KINDS
                    and (self.edge_head[e] in touched or self.edge_tail[e] in touched)
                ]
                if recomposed:
                    sums = np.stack([self._composed(e) for e in recomposed])
                    edge_matrix[recomposed] = normalise_rows(sums)
            self.edge_matrix = np.ascontiguousarray(edge_matrix, dtype=np.float32)
            return len(unique)

    def _composed(self, edge: int) -> npt.NDArray[np.float32]:
        """A co-occurrence or title edge's vector before normalising: the sum of its ends' vectors."""
        return np.asarray(
            self.node_matrix[self.edge_head[edge]] + self.node_matrix[self.edge_tail[edge]], dtype=np.float32
        )

    # ------------------------------------------------------------------ networkx
    def to_networkx(self) -> Any:
        """The graph as a ``networkx.MultiGraph``.

        Nodes carry ``text`` and ``chunks``; edges carry ``relation``, ``text``, ``kind``,
        ``chunk`` and ``key`` (the edge id). Dead edges are left out.
        """
        import networkx as nx  # type: ignore[import-untyped]

        g = nx.MultiGraph()
        for n, name in enumerate(self.node_names):
            g.add_node(n, text=name, chunks=list(self.node_chunks[n]))
        for e in range(len(self.edge_head)):
            if self.edge_alive[e]:
                g.add_edge(
                    self.edge_head[e],
                    self.edge_tail[e],
                    key=e,
                    relation=self.edge_relation[e],
                    text=self.edge_text(e),
                    kind=self.edge_kind[e],
                    chunk=self.edge_chunk[e],
                )
        return g

    @classmethod
    def from_networkx(
        cls,
        graph: Any,
        dimension: int,
        *,
        node_text: str | Callable[[Any, Mapping[str, Any]], str] | None = None,
        edge_text: str | Callable[[Any, Any, Mapping[str, Any]], str] | None = None,
        node_chunks: Callable[[Any, Mapping[str, Any]], Sequence[int]] | None = None,
        edge_chunk: Callable[[Any, Any, Mapping[str, Any]], int | None] | None = None,
    ) -> KnowledgeGraph:
        """Loads any networkx graph whose nodes and edges carry some text (no schema assumed).

        Args:
            graph: A networkx ``Graph``, ``DiGraph``, ``MultiGraph`` or ``MultiDiGraph``.
            dimension: Embedding dimension.
            node_text: Node attribute holding its text, or a function ``(node, attrs) -> str``;
                default: the first of ``text``, ``name``, ``label``, ``title`` present, else
                the node key itself.
            edge_text: Edge attribute holding the relation, or ``(u, v, attrs) -> str``; default
                the first of ``relation``, ``label``, ``predicate``, ``type``, ``text``
                present, else ``"related to"``.
            node_chunks: Optional ``(node, attrs) -> chunk rows`` mapping nodes to source chunks.
            edge_chunk: Optional ``(u, v, attrs) -> chunk row or None``.

        Returns:
            The knowledge graph (not embedded yet: call :meth:`embed_missing`).

        Raises:
            TypeError: ``graph`` is not a networkx graph.
            ValueError: Two nodes have texts that normalise to the same name is fine (they merge);
                a node whose text is empty is an error.
        """
        if not (hasattr(graph, "nodes") and hasattr(graph, "edges") and hasattr(graph, "is_multigraph")):
            raise TypeError(f"expected a networkx graph, got {type(graph).__name__}")
        kg = cls(dimension)
        text_of = _node_text_getter(node_text)
        relation_of = _edge_text_getter(edge_text)
        ids: dict[Any, int] = {}
        for node, attrs in graph.nodes(data=True):
            text = text_of(node, attrs)
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"node {node!r} has no text; pass node_text= naming its text attribute")
            chunks = list(node_chunks(node, attrs)) if node_chunks is not None else []
            nid = kg.add_node(text)
            if nid is None:
                raise ValueError(f"node {node!r} has a text with no letters or digits: {text!r}")
            for c in chunks:
                kg.add_node(text, int(c))
            ids[node] = nid
        edges = graph.edges(data=True, keys=True) if graph.is_multigraph() else graph.edges(data=True)
        for item in edges:
            u, v, attrs = item[0], item[1], item[-1]
            relation = relation_of(u, v, attrs)
            chunk = edge_chunk(u, v, attrs) if edge_chunk is not None else None
            if ids[u] == ids[v]:
                continue
            spelt = (kg.node_names[ids[u]], kg.node_names[ids[v]])
            kg._add_edge(
                ids[u], ids[v], spelt, str(relation), "graph", _NO_CHUNK if chunk is None else int(chunk)
            )
        kg._changed()
        return kg

    # ------------------------------------------------------------------ persistence
    def to_files(self, prefix: str = "kg.") -> dict[str, bytes]:
        """The graph as named byte blobs for :func:`core.persist.save_index` (no pickle)."""
        with self._lock:
            nodes_index, edges_index = self.anchor_indexes(self._anchor_exact_below)
            chunk_offsets = np.zeros(self.num_nodes + 1, dtype=np.int64)
            chunk_offsets[1:] = np.cumsum([len(c) for c in self.node_chunks])
            flat = np.asarray([r for rows in self.node_chunks for r in rows], dtype=np.int64)
            return {
                f"{prefix}graph.bin": self.graph.to_bytes(),
                f"{prefix}nodes.json": json_to_bytes({"names": self.node_names, "keys": self._node_keys()}),
                f"{prefix}stale_names.npy": array_to_bytes(
                    np.asarray(sorted(self._stale_names), dtype=np.int64)
                ),
                f"{prefix}node_chunk_offsets.npy": array_to_bytes(chunk_offsets),
                f"{prefix}node_chunks.npy": array_to_bytes(flat),
                f"{prefix}edges.json": json_to_bytes(
                    {"relation": self.edge_relation, "kind": self.edge_kind, **self._end_names()}
                ),
                f"{prefix}name_chunk.npy": array_to_bytes(np.asarray(self._name_chunk, dtype=np.int64)),
                f"{prefix}edge_ends.npy": array_to_bytes(
                    np.asarray([self.edge_head, self.edge_tail], dtype=np.int64).reshape(2, -1)
                ),
                f"{prefix}edge_chunk.npy": array_to_bytes(np.asarray(self.edge_chunk, dtype=np.int64)),
                f"{prefix}edge_alive.npy": array_to_bytes(np.asarray(self.edge_alive, dtype=np.uint8)),
                f"{prefix}node_embeddings.npy": array_to_bytes(self.node_matrix),
                f"{prefix}edge_embeddings.npy": array_to_bytes(self.edge_matrix),
                f"{prefix}anchor_exact_below.npy": array_to_bytes(
                    np.asarray([self._anchor_exact_below], dtype=np.int64)
                ),
                **nodes_index.to_files(f"{prefix}anchor_nodes."),
                **edges_index.to_files(f"{prefix}anchor_edges."),
            }

    def _node_keys(self) -> list[str]:
        """Each node's normalised key ("" for none): a renamed node's name need not normalise to it."""
        keys = [""] * len(self.node_names)
        for key, node in self._node_index.items():
            keys[node] = key
        return keys

    def _end_names(self) -> dict[str, list[str]]:
        """Each live edge's spellings of its ends, "" where it is the node's name (saved compactly).

        A dead edge keeps no spelling.
        """
        names, alive = self.node_names, self.edge_alive
        return {
            "head_name": [
                "" if n is None or not a or n == names[h] else n
                for h, n, a in zip(self.edge_head, self.edge_head_name, alive, strict=True)
            ],
            "tail_name": [
                "" if n is None or not a or n == names[t] else n
                for t, n, a in zip(self.edge_tail, self.edge_tail_name, alive, strict=True)
            ],
        }

    @classmethod
    def from_files(cls, files: Mapping[str, FileData], dimension: int, prefix: str = "kg.") -> KnowledgeGraph:
        """Reads what :meth:`to_files` wrote, checking every size against the others.

        Raises:
            ValueError: Missing, malformed or mutually inconsistent files.
        """
        try:
            graph = Graph.from_bytes(files[f"{prefix}graph.bin"])
            nodes = json_from_bytes(files[f"{prefix}nodes.json"])
            names = [str(x) for x in nodes["names"]]
            # saved before the keys were: each node's key is its name's
            keys = (
                [str(x) for x in nodes["keys"]] if "keys" in nodes else [normalize_entity(x) for x in names]
            )
            stale = (
                array_from_bytes(files[f"{prefix}stale_names.npy"], dtype=np.int64, ndim=1)
                if f"{prefix}stale_names.npy" in files
                else np.zeros(0, dtype=np.int64)
            )
            offsets = array_from_bytes(files[f"{prefix}node_chunk_offsets.npy"], dtype=np.int64, ndim=1)
            flat = array_from_bytes(files[f"{prefix}node_chunks.npy"], dtype=np.int64, ndim=1)
            edges = json_from_bytes(files[f"{prefix}edges.json"])
            relation = [str(x) for x in edges["relation"]]
            kind = [str(x) for x in edges["kind"]]
            # saved before edges spelt their own ends: each end as its node
            head_name = [str(x) for x in edges.get("head_name", [""] * len(relation))]
            tail_name = [str(x) for x in edges.get("tail_name", [""] * len(relation))]
            name_chunk = (
                array_from_bytes(files[f"{prefix}name_chunk.npy"], dtype=np.int64, ndim=1)
                if f"{prefix}name_chunk.npy" in files
                else None  # saved before: a node's name is its first mention's (below)
            )
            ends = array_from_bytes(files[f"{prefix}edge_ends.npy"], dtype=np.int64, ndim=2)
            chunk = array_from_bytes(files[f"{prefix}edge_chunk.npy"], dtype=np.int64, ndim=1)
            alive = array_from_bytes(files[f"{prefix}edge_alive.npy"], dtype=np.uint8, ndim=1)
            node_matrix = array_view(files[f"{prefix}node_embeddings.npy"], dtype=np.float32, ndim=2)
            edge_matrix = array_view(files[f"{prefix}edge_embeddings.npy"], dtype=np.float32, ndim=2)
        except KeyError as exc:
            raise ValueError(f"the graph files are missing {exc}; rebuild the index") from exc
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"the graph files are malformed ({exc}); rebuild the index") from exc
        n, e = len(names), len(relation)
        ok = (
            offsets.shape == (n + 1,)
            and offsets[0] == 0
            and bool(np.all(np.diff(offsets) >= 0))
            and offsets[-1] == flat.size
            and len(kind) == e
            and len(head_name) == e
            and len(tail_name) == e
            and (name_chunk is None or name_chunk.shape == (n,))
            and len(keys) == n
            and (stale.size == 0 or (int(stale.min()) >= 0 and int(stale.max()) < n))
            and (name_chunk is None or n == 0 or int(name_chunk.min()) >= _NO_CHUNK)
            and ends.shape == (2, e)
            and chunk.shape == (e,)
            and alive.shape == (e,)
            and node_matrix.shape == (n, dimension)
            and edge_matrix.shape == (e, dimension)
            and (e == 0 or (int(ends.min()) >= 0 and int(ends.max()) < n))
            and graph.num_nodes == n
            and graph.num_edges == int(alive.astype(bool).sum())
            and bool(np.isfinite(node_matrix).all())
            and bool(np.isfinite(edge_matrix).all())
            and (chunk.size == 0 or int(chunk.min()) >= _NO_CHUNK)
            and (flat.size == 0 or int(flat.min()) >= 0)
        )
        if not ok:
            raise ValueError(
                "the graph files disagree with each other (sizes, ids or non-finite vectors); "
                "rebuild the index"
            )
        kg = cls(dimension)
        kg.node_names = names
        kg._node_index = {}
        for i, key in enumerate(keys):
            if key and names[i]:
                kg._node_index.setdefault(key, i)
        kg._stale_names = set(stale.tolist())
        kg.node_chunks = [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(n)]
        kg.edge_head, kg.edge_tail = ends[0].tolist(), ends[1].tolist()
        known = "head_name" in edges  # saved before: every spelling unknown (None: the node's name)
        live = alive.astype(bool).tolist()
        kg.edge_head_name = [
            ((x or names[h]) if a else "") if known else None
            for x, h, a in zip(head_name, kg.edge_head, live, strict=True)
        ]
        kg.edge_tail_name = [
            ((x or names[t]) if a else "") if known else None
            for x, t, a in zip(tail_name, kg.edge_tail, live, strict=True)
        ]
        kg._name_chunk = (
            name_chunk.tolist()
            if name_chunk is not None
            else [rows[0] if rows else _NO_CHUNK for rows in kg.node_chunks]
        )
        if not known and e:
            logger.warning(
                "bridge-rag: this BubbleRAG index was saved before each graph edge kept its own chunk's "
                "spelling of the names it joins: a filtered query may spell a name as another tenant's "
                "rows do until the index is rebuilt"
            )
        kg.edge_relation, kg.edge_kind = relation, kind
        kg.edge_chunk = chunk.tolist()
        kg.edge_alive = live
        kg.node_matrix, kg.edge_matrix = node_matrix, edge_matrix
        kg._ensure_graph()
        kg._restore_anchor_indexes(files, prefix)
        return kg

    def _restore_anchor_indexes(self, files: Mapping[str, FileData], prefix: str) -> None:
        """Adopts saved anchor indexes that cover this graph's live rows (else rebuilds later).

        An index saved before the vector indexes existed (cluster-index files) has none: its
        anchors are indexed again on first use. One saved before they left deleted rows out
        holds those rows too (their vectors blanked), which is accepted.
        """
        node_prefix, edge_prefix = f"{prefix}anchor_nodes.", f"{prefix}anchor_edges."
        if f"{node_prefix}{HEADER_FILE}" not in files and f"{edge_prefix}{HEADER_FILE}" not in files:
            return
        if f"{prefix}anchor_exact_below.npy" not in files:
            raise ValueError("the saved anchor indexes are incomplete; rebuild the index")
        exact = array_from_bytes(files[f"{prefix}anchor_exact_below.npy"], dtype=np.int64, ndim=1)
        nodes = VectorIndex.from_files(files, self.node_matrix, node_prefix)
        edges = VectorIndex.from_files(files, self.edge_matrix, edge_prefix)
        if (
            exact.shape != (1,)
            or not 0 <= int(exact[0]) < 2**62
            or not _covers(nodes.rows, self._named_rows(0), np.arange(self.node_matrix.shape[0]))
            or not _covers(edges.rows, self._relation_rows(0), self._relation_rows(0, dead=True))
        ):
            raise ValueError("the saved anchor indexes do not match the graph; rebuild the index")
        self._anchor_indexes = (nodes, edges)
        self._anchor_node_rows, self._anchor_edge_rows = self.node_matrix.shape[0], self.edge_matrix.shape[0]
        self._anchor_exact_below = int(exact[0])

    def memory_bytes(self) -> int:
        """Approximate bytes held (vectors, graph, lists)."""
        approx_lists = 64 * (self.num_nodes + len(self.edge_head))
        indexes = sum(i.memory_bytes() for i in self._anchor_indexes or ())
        return int(
            self.node_matrix.nbytes
            + self.edge_matrix.nbytes
            + self.graph.memory_bytes()
            + approx_lists
            + indexes
        )


def _covers(rows: npt.NDArray[np.int64], live: npt.NDArray[np.int64], every: npt.NDArray[np.int64]) -> bool:
    """Whether indexed ``rows`` hold every ``live`` row and nothing outside ``every``."""
    held = np.unique(rows)
    return held.size == rows.size and bool(np.isin(live, held).all() and np.isin(held, every).all())


def _node_text_getter(spec: str | Callable[[Any, Mapping[str, Any]], str] | None) -> Callable[..., Any]:
    if callable(spec):
        return spec
    if isinstance(spec, str):
        return lambda node, attrs: attrs.get(spec)
    keys = ("text", "name", "label", "title")
    return lambda node, attrs: next((attrs[k] for k in keys if isinstance(attrs.get(k), str)), str(node))


def _edge_text_getter(spec: str | Callable[[Any, Any, Mapping[str, Any]], str] | None) -> Callable[..., Any]:
    if callable(spec):
        return spec
    if isinstance(spec, str):
        return lambda u, v, attrs: str(attrs.get(spec, "related to"))
    keys = ("relation", "label", "predicate", "type", "text")
    return lambda u, v, attrs: next((str(attrs[k]) for k in keys if attrs.get(k) is not None), "related to")
