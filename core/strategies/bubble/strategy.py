"""BubbleRAG: evidence-subgraph retrieval over a knowledge graph, with or without an LLM.

Paper: "BubbleRAG: Evidence-Driven Retrieval-Augmented Generation for Black-Box Knowledge
Graphs" (no public code; built from the method).

Build: documents are chunked and embedded into Chroma (as for Bridge-RAG); a knowledge graph
is extracted from the chunks (:mod:`core.strategies.bubble.triples`: spaCy subject-verb-object
and co-occurrence triples by default, an LLM's JSON triples when one is given), entities are
merged by normalised name, and every node and edge is embedded
(:mod:`core.strategies.bubble.kg`). A graph can also come from networkx with no schema at all
(:meth:`BubbleRAG.from_networkx`).

Query (the paper's steps):

1. Semantic anchor grouping: the query's concepts with weights (:mod:`core.strategies.bubble.concepts`); for
   each, its ``anchors`` most similar nodes and edges (and an exact name match) form a group.
   Node and relation-edge vectors sit in vector indexes (:mod:`core.vector_index`: faiss
   HNSW graphs, searched with the allowed nodes and live edges as a predicate), so anchoring
   costs about log(graph size); sets smaller than ``anchor_exact_below`` are scanned exactly.
2. Localise: the ``hops``-hop neighbourhood of all anchors, at most ``max_local_nodes`` nodes,
   so the cost of a query does not grow with the graph.
3. Bubble expansion in C++ (:meth:`core.native.graph.Graph.bubble`): multi-source Dijkstra from every
   group at once over edge costs ``1 - cos(query, edge)``; where frontiers of different groups
   meet, their low-cost paths fuse into a candidate evidence graph (CEG); within-group
   connections pay a penalty; anchors alone are the fallback.
4. CEGs are ranked by the mean cost of their elements plus ``alpha`` times the weight share
   of the concept groups they leave uncovered; the best ``top_cegs`` are kept.
5. With an LLM only: reasoning-aware expansion; the LLM picks useful frontier facts of the
   kept CEGs, up to ``llm_depth`` rounds or ``llm_time_budget_s`` seconds.
6. Context: the CEGs' elements map to their source chunks; chunks are ranked by cosine
   similarity plus ``evidence_weight`` times their CEG evidence (a small exact dense pool
   keeps recall when the graph misses), and the CEG triples come along as metadata (or as
   one extra ``evidence_graph`` result with ``include_triples=True``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from core.embed import Embedder, embed_query_with
from core.filters import FilterError, MetadataFilter
from core.llm import LLM, LLMOutputError, as_llm, complete_json
from core.native.scoring import top_k_cosine
from core.persist import FileData, array_to_bytes, array_view, json_from_bytes, json_to_bytes
from core.store import ChunkStore
from core.strategies.base import (
    COMMON_PROVENANCE_KEYS,
    check_query,
)
from core.strategies.bubble.blas import single_threaded_blas
from core.strategies.bubble.concepts import Concept, TermStatistics, dedupe, llm_concepts, spacy_concepts
from core.strategies.bubble.kg import KnowledgeGraph
from core.strategies.bubble.triples import Triple, TripleExtractor, default_triple_extractor
from core.strategies.common import (
    check_query_vector,
    embed_in_batches,
    fit_mask,
    normalise_rows,
    timed,
)
from core.strategies.config import ChunkingConfig, StrategyConfig
from core.strategies.direct import DirectConfig, DirectEvidence
from core.strategies.entity_links import (
    HopConfig,
    Reached,
    cover_named,
    hop_provenance,
    keep_confident,
    links_files,
    links_from_files,
)
from core.strategies.follow import follows_writer
from core.strategies.lifecycle import ChunkedIndex
from core.strategies.subjects import unit_subjects
from core.strategies.table import ChunkRows, ChunkTable, stored_rows
from core.strategies.workers import map_texts
from core.text import make_doc_id
from core.types import Document, Retrieved
from core.vector_index import DEFAULT_EXACT_BELOW

__all__ = ["BubbleConfig", "BubbleRAG", "EvidenceGraph"]

FloatMatrix = npt.NDArray[np.float32]
INDEX_VERSION = 2  # 2: entity links over the chunks (the hop walk)
_KIND_NAMES = ("meeting", "within-group", "anchors")
_MAX_NODE_CHUNKS = 20  # a node mentioned in more chunks than this lends them no evidence
_TITLE_EDGES = 12
_CONCEPT_CACHE = 4096  # concept vectors kept between queries


@dataclass(frozen=True)
class BubbleConfig(StrategyConfig, ChunkingConfig, HopConfig, DirectConfig):
    """Settings of a BubbleRAG index.

    The entity-hop walk over the chunks' graph entities, seeded by the chunks the evidence
    graphs rank best (``link_hops=0`` turns it off), is set by
    its :class:`~core.strategies.entity_links.HopConfig` fields
    (``link_hops``, ``hop_seeds``, ...), documented there; a chunk's direct evidence (its
    lexical evidence beside the cosine: ``lexical_weight``, ``lexical_pool``) by
    :class:`~core.strategies.direct.DirectConfig`.

    ``k`` (the default number of results) and ``max_query_chars`` (the longest accepted
    query) are every strategy's: :class:`~core.strategies.config.StrategyConfig`.

    Attributes:
        chunk_size: Largest chunk, in characters (chunks keep whole sentences); None = what
            fits the embedder's input window (:func:`core.embed.window_chars`).
        chunk_overlap: Characters of trailing sentences repeated in the next chunk.
        cooccurrence: Link the named entities of each sentence (besides SVO triples).
        title_edges: Link a chunk's ``metadata["title"]`` to the names in its triples.
        max_concepts: Most query concepts besides the whole query.
        anchors: m, the most similar nodes (and, separately, edges) per concept.
        min_anchor_similarity: Anchors below this cosine similarity are dropped.
        anchor_ef_search: Candidate list size of the anchor search's HNSW graphs; None = the
            index's defaults (96, or 256 under a filter; see :mod:`core.vector_index`).
        anchor_exact_below: Node or edge sets smaller than this are searched exactly.
        hops: h, the localisation radius around the anchors.
        max_local_nodes: Cap of the localised neighbourhood.
        max_cegs: B, the CEG budget of the bubble expansion.
        top_cegs: n, CEGs kept after ranking.
        alpha: Weight of the uncovered-concept penalty in the CEG ranking.
        max_path_cost: Paths costlier than this stop expanding.
        within_group_penalty: Cost factor (1 + penalty) of CEGs joining one concept's anchors.
        evidence_weight: Weight of the CEG evidence added to a chunk's cosine score.
        dense_pool: Nearest chunks (exact scan) added to the candidates; 0 = none (the
            default: the evidence graphs and the walk choose the candidates; the nearest
            chunks only fill the results when they find fewer than k).
        llm_depth: Rounds of LLM frontier expansion (only with an LLM).
        llm_frontier: Frontier facts shown to the LLM per round.
        llm_time_budget_s: Time budget of the LLM expansion per query.
    """

    cooccurrence: bool = True
    title_edges: bool = True
    max_concepts: int = 6
    anchors: int = 3
    min_anchor_similarity: float = 0.35
    anchor_ef_search: int | None = None
    anchor_exact_below: int = DEFAULT_EXACT_BELOW
    hops: int = 6
    max_local_nodes: int = 1000
    max_cegs: int = 10
    top_cegs: int = 3
    alpha: float = 1.0
    max_path_cost: float = 4.0
    within_group_penalty: float = 0.5
    evidence_weight: float = 0.1
    dense_pool: int = 0
    llm_depth: int = 2
    llm_frontier: int = 15
    llm_time_budget_s: float = 20.0

    finite_floats: ClassVar[bool] = True

    def checks(self) -> list[tuple[str, bool]]:
        """BubbleRAG's range checks."""
        return [
            *self.chunking_checks(),
            ("max_concepts must be >= 0", self.max_concepts >= 0),
            ("anchors must be >= 1", self.anchors >= 1),
            ("min_anchor_similarity must be in [-1, 1]", -1.0 <= self.min_anchor_similarity <= 1.0),
            (
                "anchor_ef_search must be None or in 1..4096",
                self.anchor_ef_search is None or 1 <= self.anchor_ef_search <= 4096,
            ),
            ("anchor_exact_below must be >= 0", self.anchor_exact_below >= 0),
            ("hops must be >= 0", self.hops >= 0),
            ("max_local_nodes must be >= 1", self.max_local_nodes >= 1),
            ("max_cegs must be >= 1", self.max_cegs >= 1),
            ("top_cegs must be >= 1", self.top_cegs >= 1),
            (
                "alpha, max_path_cost, within_group_penalty, evidence_weight, llm_time_budget_s must be >= 0",
                min(
                    self.alpha,
                    self.max_path_cost,
                    self.within_group_penalty,
                    self.evidence_weight,
                    self.llm_time_budget_s,
                )
                >= 0,
            ),
            ("dense_pool must be >= 0", self.dense_pool >= 0),
            ("llm_depth and llm_frontier must be >= 0", self.llm_depth >= 0 and self.llm_frontier >= 0),
            *self.hop_checks(),
            *self.direct_checks(),
        ]


@dataclass
class EvidenceGraph:
    """One candidate evidence graph (CEG), as returned by :meth:`BubbleRAG.evidence_graphs`.

    Attributes:
        nodes: Node ids.
        edges: Edge ids (of :class:`core.strategies.bubble.kg.KnowledgeGraph`).
        score: Ranking score (lower is better).
        mean_cost: Mean semantic cost of its elements.
        covered: Concepts it connects.
        kind: ``meeting`` (groups joined), ``within-group`` or ``anchors`` (fallback).
        expanded_edges: Edges the LLM added in the reasoning-aware expansion.
    """

    nodes: list[int]
    edges: list[int]
    score: float
    mean_cost: float
    covered: list[str]
    kind: str
    expanded_edges: list[int] = field(default_factory=list)


class BubbleRAG(ChunkedIndex):
    """The BubbleRAG strategy (framework-neutral).

    Build with :meth:`from_documents` (a new corpus), :meth:`from_store` (the chunks already in
    a Chroma collection), :meth:`from_networkx` (an existing graph) or :meth:`load`; query with
    :meth:`retrieve`. Adapters: ``langchain_bridge.BubbleRetriever`` and
    ``llama_index_bridge.BubbleRetriever``.

    Its models, keywords of ``from_documents`` / ``from_store`` / ``load``:
    ``triple_extractor`` (a :class:`TripleExtractor`; default spaCy, or the LLM when given)
    and ``llm`` (an optional LangChain / LlamaIndex LLM: triples, concepts and expansion use
    it). Any other keyword is a :class:`BubbleConfig` field.

    Example:
        >>> rag = BubbleRAG.from_documents(docs, persist_directory="./bubble_index")  # doctest: +SKIP
        >>> for r in rag.retrieve("Who married the founder of the observatory?", k=3):  # doctest: +SKIP
        ...     print(r.metadata["evidence_triples"])
    """

    name: ClassVar[str] = "bubble"
    label: ClassVar[str] = "BubbleRAG"
    index_version: ClassVar[int] = INDEX_VERSION
    default_collection: ClassVar[str] = "bubble_rag"
    config_type: ClassVar[type[StrategyConfig]] = BubbleConfig
    model_options: ClassVar[tuple[str, ...]] = ("triple_extractor", "llm")
    queries_use_spacy: ClassVar[bool] = True  # the query's concepts
    store: ChunkStore | None
    config: BubbleConfig
    provenance_keys: ClassVar[frozenset[str]] = COMMON_PROVENANCE_KEYS | {
        "cosine",
        "lexical_score",
        "evidence",
        "ceg_rank",
        "ceg_kind",
        "ceg_count",
        "covered_concepts",
        "evidence_triples",
        "concepts",
        "nodes",
        "hop",
        "hop_score",
        "hop_entities",
    }

    def __init__(
        self,
        store: ChunkStore | None,
        embedder: Embedder,
        *,
        config: BubbleConfig | None = None,
        triple_extractor: TripleExtractor | None = None,
        llm: Any = None,
        show_progress: bool = False,
    ) -> None:
        self._init_shared(store, embedder, config, show_progress)
        self.llm: LLM | None = as_llm(llm)
        self._triple_extractor = triple_extractor
        self.kg = KnowledgeGraph(embedder.dimension)
        self.terms = TermStatistics()
        self._nlp: Any = None
        self._concept_cache: dict[str, FloatMatrix] = {}

    # ------------------------------------------------------------------ properties
    @property
    def default_options(self) -> dict[str, Any]:
        """The ``retrieve`` options' defaults (adapters show them as their fields' values)."""
        return {"include_triples": False}

    def to_networkx(self) -> Any:
        """The knowledge graph as a ``networkx.MultiGraph``."""
        return self.kg.to_networkx()

    @property
    def triple_extractor(self) -> TripleExtractor:
        """The triple extractor (spaCy by default; loaded on first use)."""
        if self._triple_extractor is None:
            self._triple_extractor = default_triple_extractor(self.llm, show_progress=self.show_progress)
        return self._triple_extractor

    # ------------------------------------------------------------------ construction
    def _index_stored(self) -> None:
        assert self.store is not None
        rows, vectors = stored_rows(self.store, self.embedder.dimension, ordered=False)
        self._extend(rows, vectors, first_build=True)

    @classmethod
    def from_networkx(
        cls,
        graph: Any,
        *,
        embedder: Any = None,
        documents: Sequence[Document] | None = None,
        node_text: Any = None,
        edge_text: Any = None,
        chunk_attribute: str = "chunk",
        config: BubbleConfig | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **config_overrides: Any,
    ) -> BubbleRAG:
        """Uses an existing networkx graph, with no schema assumed (the black-box case).

        Args:
            graph: Any networkx graph whose nodes and edges carry text (see
                :meth:`core.strategies.bubble.kg.KnowledgeGraph.from_networkx` for how the text is found).
            embedder: The embedder for node, edge and query vectors.
            documents: Optional source documents, one chunk each; an edge attribute
                ``chunk_attribute`` holding a document's position (or id) maps the edge to it, and
                a node attribute of the same name (an int or a list) maps the node.
            node_text: Node text attribute or function (default: text/name/label/title).
            edge_text: Edge relation attribute or function (default: relation/label/...).
            chunk_attribute: The attribute naming source documents.
            config: Settings; keyword overrides apply on top.
            llm: Optional LLM for concepts and expansion.
            show_progress: Show progress bars.
            **config_overrides: :class:`BubbleConfig` fields.

        Returns:
            The strategy. Without ``documents`` each result is one evidence graph, its
            triples as the text.
        """
        rag = cls._create(None, embedder, config, show_progress, {"llm": llm, **config_overrides})
        emb = rag.embedder
        docs = list(documents or [])
        position: dict[str, int] = {}
        for i, doc in enumerate(docs):
            if not isinstance(doc, Document):
                raise TypeError(f"documents[{i}] is a {type(doc).__name__}; pass core.types.Document objects")
            position[doc.id if doc.id is not None else make_doc_id(doc.text)] = i

        def to_row(value: Any) -> int | None:
            if isinstance(value, bool) or value is None:
                return None
            if isinstance(value, int):
                if not 0 <= value < len(docs):
                    raise ValueError(f"{chunk_attribute}={value} is not a position in documents")
                return value
            return position.get(str(value))

        def node_rows(node: Any, attrs: Mapping[str, Any]) -> list[int]:
            value = attrs.get(chunk_attribute)
            values = value if isinstance(value, list | tuple) else [value]
            return [r for r in (to_row(v) for v in values) if r is not None]

        with timed(rag.report, "graph"):
            rag.kg = KnowledgeGraph.from_networkx(
                graph,
                emb.dimension,
                node_text=node_text,
                edge_text=edge_text,
                node_chunks=node_rows if docs else None,
                edge_chunk=(lambda u, v, a: to_row(a.get(chunk_attribute))) if docs else None,
            )
        if docs:
            texts = [d.text for d in docs]
            with timed(rag.report, "embed chunks"):
                vectors = embed_in_batches(emb, texts, show_progress=show_progress)
            rows = ChunkRows(
                ids=[f"{did}::0" for did in position],
                doc_ids=list(position),
                texts=texts,
                metadatas=[dict(d.metadata) for d in docs],
            )
            rag._table.append(rows, normalise_rows(vectors))
            rag.terms.add(texts)
        else:
            rag.terms.add(rag.kg.node_names)
        with timed(rag.report, "embed graph"):
            rag.kg.embed_missing(emb, show_progress=show_progress)
        with timed(rag.report, "anchor index"):
            rag.kg.anchor_indexes(rag.config.anchor_exact_below)
        rag._count()
        return rag

    # ------------------------------------------------------------------ updates
    def _check_writable(self, what: str) -> None:
        self._require_store(what)

    def _forget_rows(self, rows: Sequence[int]) -> None:
        """Deleted chunks leave the graph, the term counts and the entity links."""
        self.kg.remove_chunks(list(rows))
        self.terms.remove(self._table.texts[r] for r in rows)
        self._links = self._links.without_units(~self._table.alive)
        self._count()

    def _after_change(self) -> None:
        """Graph nodes a delete renamed are embedded under their new names (a few model calls)."""
        if self.kg.has_stale_names:
            self.kg.embed_missing(self.embedder)

    def _require_store(self, what: str) -> ChunkStore:
        if self.store is None:
            raise ValueError(f"{what} needs a Chroma store; this index was built from a graph alone")
        return self.store

    # ------------------------------------------------------------------ query
    @follows_writer
    def retrieve(
        self,
        query: str,
        k: int | None = None,
        *,
        include_triples: bool = False,
        filter: Mapping[str, Any] | MetadataFilter | None = None,
        **options: Any,
    ) -> list[Retrieved]:
        """Retrieves the chunks behind the best evidence graphs for ``query``.

        Args:
            query: The question.
            k: Number of chunks (default ``config.k``).
            include_triples: Also return the serialised triples of the kept evidence graphs
                as one extra result (``metadata["type"] == "evidence_graph"``), when they hold any.
            filter: A metadata filter in Chroma's ``where`` syntax (:mod:`core.filters`) over
                the chunks: only nodes mentioned by a chunk that passes it and edges from
                such chunks take part (anchors, bubble expansion, LLM expansion), and only
                passing chunks are ranked (evidence, the walk, the dense pool and top-up).
            **options: Unknown options raise TypeError.

        Returns:
            Chunks, best first, with provenance: ``found_by`` (``evidence`` or ``dense``),
            ``ceg_rank``, ``evidence_triples``, ``concepts`` (the query's, with weights),
            ``covered_concepts``, ``score`` and its parts (``cosine``, ``evidence``),
            ``fallback`` and ``doc_id``.

        Raises:
            TypeError: ``query`` is not a str, ``k`` not an int, or an unknown option.
            ValueError: Empty or over-long query, or ``k`` < 1.
        """
        text, k, flt = self._query_args(query, k, filter, options)
        concepts = self._concepts(text)
        missing = self._unembedded(concepts)
        qv, vectors = embed_query_with(self.embedder, text, missing)
        qv = check_query_vector(qv, self.kg.dimension)
        known = dict(zip(missing, normalise_rows(vectors), strict=True)) if missing else {}
        return self._retrieve(
            text, _unit(qv), k, concepts, known, include_triples=bool(include_triples), flt=flt
        )

    @follows_writer
    def retrieve_by_vector(
        self,
        query: str,
        query_vector: Any,
        k: int | None = None,
        *,
        include_triples: bool = False,
        filter: Mapping[str, Any] | MetadataFilter | None = None,
        **options: Any,
    ) -> list[Retrieved]:
        """:meth:`retrieve` with the query embedding already computed (benchmarks use this).

        Concepts that name no graph node are embedded here (the query itself is not).

        Raises:
            TypeError: ``k`` is not an int, or an unknown option.
            ValueError: The query vector does not have the index's dimension or is not finite.
        """
        text, k, flt = self._query_args(query, k, filter, options)
        qv = _unit(check_query_vector(query_vector, self.kg.dimension))
        return self._retrieve(text, qv, k, self._concepts(text), {}, include_triples=include_triples, flt=flt)

    def _check_filter(self, filter: Mapping[str, Any] | MetadataFilter | None) -> MetadataFilter | None:
        """The parsed filter; an index without chunks (a bare graph) cannot honour one."""
        flt = super()._check_filter(filter)
        if flt is not None and not self._table.ids:
            raise FilterError(
                "this BubbleRAG index was built from a graph alone: it has no chunks, so no chunk "
                "metadata to filter on; build it from documents (or pass documents= to from_networkx)"
            )
        return flt

    def _retrieve(
        self,
        text: str,
        qv: FloatMatrix,
        k: int,
        concepts: list[Concept],
        known: Mapping[str, FloatMatrix],
        *,
        include_triples: bool,
        flt: MetadataFilter | None = None,
    ) -> list[Retrieved]:
        live = self._table.live_mask(flt)
        within = self.kg.chunk_masks(live) if flt is not None else None
        if within is not None and not live.any():
            return []
        cegs, fallback = self._search(text, qv, concepts, known, within)
        if self._table.ids:
            out = self._rank_chunks(text, qv, k, concepts, cegs, fallback, live)
        else:
            out = [self._ceg_result(i, c, concepts) for i, c in enumerate(cegs[:k])]
        evidence = self._evidence_result(cegs, concepts) if include_triples else None
        return out if evidence is None else [*out, evidence]

    @follows_writer
    def evidence_graphs(
        self, query: str, *, filter: Mapping[str, Any] | MetadataFilter | None = None
    ) -> list[EvidenceGraph]:
        """The kept candidate evidence graphs of a query, best first (for inspection)."""
        text = check_query(query, self.config.max_query_chars)
        flt = self._check_filter(filter)
        within = self.kg.chunk_masks(self._table.live_mask(flt)) if flt is not None else None
        qv = _unit(self.embedder.embed_query(text))
        return self._search(text, qv, self._concepts(text), {}, within)[0]

    def _search(
        self,
        text: str,
        qv: FloatMatrix,
        concepts: list[Concept],
        known: Mapping[str, FloatMatrix],
        within: tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]] | None = None,
    ) -> tuple[list[EvidenceGraph], str | None]:
        cfg, kg = self.config, self.kg
        if kg.num_nodes == 0:
            return [], "empty-graph"
        vectors = self._concept_vectors(concepts, qv, known)
        with single_threaded_blas():  # small products next to a model: see core.strategies.bubble.blas
            groups, seeds = self._anchors(concepts, vectors, within)
            if not seeds:
                return [], "no-anchors"
            graph = kg.graph
            native = kg.native_edge_ids()
            heads, tails = kg.native_ends()
            seed_nodes = np.asarray([s[0] for s in seeds], dtype=np.int64)
            local = graph.localize(np.unique(seed_nodes), cfg.hops, cfg.max_local_nodes)
            allowed = np.zeros(kg.num_nodes, dtype=np.uint8)
            allowed[local] = 1 if within is None else within[0][local]
            if not allowed[seed_nodes].all():  # more anchors than max_local_nodes: keep those inside
                groups = [kept for kept in ([i for i in g if allowed[seeds[i][0]]] for g in groups) if kept]
                if not groups:
                    return [], "no-anchors"
            node_cost = np.ones(kg.num_nodes, dtype=np.float32)
            node_cost[local] = np.clip(1.0 - kg.node_matrix[local] @ qv, 0.0, 2.0)
            edge_cost = np.ones(len(native), dtype=np.float32)
            inside = np.flatnonzero(allowed[heads].astype(bool) & allowed[tails].astype(bool))
            edge_cost[inside] = np.clip(1.0 - kg.edge_matrix[native[inside]] @ qv, 0.0, 2.0)
            if within is not None:  # an edge from a chunk outside the filter is never walked
                edge_cost[~within[1][native]] = np.inf
            to_native = kg.to_native()
            offsets = np.zeros(len(groups) + 1, dtype=np.int64)
            offsets[1:] = np.cumsum([len(g) for g in groups])
            ordered = [seeds[i] for g in groups for i in g]
            res = graph.bubble(
                offsets,
                np.asarray([s[0] for s in ordered], dtype=np.int64),
                np.asarray([to_native[s[1]] if s[1] >= 0 else -1 for s in ordered], dtype=np.int64),
                np.asarray([s[2] for s in ordered], dtype=np.float32),
                node_cost,
                edge_cost,
                allowed,
                np.asarray(
                    [concepts[s[3]].weight for s in (ordered[g[0]] for g in _firsts(groups))], np.float32
                ),
                cfg.alpha,
                cfg.max_cegs,
                cfg.max_path_cost,
                cfg.within_group_penalty,
            )
        group_concepts = [concepts[ordered[g[0]][3]].text for g in _firsts(groups)]
        cegs: list[EvidenceGraph] = []
        for c in range(min(cfg.top_cegs, len(res["score"]))):
            nodes = res["nodes"][res["node_offsets"][c] : res["node_offsets"][c + 1]]
            edges = res["edges"][res["edge_offsets"][c] : res["edge_offsets"][c + 1]]
            mask = int(res["covered"][c])
            cegs.append(
                EvidenceGraph(
                    nodes=nodes.tolist(),
                    edges=native[edges].tolist(),
                    score=float(res["score"][c]),
                    mean_cost=float(res["mean_cost"][c]),
                    covered=[t for g, t in enumerate(group_concepts) if mask >> g & 1],
                    kind=_KIND_NAMES[int(res["kind"][c])],
                )
            )
        if self.llm is not None and cegs and cfg.llm_depth > 0:
            self._expand_with_llm(text, qv, cegs, None if within is None else within[1])
        fallback = "anchors-only" if cegs and all(c.kind == "anchors" for c in cegs) else None
        return cegs, fallback

    def _concepts(self, text: str) -> list[Concept]:
        cfg = self.config
        if self.llm is not None:
            found = llm_concepts(text, self.llm, max_concepts=cfg.max_concepts)
            if found is not None:
                return dedupe(found)
        return dedupe(spacy_concepts(text, self._query_nlp(), self.terms, max_concepts=cfg.max_concepts))

    def _query_nlp(self) -> Any:
        if self._nlp is None:
            extractor = self.triple_extractor
            nlp = getattr(extractor, "nlp", None) or getattr(
                getattr(extractor, "fallback", None), "nlp", None
            )
            if nlp is None:
                from core.strategies.bubble.triples import SpacyTripleExtractor

                nlp = SpacyTripleExtractor().nlp
            self._nlp = nlp
        return self._nlp

    def _unembedded(self, concepts: list[Concept]) -> list[str]:
        """Concept texts that need the model: no node of that name, not cached."""
        kg = self.kg
        out = []
        for c in concepts:
            if c.kind == "query" or c.text in self._concept_cache:
                continue
            node = kg.node_id(c.text)
            if node is None or node >= kg.node_matrix.shape[0]:
                out.append(c.text)
        return list(dict.fromkeys(out))

    def _concept_vectors(
        self, concepts: list[Concept], qv: FloatMatrix, known: Mapping[str, FloatMatrix]
    ) -> FloatMatrix:
        """One unit vector per concept.

        The whole query uses the query vector; a concept that names a node uses the node's
        vector (embedded from the same words); the others are embedded in one batched call
        and cached between queries.
        """
        kg = self.kg
        out = np.zeros((len(concepts), qv.shape[0]), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        for i, c in enumerate(concepts):
            node = kg.node_id(c.text) if c.kind != "query" else None
            if c.kind == "query":
                out[i] = qv
            elif node is not None and node < kg.node_matrix.shape[0]:
                out[i] = kg.node_matrix[node]
            elif c.text in known:
                out[i] = known[c.text]
            elif c.text in self._concept_cache:
                out[i] = self._concept_cache[c.text]
            else:
                missing.setdefault(c.text, []).append(i)
        fresh = dict(known)
        if missing:
            texts = list(missing)
            vectors = normalise_rows(self.embedder.embed_documents(texts))
            for text, v in zip(texts, vectors, strict=True):
                fresh[text] = v
                out[missing[text]] = v
        if fresh:
            with self._lock:
                if len(self._concept_cache) + len(fresh) > _CONCEPT_CACHE:
                    self._concept_cache.clear()
                self._concept_cache.update(fresh)
        return out

    def _anchors(
        self,
        concepts: list[Concept],
        vectors: FloatMatrix,
        within: tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]] | None = None,
    ) -> tuple[list[list[int]], list[tuple[int, int, float, int]]]:
        """Anchor groups: per concept, seed indices into (node, edge or -1, cost, concept).

        With ``within`` (the nodes and edges a metadata filter allows) only those anchor.
        """
        cfg, kg = self.config, self.kg
        node_index, edge_index = kg.anchor_indexes(cfg.anchor_exact_below)
        node_matrix, edge_matrix = kg.node_matrix, kg.edge_matrix
        m, ef = cfg.anchors, cfg.anchor_ef_search
        node_ok = None if within is None else within[0]
        nodes_in = None if node_ok is None else fit_mask(node_ok, node_matrix.shape[0])
        edge_ok = fit_mask(kg.live_edges, edge_matrix.shape[0])
        if within is not None:
            edge_ok = edge_ok & fit_mask(within[1], edge_matrix.shape[0])
        node_ids, node_sims = node_index.search(vectors, node_matrix, m, allowed=nodes_in, ef_search=ef)
        edge_ids, edge_sims = edge_index.search(vectors, edge_matrix, m, allowed=edge_ok, ef_search=ef)
        seeds: list[tuple[int, int, float, int]] = []
        groups: list[list[int]] = []
        for ci, concept in enumerate(concepts):
            group: list[int] = []
            picked: set[int] = set()
            exact = kg.node_id(concept.text) if concept.kind != "query" else None
            if exact is not None and (node_ok is None or node_ok[exact]):
                picked.add(exact)
                group.append(len(seeds))
                seeds.append((exact, -1, 0.0, ci))
            for n, sim in zip(node_ids[ci].tolist(), node_sims[ci].tolist(), strict=True):
                if n >= 0 and sim >= cfg.min_anchor_similarity and n not in picked:
                    picked.add(n)
                    group.append(len(seeds))
                    seeds.append((n, -1, max(0.0, 1.0 - sim), ci))
            for e, sim in zip(edge_ids[ci].tolist(), edge_sims[ci].tolist(), strict=True):
                if e >= 0 and sim >= cfg.min_anchor_similarity:
                    cost = max(0.0, 1.0 - sim)
                    for end in (kg.edge_head[e], kg.edge_tail[e]):
                        if node_ok is None or node_ok[end]:
                            group.append(len(seeds))
                            seeds.append((end, e, cost, ci))
            if group:
                groups.append(group)
        return groups, seeds

    def _expand_with_llm(
        self,
        text: str,
        qv: FloatMatrix,
        cegs: list[EvidenceGraph],
        edge_ok: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """Reasoning-aware expansion: the LLM picks useful frontier facts, round by round.

        With ``edge_ok`` (a metadata filter's edges) only those edges are offered.
        """
        assert self.llm is not None
        cfg, kg = self.config, self.kg
        deadline = time.monotonic() + cfg.llm_time_budget_s
        graph = kg.graph
        native = kg.native_edge_ids()
        for _ in range(cfg.llm_depth):
            if time.monotonic() > deadline:
                break
            inside_nodes = {n for c in cegs for n in c.nodes}
            inside_edges = {e for c in cegs for e in [*c.edges, *c.expanded_edges]}
            frontier: dict[int, int] = {}
            for n in sorted(inside_nodes):
                _, nbr_edges = graph.neighbors(n)
                for ne in nbr_edges.tolist():
                    e = int(native[ne])
                    if e not in inside_edges and (edge_ok is None or edge_ok[e]):
                        frontier.setdefault(e, n)
            if not frontier:
                break
            cand = np.asarray(list(frontier), dtype=np.int64)
            sims = kg.edge_matrix[cand] @ qv
            cand = cand[np.lexsort((cand, -sims))][: cfg.llm_frontier]
            known = "\n".join(f"- {kg.edge_text(e)}" for e in sorted(inside_edges))
            options = "\n".join(f"[{i}] {kg.edge_text(int(e))}" for i, e in enumerate(cand))
            prompt = (
                f"Question: {text}\n\nEvidence so far:\n{known}\n\nCandidate facts:\n{options}\n\n"
                'Which candidate facts help answer the question? Answer with a JSON object {"useful": '
                "[indices]}; an empty list when none helps."
            )
            try:
                answer = complete_json(self.llm, prompt, expect=dict)
            except LLMOutputError:
                break
            picks = answer.get("useful") if isinstance(answer, dict) else None
            if not isinstance(picks, list):
                break
            chosen = sorted(
                {
                    int(i)
                    for i in picks
                    if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(cand)
                }
            )
            if not chosen:
                break
            for i in chosen:
                e = int(cand[i])
                owner = frontier[e]
                target = next((c for c in cegs if owner in c.nodes), cegs[0])
                target.expanded_edges.append(e)
                for end in (kg.edge_head[e], kg.edge_tail[e]):
                    if end not in target.nodes:
                        target.nodes.append(end)

    # ------------------------------------------------------------------ context
    def _rank_chunks(
        self,
        text: str,
        qv: FloatMatrix,
        k: int,
        concepts: list[Concept],
        cegs: list[EvidenceGraph],
        fallback: str | None,
        live: npt.NDArray[np.bool_] | None = None,
    ) -> list[Retrieved]:
        cfg, kg = self.config, self.kg
        alive = self._table.alive if live is None else live
        if not alive.any():
            return []
        evidence: dict[int, tuple[float, int]] = {}
        triples: dict[int, list[str]] = {}
        for rank, ceg in enumerate(cegs):
            weight = 1.0 / (1 + rank)
            for e in [*ceg.edges, *ceg.expanded_edges]:
                row = kg.edge_chunk[e]
                if 0 <= row < len(alive) and alive[row]:
                    if row not in evidence or evidence[row][0] < weight:
                        evidence[row] = (weight, rank)
                    triples.setdefault(row, []).append(kg.edge_text(e))
            for n in ceg.nodes:
                rows = kg.node_chunks[n]
                if len(rows) <= _MAX_NODE_CHUNKS:
                    for row in rows:
                        if 0 <= row < len(alive) and alive[row] and row not in evidence:
                            evidence[row] = (0.5 * weight, rank)
        cand = np.asarray(sorted(evidence), dtype=np.int64)
        direct = DirectEvidence(self._table, text, qv, cfg)
        # the nearest chunks: the dense pool, the fill, and the hit a simple question must keep
        near, sims = top_k_cosine(qv, self._table.matrix, np.flatnonzero(alive), max(cfg.dense_pool, k, 10))
        dense_hits = list(zip(near.tolist(), sims.astype(np.float64).tolist(), strict=True))
        lexical_rows = direct.lexical_hits(direct.pool(max(cfg.dense_pool, k)), alive)
        extra = [*near[: cfg.dense_pool].tolist(), *lexical_rows]
        if extra:
            cand = np.union1d(cand, np.asarray(extra, dtype=np.int64))
        # The evidence graphs rank the candidates; the best of them seed the entity-hop walk.
        prior = {
            int(r): float(d) + cfg.evidence_weight * evidence.get(int(r), (0.0, -1))[0]
            for r, d in zip(cand.tolist(), direct.score(cand).tolist(), strict=True)
        }
        reached: dict[int, Reached] = {}
        linked: list[int] = []
        if cfg.link_hops > 0 and self._links.num_units == len(alive):
            names = [c.text for c in concepts if c.kind != "query"]
            linked = self._links.live(self._links.link(text, names, max_ngram=cfg.link_max_ngram), alive)
            if linked:
                prior, reached = self._links.propagate(
                    linked, prior, config=cfg, alive=alive, cosine=direct.score
                )
        direct_list = direct.ranked([*(r for r, _ in dense_hits), *lexical_rows])
        fill_rows = {r for r, _ in dense_hits[:k]}.union(lexical_rows)
        for r, d, _, _ in direct_list:  # too little evidence: the best direct matches fill the results
            if len(prior) >= k:
                break
            if r in fill_rows:
                prior.setdefault(r, d)
        # the direct matches that stand out of the direct ranking compete, and keep their place
        confident = direct.confident(direct_list)
        sure = set(confident)
        for r, d, _, _ in direct_list:
            if r in sure:
                prior.setdefault(r, d)
        ids = np.asarray(sorted(prior), dtype=np.int64)
        cosines = direct.cosine(ids)
        lex = direct.lexical_of(ids)
        ev = np.asarray([evidence.get(int(r), (0.0, -1))[0] for r in ids], dtype=np.float64)
        hop = np.asarray([reached[r].bonus if r in reached else 0.0 for r in ids.tolist()], dtype=np.float64)
        total = cosines + direct.weight * lex + cfg.evidence_weight * ev + hop
        position = {r: i for i, r in enumerate(ids.tolist())}
        subjects = self._links.subject_units(linked, alive, cfg).values() if cfg.cover_named else ()
        kept = keep_confident(cover_named(ids[np.lexsort((ids, -total))].tolist(), subjects, k), confident, k)
        order = np.asarray([position[r] for r in kept], dtype=np.int64)
        dense_set = {r for r, _ in dense_hits}
        concept_meta = [{"text": c.text, "weight": round(c.weight, 4), "kind": c.kind} for c in concepts]
        out = []
        for i in order:
            row = int(ids[i])
            rank = evidence.get(row, (0.0, -1))[1]
            meta = self._table.result_metadata(row)
            meta.update(
                {
                    "strategy": self.name,
                    "score": float(total[i]),
                    "cosine": float(cosines[i]),
                    "lexical_score": float(lex[i]),
                    "evidence": float(ev[i]),
                    **hop_provenance(reached.get(row)),
                    "found_by": "evidence"
                    if rank >= 0
                    else ("hop" if row in reached else ("dense" if row in dense_set else "lexical")),
                    "ceg_rank": rank,
                    "ceg_kind": cegs[rank].kind if rank >= 0 else None,
                    "covered_concepts": list(cegs[rank].covered) if rank >= 0 else [],
                    "evidence_triples": list(dict.fromkeys(triples.get(row, [])))[:20],
                    "concepts": concept_meta,
                    "fallback": fallback if rank >= 0 or fallback else ("no-evidence" if not cegs else None),
                }
            )
            out.append(
                Retrieved(
                    id=self._table.ids[row],
                    text=self._table.texts[row],
                    score=float(total[i]),
                    metadata=meta,
                )
            )
        return out

    def _ceg_triples(self, ceg: EvidenceGraph) -> list[str]:
        return list(dict.fromkeys(self.kg.edge_text(e) for e in [*ceg.edges, *ceg.expanded_edges]))

    def _ceg_result(self, rank: int, ceg: EvidenceGraph, concepts: list[Concept]) -> Retrieved:
        lines = self._ceg_triples(ceg) or [self.kg.node_names[n] for n in ceg.nodes]
        return Retrieved(
            id=f"ceg::{rank}",
            text="\n".join(lines),
            score=-ceg.score,
            metadata={
                "strategy": self.name,
                "type": "evidence_graph",
                "ceg_rank": rank,
                "ceg_kind": ceg.kind,
                "covered_concepts": list(ceg.covered),
                "nodes": [self.kg.node_names[n] for n in ceg.nodes],
                "concepts": [c.text for c in concepts],
                "found_by": "evidence",
            },
        )

    def _evidence_result(self, cegs: list[EvidenceGraph], concepts: list[Concept]) -> Retrieved | None:
        """The kept evidence graphs' triples as one result; None when they hold none (nodes alone)."""
        lines = list(dict.fromkeys(t for c in cegs for t in self._ceg_triples(c)))
        if not lines:
            return None
        return Retrieved(
            id="bubble::evidence",
            text="\n".join(lines),
            score=0.0,
            metadata={
                "strategy": self.name,
                "type": "evidence_graph",
                "ceg_count": len(cegs),
                "concepts": [c.text for c in concepts],
            },
        )

    # ------------------------------------------------------------------ build internals
    def _index_documents(self, docs: list[Document], *, first_build: bool) -> list[str]:
        self._require_store("indexing documents")
        return super()._index_documents(docs, first_build=first_build)

    def _triples_of(self, texts: Sequence[str], titles: Sequence[str | None]) -> list[list[Triple]]:
        """The triples of each chunk: on the build's worker processes when the extractor allows."""
        extractor = self.triple_extractor
        if not hasattr(extractor, "extract_titled"):
            return extractor.extract(texts, titles)
        return map_texts(
            extractor.extract_titled,
            list(zip(texts, titles, strict=True)),
            workers=self.workers,
            owner=extractor,
            desc="parsing triples",
            show_progress=self.show_progress,
        )

    def _extend(self, chunks: ChunkRows, vectors: FloatMatrix, *, first_build: bool) -> None:
        """Adds chunk rows (already in Chroma) and their triples to the graph (a first build or not alike).

        The triples are extracted first; the graph, links and table change while no query runs.
        """
        # what each chunk's document is about (a title, else read from its text) resolves
        # pronoun subjects; with the triples' names as entities it also gives the links
        titles = [s.title for s in unit_subjects(chunks.doc_ids, chunks.texts, chunks.metadatas)]
        with timed(self.report, "triples"):
            found = self._triples_of(chunks.texts, titles)
        chunk_names = [list(dict.fromkeys(n for t in tr for n in (t.head, t.tail))) for tr in found]
        subjects = unit_subjects(chunks.doc_ids, chunks.texts, chunks.metadatas, chunk_names)
        with self._changing(), self._lock:
            base = len(self._table.ids)
            with timed(self.report, "graph"):
                for i, triples in enumerate(found):
                    row = base + i
                    self.kg.add_triples(triples, chunk=row)
                    title = subjects[i].title
                    if title and self.config.title_edges:
                        self.kg.add_node(title, row)
                        self.kg.add_triples(
                            [Triple(title, "mentions", n, "title") for n in chunk_names[i][:_TITLE_EDGES]],
                            chunk=row,
                        )
                self._links.add_units(
                    [s.about for s in subjects],
                    chunk_names,
                    chunks.texts,
                    groups=chunks.doc_ids,
                    max_ngram=self.config.link_max_ngram,
                    workers=self.workers,
                    show_progress=self.show_progress,
                )
            with timed(self.report, "embed graph"):
                self.kg.embed_missing(self.embedder, show_progress=self.show_progress)
            with timed(self.report, "anchor index"):
                self.kg.anchor_indexes(self.config.anchor_exact_below)
            self.terms.add(chunks.texts)
            self._table.append(chunks, vectors)
            self._count()

    def _count(self) -> None:
        self.report.counts.update(
            {
                "documents": len(self._table.doc_rows),
                "chunks": self.num_chunks,
                "nodes": self.kg.num_nodes,
                "edges": self.kg.num_edges,
            }
        )

    # ------------------------------------------------------------------ persistence
    def _index_files(self) -> dict[str, bytes]:
        return {
            **self.kg.to_files(),
            "chunk_embeddings.npy": array_to_bytes(self._table.saved_matrix()),
            "chunks.json": json_to_bytes(self._table.to_json()),
            "terms.json": json_to_bytes({"df": dict(self.terms.df), "documents": self.terms.documents}),
            **links_files(self._links),
        }

    def _manifest(self) -> dict[str, Any]:
        return {"counts": dict(self.report.counts)}

    def _reload_options(self) -> dict[str, Any]:
        return {"llm": self.llm, "triple_extractor": self._triple_extractor}

    def _restore(self, files: Mapping[str, FileData]) -> None:
        self.kg = KnowledgeGraph.from_files(files, self.embedder.dimension)
        try:
            matrix = array_view(files["chunk_embeddings.npy"], dtype=np.float32, ndim=2)
            chunks = json_from_bytes(files["chunks.json"])
            terms = json_from_bytes(files["terms.json"])
            ids = [str(x) for x in chunks["ids"]]
            doc_ids = [str(x) for x in chunks["doc_ids"]]
            alive = np.asarray(chunks["alive"], dtype=bool)
            saved_texts = chunks.get("texts")
            links = links_from_files(files)
            self.terms = TermStatistics(
                {str(k): int(v) for k, v in terms["df"].items()}, int(terms["documents"])
            )
        except KeyError as exc:
            raise ValueError(f"the index is missing {exc}; rebuild it") from exc
        except (TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"the index files are malformed ({exc}); rebuild it") from exc
        n = len(ids)
        if (
            len(doc_ids) != n
            or alive.shape != (n,)
            or matrix.shape != (n, self.embedder.dimension)
            or not np.isfinite(matrix).all()
            or links.num_units != n
        ):
            raise ValueError(
                "the index files disagree with each other (sizes or dimensions); rebuild the index"
            )
        if any(c >= n for c in self.kg.edge_chunk) or any(
            r >= n for rows in self.kg.node_chunks for r in rows
        ):
            raise ValueError("the graph names chunks the index does not hold; rebuild the index")
        given = (
            saved_texts
            if self.store is None and isinstance(saved_texts, list) and len(saved_texts) == n
            else None
        )
        self._table = ChunkTable.restore(
            chunks, matrix, store=self.store, what="chunks", texts=given, files=files
        )
        self._links = links
        self._count()


# ---------------------------------------------------------------------- helpers
def _unit(v: Any) -> FloatMatrix:
    a = np.asarray(v, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(a))
    return np.ascontiguousarray(a / n if n > 0 else a, dtype=np.float32)


def _firsts(groups: list[list[int]]) -> list[list[int]]:
    """Group index lists re-based to the concatenated seed order."""
    out, start = [], 0
    for g in groups:
        out.append(list(range(start, start + len(g))))
        start += len(g)
    return out
