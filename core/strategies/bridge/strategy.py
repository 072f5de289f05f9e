"""Bridge-RAG: entity -> abstract -> chunk retrieval over an abstract forest.

Indexing groups every ``abstract_size`` consecutive chunks of a document into a level-0
abstract, builds upper levels by grouping abstracts by meaning
(:func:`core.strategies.bridge.hierarchy.group_by_meaning`), and maps every entity to the level-0 abstracts
that mention it in a :class:`core.CuckooFilter` (CFT-RAG). A query's entities (spaCy NER
plus every 1..4-gram of the normalised query, so lowercase or partial mentions still hit)
are looked up in the filter; the abstracts found are expanded ``depth`` levels up and down
the forest; the chunks those abstracts own are ranked by cosine similarity with the query
in C++ over the in-memory embedding matrix.

Made robust beyond the paper's Algorithm 1:

- ranking adds ``entity_weight`` x the IDF-weighted share of the query's matched entities
  that a chunk's abstract mentions, so entity evidence counts, not only the cosine;
- a second entity hop through the filter: the best entity-matched abstracts lend their other
  (rare) entities, and abstracts that mention them join the candidates with
  ``bridge_weight`` x their evidence, which finds the second passage of multi-hop questions;
- what a document is about (its ``metadata["title"]``, else what its text says:
  :mod:`core.strategies.subjects`) counts as an entity of its abstracts;
- ``dense_pool`` dense hits from Chroma join the candidate pool, so a chunk that shares no
  entity with the query can still be found (set it to 0 for the paper's pure variant);
- when no entity hits, the result is dense top-k from Chroma, marked as a fallback.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from core.embed import Embedder
from core.entities import EntityExtractor, default_entity_extractor
from core.filters import MetadataFilter
from core.llm import as_llm
from core.native.cuckoo import CuckooFilter
from core.native.forest import AbstractForest
from core.native.scoring import top_k_cosine
from core.persist import (
    FileData,
    array_to_bytes,
    array_view,
    json_from_bytes,
    json_to_bytes,
)
from core.store import ChunkStore
from core.strategies.base import COMMON_PROVENANCE_KEYS
from core.strategies.bridge.abstracts import AbstractWriter
from core.strategies.bridge.hierarchy import group_by_meaning, weighted_centroids
from core.strategies.common import (
    DOC_ID_KEY,
    DOCUMENT_NAME_KEYS,
    check_query_vector,
    fit_mask,
    mask_at,
    row_cosines,
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
from core.strategies.subjects import UnitSubjects, unit_subjects
from core.strategies.table import ChunkRows, ChunkTable, stored_rows
from core.strategies.workers import extract_entities
from core.text import query_ngrams, title_entities
from core.types import Retrieved
from core.vector_index import HEADER_FILE, VectorIndex

__all__ = ["BridgeConfig", "BridgeRAG"]

FloatMatrix = npt.NDArray[np.float32]

INDEX_VERSION = 2  # 2: entity links (links.json, links_*.npy)

#: Metadata keys bridge-rag writes on every chunk in Chroma.
START_KEY = "start_index"
END_KEY = "end_index"

_STOPWORD_TEXT = """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves also did does many much one two first
    name named year years new old"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class BridgeConfig(StrategyConfig, ChunkingConfig, HopConfig, DirectConfig):
    """Settings of a Bridge-RAG index.

    The entity-hop walk is set by
    its :class:`~core.strategies.entity_links.HopConfig` fields
    (``link_hops``, ``hop_seeds``, ...), documented there; the direct evidence (the lexical
    evidence beside the cosine: ``lexical_weight``, ``lexical_pool``) by
    :class:`~core.strategies.direct.DirectConfig`.

    ``k`` (the default number of results) and ``max_query_chars`` (the longest accepted
    query) are every strategy's: :class:`~core.strategies.config.StrategyConfig`.

    Attributes:
        chunk_size: Largest chunk, in characters (chunks keep whole sentences); None = what
            fits the embedder's input window (:func:`core.embed.window_chars`), so a passage
            the model can read whole stays one chunk.
        chunk_overlap: Characters of trailing sentences repeated in the next chunk.
        abstract_size: Consecutive chunks per level-0 abstract (the paper's n = 5).
        branching: Children per parent in the upper levels.
        depth: Default expansion depth d (levels up and down the forest). 0 by default: with
            the entity evidence, the walk and the dense prior, depths 1-3 changed no result in
            the top 10 on musique, hotpotqa and 2wiki (the suite's ablation rows), so the
            forest's expansion is kept for ``depth=`` queries and the paper's variant.
        max_ngram: Longest query n-gram probed in the filter.
        query_ner: Also run the entity extractor on the query (off by default: the query's
            n-grams already probe every name the extractor would find, and on the three dev
            sets turning it on changed no recall@5 while costing 4-5 ms a query).
        entity_weight: Weight of the entity evidence added to the cosine score: the IDF-weighted
            share of the query's matched entities that a chunk's abstract mentions.
        bridge_weight: Weight of the second-hop evidence: abstracts sharing rare entities with
            the ``bridge_seeds`` best entity-matched abstracts (looked up in the filter).
        bridge_seeds: Entity-matched abstracts that lend their entities for the second hop.
        bridge_max_df: Entities in more abstracts than this are too common to bridge.
        tree_weight: Weight of the forest evidence: a candidate's nearest expanded ancestor's
            best seed evidence, times ``tree_decay`` per level climbed.
        tree_decay: Decay of the forest evidence per level.
        title_entities: Treat what a chunk's document is about (its ``metadata["title"]``, else a
            heading first line or the subject of its first sentence:
            :mod:`core.strategies.subjects`) as an entity of its abstract, and link the chunk to
            what it is about for the entity-hop walk.
        longest_match: Drop a matched query n-gram that lies inside a longer matched one.
        exact_search_max_rows: Up to this many chunks, dense hits (the pool and the fallback)
            come from an exact C++ scan of the in-memory matrix; above it, from a faiss HNSW
            graph over the same matrix (:class:`core.vector_index.VectorIndex`, searched with the
            live rows, or a filter's, as a predicate; saved with the index).
        dense_pool: Dense hits (the chunks nearest the query, from the index's own matrix) added
            to the candidates; None = 2 x k, 0 = none.
        summary_words: Longest abstract summary, in words.
        fingerprint_bits: Fingerprint width of the entity filter (8-16).
    """

    abstract_size: int = 5
    branching: int = 4
    depth: int = 0
    max_ngram: int = 4
    query_ner: bool = False
    entity_weight: float = 0.1
    bridge_weight: float = 0.1
    bridge_seeds: int = 3
    bridge_max_df: int = 50
    tree_weight: float = 0.0
    tree_decay: float = 0.5
    title_entities: bool = True
    longest_match: bool = True
    exact_search_max_rows: int = 50_000
    dense_pool: int | None = None
    summary_words: int = 60
    fingerprint_bits: int = 12

    def checks(self) -> list[tuple[str, bool]]:
        """Bridge-RAG's range checks."""
        return [
            *self.chunking_checks(),
            ("abstract_size must be >= 1", self.abstract_size >= 1),
            ("branching must be >= 2", self.branching >= 2),
            ("depth must be >= 0", self.depth >= 0),
            ("max_ngram must be between 1 and 8", 1 <= self.max_ngram <= 8),
            (
                "entity_weight must be finite and >= 0",
                math.isfinite(self.entity_weight) and self.entity_weight >= 0,
            ),
            ("dense_pool must be None or >= 0", self.dense_pool is None or self.dense_pool >= 0),
            (
                "bridge_weight and tree_weight must be finite and >= 0",
                all(math.isfinite(w) and w >= 0 for w in (self.bridge_weight, self.tree_weight)),
            ),
            (
                "bridge_seeds and bridge_max_df must be >= 0",
                self.bridge_seeds >= 0 and self.bridge_max_df >= 0,
            ),
            ("tree_decay must be in [0, 1]", 0.0 <= self.tree_decay <= 1.0),
            *self.hop_checks(),
            *self.direct_checks(),
            ("summary_words must be >= 5", self.summary_words >= 5),
            ("fingerprint_bits must be between 8 and 16", 8 <= self.fingerprint_bits <= 16),
        ]


class BridgeRAG(ChunkedIndex):
    """The Bridge-RAG strategy (framework-neutral).

    Build one with :meth:`from_documents` (a new corpus), :meth:`from_store` (the chunks and
    embeddings already in a Chroma collection), or :meth:`load` (a saved index). Query it
    with :meth:`retrieve`; wrap it with ``langchain_bridge.BridgeRetriever`` or
    ``llama_index_bridge.BridgeRetriever`` for the frameworks.

    Its models, keywords of ``from_documents`` / ``from_store`` / ``load``:
    ``entity_extractor`` (an :class:`EntityExtractor`; default spaCy NER with a rule-based
    fallback) and ``llm`` (an optional LangChain / LlamaIndex LLM for abstract summaries).
    Any other keyword is a :class:`BridgeConfig` field.

    Example:
        >>> rag = BridgeRAG.from_documents(docs, persist_directory="./bridge_index")  # doctest: +SKIP
        >>> for r in rag.retrieve("Who founded the observatory in Marrowick?", k=3):  # doctest: +SKIP
        ...     print(r.score, r.metadata["matched_entities"], r.text[:60])
    """

    store: ChunkStore
    config: BridgeConfig
    name: ClassVar[str] = "bridge"
    label: ClassVar[str] = "Bridge-RAG"
    index_version: ClassVar[int] = INDEX_VERSION
    default_collection: ClassVar[str] = "bridge_rag"
    config_type: ClassVar[type[StrategyConfig]] = BridgeConfig
    model_options: ClassVar[tuple[str, ...]] = ("entity_extractor", "llm")
    provenance_keys: ClassVar[frozenset[str]] = COMMON_PROVENANCE_KEYS | {
        "cosine",
        "lexical_score",
        "entity_score",
        "bridge_score",
        "tree_score",
        "matched_entities",
        "abstract_id",
        "abstract_level",
        "depth",
        "hop",
        "hop_score",
        "hop_entities",
    }

    def __init__(
        self,
        store: ChunkStore,
        embedder: Embedder,
        *,
        config: BridgeConfig | None = None,
        entity_extractor: EntityExtractor | None = None,
        llm: Any = None,
        show_progress: bool = False,
    ) -> None:
        self._init_shared(store, embedder, config, show_progress)
        self._extractor = entity_extractor
        self.llm = as_llm(llm)
        self._filter = CuckooFilter(fingerprint_bits=self.config.fingerprint_bits)
        self._forest = AbstractForest()
        dim = embedder.dimension
        self._vectors: VectorIndex | None = None  # over every chunk row, live or not
        self._row_abstract = np.zeros(0, dtype=np.int64)
        self._abs_level: list[int] = []
        self._abs_summary: list[str] = []
        self._abs_entities: list[list[str]] = []
        self._abs_doc: list[str | None] = []
        self._abs_alive: list[bool] = []
        self._abs_matrix: FloatMatrix = np.zeros((0, dim), dtype=np.float32)
        self._parent_cache: npt.NDArray[np.int32] | None = None
        #: Abstracts a change gave an extractive summary that the LLM rewrites after it.
        self._llm_pending: set[int] = set()

    # ------------------------------------------------------------------ properties
    @property
    def entity_extractor(self) -> EntityExtractor:
        """The entity extractor of new documents (and of queries with ``query_ner``).

        The default (spaCy NER) is loaded on first use, so a worker that only answers
        queries never loads spaCy.
        """
        if self._extractor is None:
            self._extractor = default_entity_extractor()
        return self._extractor

    @property
    def default_options(self) -> dict[str, Any]:
        """The ``retrieve`` options' defaults (adapters show them as their fields' values)."""
        return {"depth": self.config.depth, "include_abstracts": False}

    @property
    def num_abstracts(self) -> int:
        """Abstract nodes (all levels, live)."""
        return int(sum(self._abs_alive))

    @property
    def num_entities(self) -> int:
        """Entities in the filter."""
        return len(self._filter)

    @property
    def entity_filter(self) -> CuckooFilter:
        """The entity -> level-0 abstract filter."""
        return self._filter

    @property
    def forest(self) -> AbstractForest:
        """The abstract forest."""
        return self._forest

    def abstract(self, abstract_id: int) -> dict[str, Any]:
        """Summary, level, entities and document of an abstract node."""
        if not 0 <= abstract_id < len(self._abs_level):
            raise IndexError(f"abstract {abstract_id} does not exist")
        return {
            "id": abstract_id,
            "level": self._abs_level[abstract_id],
            "summary": self._abs_summary[abstract_id],
            "entities": list(self._abs_entities[abstract_id]),
            "doc_id": self._abs_doc[abstract_id],
            "alive": self._abs_alive[abstract_id],
        }

    # ------------------------------------------------------------------ construction
    def _index_stored(self) -> None:
        with timed(self.report, "read collection"):
            rows, vectors = stored_rows(self.store, self.embedder.dimension, ordered=True)
        self._extend(rows, vectors, first_build=True)

    # ------------------------------------------------------------------ updates
    def _forget_rows(self, rows: Sequence[int]) -> None:
        """Rewrites every abstract that summarised a deleted chunk, from its live chunks only.

        A level-0 abstract keeps the entities its live chunks still name, a new summary of
        their texts and the mean of their vectors; its ancestors are recomputed from their
        live children (entities, the summary of the child nearest their new centroid). An
        abstract left without live chunks is blanked and leaves the filter. So the next save
        holds nothing of the deleted chunks, and no summary speaks for them.
        """
        alive = self._table.alive
        touched = sorted({int(self._row_abstract[r]) for r in rows})
        matrix = np.array(self._abs_matrix, dtype=np.float32, copy=True)  # may be a read-only map
        writer = AbstractWriter(self.config.summary_words, self.llm)
        for a in touched:
            live = np.flatnonzero(alive & (self._row_abstract == a))
            texts = [self._table.texts[int(r)] for r in live]
            titles = [str(self._table.metadatas[int(r)].get("title", "")) for r in live]
            kept = [e for e in self._abs_entities[a] if _named_in(e, [*texts, *titles])]
            for ent in set(self._abs_entities[a]) - set(kept):
                self._filter.remove_ids(ent, [a])
            self._abs_entities[a] = kept
            self._abs_summary[a] = writer.extractive(texts) if texts else ""  # the LLM's comes after
            self._queue_llm_summary(a)
            self._abs_alive[a] = bool(live.size)
            if not live.size:
                self._abs_doc[a] = None  # a document name (a file name) is data of the deleted too
            matrix[a] = _unit_mean(self._table.matrix[live]) if live.size else 0.0
        self._abs_matrix = self._refresh_ancestors(touched, matrix, writer)
        self._links = self._links.without_units(~alive)

    def _refresh_ancestors(
        self, nodes: Sequence[int], matrix: FloatMatrix, writer: AbstractWriter
    ) -> FloatMatrix:
        """Recomputes every ancestor of ``nodes`` from its live children, level by level, as a build does.

        An ancestor gets the centroid of its children's vectors weighted by the live chunks
        under each (in ``matrix``, changed in place and returned), the union of their
        entities, and a summary of its children (the LLM's, given one, else the nearest
        child's lead); one left without live children is blanked. A delete and an add both end
        here, so a parent always speaks for the children it has.
        """
        parent = self._parents()
        weights = self._live_chunks_under(parent)
        level = {int(parent[a]) for a in nodes if parent[a] >= 0}
        while level:
            for node in sorted(level):
                children = self._live_children(parent, node)
                self._abs_alive[node] = bool(children)
                if not children:
                    self._abs_doc[node] = None
                    matrix[node], self._abs_entities[node], self._abs_summary[node] = 0.0, [], ""
                    continue
                matrix[node] = weighted_centroids(matrix, [children], weights)[0]
                entities = [e for c in children for e in self._abs_entities[c]]
                self._abs_entities[node] = list(dict.fromkeys(entities))[:50]
                nearest = self._closest(children, matrix, matrix[node])[0]
                self._abs_summary[node] = writer.extractive(
                    [self._abs_summary[nearest]], entities, of_summaries=self._abs_level[nearest] > 0
                )
                self._queue_llm_summary(node)  # an LLM index gets the LLM's after the change
            level = {int(parent[n]) for n in level if parent[n] >= 0}
        return matrix

    @staticmethod
    def _closest(nodes: Sequence[int], matrix: FloatMatrix, vector: FloatMatrix) -> list[int]:
        """``nodes`` nearest first to ``vector`` by their rows of ``matrix`` (ties: lower id)."""
        sims = matrix[list(nodes)] @ vector
        return [nodes[i] for i in np.lexsort((np.asarray(nodes), -sims))]

    def _live_children(self, parent: npt.NDArray[np.int32], node: int) -> list[int]:
        return [c for c in np.flatnonzero(parent == node).tolist() if self._abs_alive[c]]

    def _queue_llm_summary(self, node: int) -> None:
        if self.llm is not None:
            self._llm_pending.add(node)

    def _after_change(self) -> None:
        """The LLM's summaries of the abstracts a change rewrote, written outside its exclusive block.

        Queries meanwhile see the extractive summaries the change left; each level's LLM
        summaries are then swapped in at once, children before parents (a parent summarises
        its children's new summaries).
        """
        pending, self._llm_pending = self._llm_pending, set()
        done: set[int] = set()
        try:
            for level in sorted({self._abs_level[n] for n in pending}):
                self._write_llm_level(level, pending)
                done.update(n for n in pending if self._abs_level[n] == level)
        finally:  # interrupted: what is not written stays queued for the next change
            self._llm_pending |= pending - done

    def _write_llm_level(self, level: int, pending: set[int]) -> None:
        """The LLM's summaries of the pending abstracts of one level, swapped in at once.

        A failed call keeps the extractive summary the change left.
        """
        writer = AbstractWriter(self.config.summary_words, self.llm)
        inputs: dict[int, tuple[list[str], list[str]]] = {}
        with self._lock:
            parent = self._parents()
            for node in sorted(n for n in pending if self._abs_level[n] == level and self._abs_alive[n]):
                if level == 0:
                    rows = np.flatnonzero(self._table.alive & (self._row_abstract == node))
                    inputs[node] = ([self._table.texts[int(r)] for r in rows], [])
                else:
                    kids = self._live_children(parent, node)
                    closest = self._closest(kids, self._abs_matrix, self._abs_matrix[node])
                    ents = [e for c in kids for e in self._abs_entities[c]]
                    inputs[node] = ([self._abs_summary[c] for c in closest], ents)
        written: dict[int, str] = {}
        for node, (texts, ents) in inputs.items():
            failures = writer.llm_failures
            summary = writer.write(texts, ents, of_summaries=level > 1)
            if writer.llm_failures == failures:
                written[node] = summary
        with self._changing(), self._lock:
            for node, summary in written.items():
                self._abs_summary[node] = summary

    def _live_chunks_under(self, parent: npt.NDArray[np.int32]) -> npt.NDArray[np.float64]:
        """Live chunks under each abstract (a build weights a parent's centroid by them)."""
        levels = np.asarray(self._abs_level, dtype=np.int64)
        alive = self._table.alive
        weights = np.bincount(self._row_abstract[alive], minlength=len(levels)).astype(np.float64)
        for lv in range(int(levels.max(initial=0))):
            below = np.flatnonzero((levels == lv) & (parent >= 0))
            np.add.at(weights, parent[below], weights[below])
        return weights

    # ------------------------------------------------------------------ query
    @follows_writer
    def retrieve(
        self,
        query: str,
        k: int | None = None,
        *,
        depth: int | None = None,
        include_abstracts: bool = False,
        filter: Mapping[str, Any] | MetadataFilter | None = None,
        **options: Any,
    ) -> list[Retrieved]:
        """Retrieves chunks through the entity -> abstract -> chunk bridge.

        Args:
            query: The question.
            k: Number of chunks (default ``config.k``).
            depth: Expansion depth (default ``config.depth``).
            include_abstracts: Also return the summaries of the abstracts the chunks came
                through, after the chunks, as context documents (``metadata["type"] ==
                "abstract"``).
            filter: A metadata filter in Chroma's ``where`` syntax (:mod:`core.filters`):
                only chunks that pass it are considered, at every stage (entity lookups,
                forest, second hops, the walk, the dense pool and the fallback).
            **options: Unknown options raise TypeError.

        Returns:
            Results, best first, with provenance metadata: ``matched_entities``,
            ``abstract_id``, ``abstract_level``, ``depth``, ``score`` and its parts (``cosine``,
            ``lexical_score``, ``entity_score``, ``bridge_score``, ``tree_score``, the walk's
            ``hop_score``), ``found_by`` (entity / tree / bridge / hop / dense / lexical),
            ``fallback``, and ``doc_id``.

        Raises:
            TypeError: ``query`` is not a str, ``k`` or ``depth`` not an int, or an unknown option.
            ValueError: Empty or over-long query, ``k`` < 1 or ``depth`` < 0.
            core.filters.FilterError: A malformed filter or an unsupported operator.
        """
        text, k, flt = self._query_args(query, k, filter, options)
        qv = self.embedder.embed_query(text)
        return self.retrieve_by_vector(
            text, qv, k, depth=depth, include_abstracts=include_abstracts, filter=flt
        )

    @follows_writer
    def retrieve_by_vector(
        self,
        query: str,
        query_vector: Any,
        k: int | None = None,
        *,
        depth: int | None = None,
        include_abstracts: bool = False,
        filter: Mapping[str, Any] | MetadataFilter | None = None,
        pool_rows: Sequence[int] | None = None,
        **options: Any,
    ) -> list[Retrieved]:
        """:meth:`retrieve` with the query embedding already computed (benchmarks use this).

        Args:
            query: The question (its entities are looked up; it is not embedded again).
            query_vector: Its embedding, from the index's embedder.
            k: Number of chunks (default ``config.k``).
            depth: Expansion depth (default ``config.depth``).
            include_abstracts: As for :meth:`retrieve`.
            filter: As for :meth:`retrieve`.
            pool_rows: Rows that stand in for the dense pool: another retriever's results
                found in this index (:class:`core.entity_hop.EntityHopWalk`); rows that are
                dead, filtered out or out of range are dropped. None: the index's own dense
                search. When the query names no entity, these rows come back ranked by cosine.
            **options: Unknown options raise TypeError.

        Raises:
            TypeError: ``k`` or ``depth`` is not an int, or an unknown option.
            ValueError: The query vector does not have the index's dimension or is not finite.
        """
        text, k, flt = self._query_args(query, k, filter, options)
        if depth is None:
            depth = self.config.depth
        elif isinstance(depth, bool) or not isinstance(depth, int):
            raise TypeError(f"depth must be an int, got {type(depth).__name__}")
        elif depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        query_vector = check_query_vector(query_vector, self._table.matrix.shape[1])
        depth = min(depth, len(self._abs_level))  # deeper than the forest is tall changes nothing
        alive, row_abstract = self._table.live_mask(flt), self._row_abstract
        n_rows = min(len(self._table.ids), alive.shape[0], row_abstract.shape[0])
        if n_rows == 0 or not alive.any():
            return []
        cfg = self.config
        within = self._abstracts_within(alive[:n_rows], row_abstract[:n_rows]) if flt is not None else None
        ner = self.entity_extractor.extract([text])[0] if cfg.query_ner else []
        matched = self._match_entities(text, ner, within)
        linked = (
            self._links.live(self._links.link(text, ner, max_ngram=cfg.link_max_ngram), alive)
            if cfg.link_hops > 0
            else []
        )
        pool = cfg.dense_pool if cfg.dense_pool is not None else 2 * k
        direct = DirectEvidence(self._table, text, query_vector, cfg)
        given = None if pool_rows is None else self._pool_hits(query_vector, pool_rows, alive[:n_rows])
        if given is not None:
            dense_hits = given
        else:
            dense_hits = self._dense_rows(query_vector, max(pool, k), alive) if max(pool, k) > 0 else []
        lexical_rows = direct.lexical_hits(direct.pool(max(pool, k)), alive[:n_rows])
        if not matched and not linked:
            return self._direct(direct, dense_hits, lexical_rows, k, fallback="no-entity-match")
        seeds = sorted({a for ids in matched.values() for a in ids})
        ent_score = self._entity_scores(matched)
        bridged = self._bridge_scores(seeds, ent_score, query_vector, set(matched), within)
        nodes, hops = (
            self._forest.expand(seeds, depth) if seeds else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        )
        tree = self._tree_scores(seeds, ent_score, depth)
        extra_nodes = np.asarray(sorted(bridged), dtype=np.int64)
        cand = self._forest.chunk_ids(np.union1d(nodes, extra_nodes).astype(np.int64)).astype(np.int64)
        cand = cand[cand < n_rows]
        cand = cand[alive[cand]]
        pool_rows_used = [row for row, _ in dense_hits[:pool]] if given is None else [row for row, _ in given]
        # the direct matches that stand out of the direct ranking: candidates, and kept in the top k
        confident = direct.confident(direct.ranked([*(r for r, _ in dense_hits), *lexical_rows]))
        extra = np.asarray([*pool_rows_used, *lexical_rows, *confident], dtype=np.int64)
        if extra.size:
            cand = np.union1d(cand, extra)
        prior_of = dict(zip(cand.tolist(), direct.score(cand).tolist(), strict=True))
        reached: dict[int, Reached] = {}
        if linked:
            prior_of, reached = self._links.propagate(
                linked, prior_of, config=cfg, alive=alive, cosine=direct.score
            )
        if not prior_of:
            return self._direct(direct, dense_hits, lexical_rows, k, fallback="no-candidates")
        ids = np.asarray(sorted(prior_of), dtype=np.int64)
        cos = direct.cosine(ids)
        lex = direct.lexical_of(ids)
        abstracts = row_abstract[ids]
        boost = np.array([ent_score.get(int(a), 0.0) for a in abstracts], dtype=np.float64)
        bridge = np.array([bridged.get(int(a), 0.0) for a in abstracts], dtype=np.float64)
        tree_s = self._lookup_tree(abstracts, tree, depth)
        hop_s = np.array([reached[r].bonus if r in reached else 0.0 for r in ids.tolist()], dtype=np.float64)
        total = (
            cos
            + direct.weight * lex
            + cfg.entity_weight * boost
            + cfg.bridge_weight * bridge
            + cfg.tree_weight * tree_s
            + hop_s
        )
        ranked = np.lexsort((ids, -total))
        position = {int(r): i for i, r in enumerate(ids.tolist())}
        dense_set = {row for row, _ in dense_hits}
        subjects = self._links.subject_units(linked, alive, cfg).values() if cfg.cover_named else ()
        kept = keep_confident(cover_named(ids[ranked].tolist(), subjects, k), confident, k)
        order = np.asarray([position[r] for r in kept], dtype=np.int64)
        seed_set = set(seeds)
        node_hops = dict(zip(nodes.tolist(), hops.tolist(), strict=True))
        out: list[Retrieved] = []
        for i in order:
            row, a = int(ids[i]), int(abstracts[i])
            via, via_hops = self._reached_through(a, node_hops)
            walk = reached.get(row)
            if a in seed_set:
                source = "entity"
            elif walk is not None:
                source = "hop"
            elif via is not None:
                source = "tree"
            elif a in bridged:
                source = "bridge"
            else:
                source = "dense" if row in dense_set else "lexical"
            out.append(
                self._result(
                    row,
                    float(total[i]),
                    cosine=float(cos[i]),
                    lexical_score=float(lex[i]),
                    entity_score=float(boost[i]),
                    bridge_score=float(bridge[i]),
                    tree_score=float(tree_s[i]),
                    matched=sorted(m for m, abs_ids in matched.items() if a in abs_ids),
                    abstract_id=a if via is None else via,
                    depth=0 if a in seed_set else via_hops,
                    source=source,
                    fallback=None,
                    walk=walk,
                )
            )
        if include_abstracts:
            out.extend(self.abstract_results(out, query_vector, alive if flt is not None else None))
        return out

    # ------------------------------------------------------------------ persistence
    def _index_files(self) -> dict[str, bytes]:
        files = {
            "filter.bin": self._filter.to_bytes(),
            "forest.bin": self._forest.to_bytes(),
            "chunk_embeddings.npy": array_to_bytes(self._table.saved_matrix()),
            "abstract_embeddings.npy": array_to_bytes(self._abs_matrix),
            "chunks.json": json_to_bytes({**self._table.to_json(), "abstract": self._row_abstract.tolist()}),
            **links_files(self._links),
            "abstracts.json": json_to_bytes(
                {
                    "level": self._abs_level,
                    "summary": self._abs_summary,
                    "entities": self._abs_entities,
                    "doc_id": self._abs_doc,
                    "alive": [int(a) for a in self._abs_alive],
                }
            ),
        }
        vectors = self._vectors
        # minutes of HNSW inserts on a large corpus; but the graph holds every vector it
        # indexed, so after a delete it is left out and rebuilt on the first query instead
        if (
            vectors is not None
            and len(vectors) == self._table.matrix.shape[0]
            and not self._table.has_dead_rows
        ):
            files.update(vectors.to_files(_DENSE_PREFIX))
        return files

    def _manifest(self) -> dict[str, Any]:
        return {
            "counts": {
                "chunks": self.num_chunks,
                "abstracts": self.num_abstracts,
                "entities": self.num_entities,
            }
        }

    def _reload_options(self) -> dict[str, Any]:
        return {"entity_extractor": self.entity_extractor, "llm": self.llm}

    # ------------------------------------------------------------------ internals: build
    def _extend(self, rows: ChunkRows, embeddings: FloatMatrix, *, first_build: bool) -> None:
        """Adds chunk rows (already in Chroma): abstracts, hierarchy, entities."""
        with self._lock:
            base = len(self._table.ids)
            # Level-0 abstracts: every abstract_size consecutive chunks of one document.
            spans: list[tuple[int, int, str]] = []
            start = 0
            for i in range(1, len(rows.ids) + 1):
                if (
                    i == len(rows.ids)
                    or rows.doc_ids[i] != rows.doc_ids[start]
                    or i - start == self.config.abstract_size
                ):
                    spans.append((start, i, rows.doc_ids[start]))
                    start = i
            with timed(self.report, "entities"):
                chunk_entities, subjects = self._extract_entities(rows)
            writer = AbstractWriter(self.config.summary_words, self.llm)
            first_abs = len(self._abs_level)
            abs_entities: list[list[str]] = []
            abs_summaries: list[str] = []
            abs_vectors = np.zeros((len(spans), embeddings.shape[1]), dtype=np.float32)
            row_abstract = np.zeros(len(rows.ids), dtype=np.int64)
            weights = np.zeros(len(spans), dtype=np.float64)
            # an update's LLM summaries come after its change (_after_change): never under the lock
            summarise = writer.extractive if self.llm is not None and not first_build else writer.write
            with timed(self.report, "abstracts"):
                for j, (s, e, _) in enumerate(spans):
                    ents = list(dict.fromkeys(x for i in range(s, e) for x in chunk_entities[i]))
                    abs_entities.append(ents)
                    abs_summaries.append(summarise(rows.texts[s:e]))
                    abs_vectors[j] = _unit_mean(embeddings[s:e])
                    row_abstract[s:e] = first_abs + j
                    weights[j] = e - s
        # Append rows and level-0 nodes: queries wait meanwhile and never see half of it.
        with self._changing(), self._lock:
            self._parent_cache = None
            self._table.append(rows, embeddings)
            self._row_abstract = np.concatenate([self._row_abstract, row_abstract])
            parents = self._parents_for_new(abs_vectors) if not first_build else [-1] * len(spans)
            self._forest.add_nodes(
                [0] * len(spans),
                [base + s for s, _, _ in spans],
                [base + e for _, e, _ in spans],
                parents,
            )
            self._abs_level += [0] * len(spans)
            self._abs_summary += abs_summaries
            self._abs_entities += abs_entities
            self._abs_doc += [d for _, _, d in spans]
            self._abs_alive += [True] * len(spans)
            self._abs_matrix = np.ascontiguousarray(
                np.vstack([self._abs_matrix, abs_vectors]), dtype=np.float32
            )
            if not first_build:  # the parents they joined now speak for them too
                for j in range(len(spans)):
                    self._queue_llm_summary(first_abs + j)
                self._abs_matrix = self._refresh_ancestors(
                    range(first_abs, first_abs + len(spans)), self._abs_matrix, writer
                )
            with timed(self.report, "filter"):
                for j, ents in enumerate(abs_entities):
                    for ent in ents:
                        self._filter.insert(ent, [first_abs + j])
            with timed(self.report, "entity links"):
                self._links.add_units(
                    [s.about if self.config.title_entities else () for s in subjects],
                    chunk_entities,
                    rows.texts,
                    groups=rows.doc_ids,
                    max_ngram=self.config.link_max_ngram,
                    workers=self.workers,
                    show_progress=self.show_progress,
                )
            if first_build:
                with timed(self.report, "hierarchy"):
                    self._build_levels(list(range(first_abs, first_abs + len(spans))), weights, writer)
            if len(self._table.alive) > self.config.exact_search_max_rows:
                with timed(self.report, "dense index"):
                    self._dense_index(self._table.matrix)
            self.report.counts.update(
                {
                    "documents": len(self._table.doc_rows),
                    "chunks": self.num_chunks,
                    "entities": self.num_entities,
                    **self._level_counts(),
                }
            )
            if writer.llm_calls:
                self.report.counts["llm summaries"] = writer.llm_calls - writer.llm_failures
                self.report.counts["llm failures"] = writer.llm_failures
        self._after_change()  # an LLM index's summaries of the parents the new abstracts joined

    def _extract_entities(self, rows: ChunkRows) -> tuple[list[list[str]], list[UnitSubjects]]:
        """Entities per chunk (NER over the text, plus its document's subject) and what each is about.

        A document's subject is its ``metadata["title"]``, else what its text says it is about
        (:func:`core.strategies.subjects.unit_subjects`: a heading first line, the subject of
        its first sentence). The NER runs on the build's worker processes, except for chunks
        whose metadata carry this extractor's entities (:mod:`core.ingest.precomputed`).
        """
        found, extracted = extract_entities(
            self.entity_extractor,
            rows.texts,
            workers=self.workers,
            ids=rows.ids,
            metadatas=rows.metadatas,
            show_progress=self.show_progress,
        )
        if extracted < len(rows.texts):
            self.report.counts["entities precomputed"] = (
                self.report.counts.get("entities precomputed", 0) + len(rows.texts) - extracted
            )
        subjects = unit_subjects(rows.doc_ids, rows.texts, rows.metadatas, found)
        if self.config.title_entities:
            for i, subject in enumerate(subjects):
                if subject.title:
                    found[i] = list(dict.fromkeys([*title_entities(subject.title), *found[i]]))
        return found, subjects

    def _build_levels(
        self, level_nodes: list[int], weights: npt.NDArray[np.float64], writer: AbstractWriter
    ) -> None:
        level = 0
        while len(level_nodes) > 1:
            level += 1
            vectors = self._abs_matrix[level_nodes]
            groups = group_by_meaning(vectors, self.config.branching)
            centroids = weighted_centroids(vectors, groups, weights)
            first = len(self._abs_level)
            summaries = []
            for g, members in enumerate(groups):
                nodes = [level_nodes[m] for m in members]
                closest = self._closest(nodes, self._abs_matrix, centroids[g])
                ents = [e for n in nodes for e in self._abs_entities[n]]
                if writer.llm is not None:
                    summaries.append(
                        writer.write([self._abs_summary[n] for n in closest], ents, of_summaries=level > 1)
                    )
                else:
                    summaries.append(
                        writer.extractive([self._abs_summary[closest[0]]], ents, of_summaries=level > 1)
                    )
            self._forest.add_nodes(
                [level] * len(groups), [0] * len(groups), [0] * len(groups), [-1] * len(groups)
            )
            children = [level_nodes[m] for members in groups for m in members]
            parents = [first + g for g, members in enumerate(groups) for _ in members]
            self._forest.set_parents(children, parents)
            self._abs_level += [level] * len(groups)
            self._abs_summary += summaries
            self._abs_entities += [
                list(dict.fromkeys(e for m in members for e in self._abs_entities[level_nodes[m]]))[:50]
                for members in groups
            ]
            self._abs_doc += [None] * len(groups)
            self._abs_alive += [True] * len(groups)
            self._abs_matrix = np.ascontiguousarray(
                np.vstack([self._abs_matrix, centroids]), dtype=np.float32
            )
            weights = np.array([weights[members].sum() for members in groups], dtype=np.float64)
            level_nodes = list(range(first, first + len(groups)))

    def _parents_for_new(self, vectors: FloatMatrix) -> list[int]:
        """Most similar existing level-1 node for each new level-0 abstract (-1 if none)."""
        level1 = [i for i, lv in enumerate(self._abs_level) if lv == 1 and self._abs_alive[i]]
        if not level1:
            return [-1] * len(vectors)
        sims = vectors @ self._abs_matrix[level1].T
        return [level1[int(np.argmax(row))] for row in sims]

    def _level_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for lv, alive in zip(self._abs_level, self._abs_alive, strict=True):
            if alive:
                counts[f"abstracts level {lv}"] = counts.get(f"abstracts level {lv}", 0) + 1
        return dict(sorted(counts.items()))

    # ------------------------------------------------------------------ internals: query
    def _match_entities(
        self, text: str, ner: Sequence[str], within: npt.NDArray[np.bool_] | None = None
    ) -> dict[str, list[int]]:
        """Query entities found in the filter, with their abstract lists.

        Probes are the query's n-grams (longest first) and, with ``query_ner``, the entities
        the extractor finds. With ``longest_match`` an n-gram inside a longer matched n-gram
        is dropped ("west virginia" inside "johnnycake west virginia"); NER entities stay.
        With ``within`` (a metadata filter's abstracts) an entity keeps only those abstracts,
        and an entity left with none is not matched.
        """
        grams = [g for g in query_ngrams(text, self.config.max_ngram) if not _all_stopwords(g)]
        probes = list(dict.fromkeys(p for p in [*grams, *ner] if p))
        if not probes:
            return {}
        offsets, ids = self._filter.lookup_many(probes)
        matched: dict[str, list[int]] = {}
        kept: list[str] = []
        ner_set = set(ner)
        for i, p in enumerate(probes):
            found = ids[offsets[i] : offsets[i + 1]]
            if within is not None and found.size:
                found = found[mask_at(within, found)]
            if found.size == 0:
                continue
            if self.config.longest_match and p not in ner_set and any(f" {p} " in f" {q} " for q in kept):
                continue
            kept.append(p)
            matched[p] = found.tolist()
        return matched

    def _entity_scores(self, matched: Mapping[str, list[int]]) -> dict[int, float]:
        n = max(1, self.num_abstracts)  # live ones: a deleted abstract makes no entity commoner
        idf = {m: math.log(1.0 + n / len(ids)) for m, ids in matched.items()}
        total = sum(idf.values())
        scores: dict[int, float] = {}
        for m, ids in matched.items():
            for a in ids:
                scores[a] = scores.get(a, 0.0) + idf[m] / total
        return scores

    def _bridge_scores(
        self,
        seeds: list[int],
        ent_score: Mapping[int, float],
        query_vector: FloatMatrix,
        matched: set[str],
        within: npt.NDArray[np.bool_] | None = None,
    ) -> dict[int, float]:
        """Second-hop entity evidence: abstracts that share rare entities with the best seeds.

        The best ``bridge_seeds`` seed abstracts (cosine plus entity evidence) lend their other
        entities; each is looked up in the filter (O(1)), and an abstract scores the summed IDF
        of the bridge entities it mentions, relative to the IDF of an entity found once.
        """
        cfg = self.config
        if cfg.bridge_weight <= 0 or cfg.bridge_seeds <= 0 or not seeds:
            return {}
        seed_arr = np.asarray(seeds, dtype=np.int64)
        qn = query_vector / max(float(np.linalg.norm(query_vector)), 1e-12)
        s_score = self._abs_matrix[seed_arr] @ qn + cfg.entity_weight * np.array(
            [ent_score[a] for a in seeds]
        )
        top = seed_arr[np.lexsort((seed_arr, -s_score))][: cfg.bridge_seeds].tolist()
        ents = list(dict.fromkeys(e for a in top for e in self._abs_entities[a] if e not in matched))
        if not ents:
            return {}
        offsets, ids = self._filter.lookup_many(ents, touch=False)
        n = max(1, self.num_abstracts)
        ref = math.log(1.0 + n)
        max_df = max(cfg.bridge_max_df, 1)
        top_set = set(top)
        scores: dict[int, float] = {}
        for i in range(len(ents)):
            df = int(offsets[i + 1] - offsets[i])
            if df < 2 or df > max_df:
                continue
            w = math.log(1.0 + n / df) / ref
            for a in ids[offsets[i] : offsets[i + 1]].tolist():
                if a not in top_set and (within is None or (a < within.shape[0] and within[a])):
                    scores[a] = min(1.0, scores.get(a, 0.0) + w)
        return scores

    def _abstracts_within(
        self, alive: npt.NDArray[np.bool_], row_abstract: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        """The abstracts (any level) holding at least one of the rows ``alive`` marks."""
        parent = self._parents()
        within = np.zeros(len(parent), dtype=bool)
        frontier = np.unique(row_abstract[alive])
        frontier = frontier[frontier < within.shape[0]]
        while frontier.size:
            within[frontier] = True
            up = parent[frontier].astype(np.int64)
            up = up[up >= 0]
            frontier = np.unique(up[~within[up]]) if up.size else up
        return within

    def _tree_scores(self, seeds: list[int], ent_score: Mapping[int, float], depth: int) -> dict[int, float]:
        """Support of each expanded ancestor: its best seed's entity evidence, decayed per level."""
        cfg = self.config
        if cfg.tree_weight <= 0 or depth <= 0:
            return {}
        parent = self._parents()
        support: dict[int, float] = {}
        for s in seeds:
            node, w = s, ent_score.get(s, 0.0)
            for _ in range(depth):
                node = int(parent[node])
                if node < 0:
                    break
                w *= cfg.tree_decay
                if w > support.get(node, 0.0):
                    support[node] = w
        return support

    def _lookup_tree(
        self, abstracts: npt.NDArray[np.int64], support: Mapping[int, float], depth: int
    ) -> npt.NDArray[np.float64]:
        out = np.zeros(len(abstracts), dtype=np.float64)
        if not support:
            return out
        parent = self._parents()
        cache: dict[int, float] = {}
        for i, a in enumerate(abstracts.tolist()):
            if a not in cache:
                node, best = a, 0.0
                for _ in range(depth):
                    node = int(parent[node])
                    if node < 0:
                        break
                    best = max(best, support.get(node, 0.0))
                cache[a] = best
            out[i] = cache[a]
        return out

    def _parents(self) -> npt.NDArray[np.int32]:
        cached = self._parent_cache
        if cached is None or len(cached) != len(self._abs_level):
            cached = np.asarray(self._forest.arrays()["parent"], dtype=np.int32)
            self._parent_cache = cached
        return cached

    def _reached_through(self, abstract_id: int, node_hops: Mapping[int, int]) -> tuple[int | None, int]:
        """The nearest expanded ancestor (or the node itself) and its hop count."""
        node = abstract_id
        while node >= 0:
            if node in node_hops:
                return node, node_hops[node]
            node = self._forest.parent(node)
        return None, 0

    def _dense_rows(
        self, query_vector: FloatMatrix, k: int, allowed: npt.NDArray[np.bool_] | None = None
    ) -> list[tuple[int, float]]:
        """Nearest live rows (of ``allowed``, a filter's live rows, when given), with their cosine.

        Up to ``exact_search_max_rows`` chunks this is an exact C++ scan of the in-memory
        matrix; above it the vector index over the same matrix answers, with the live (or
        allowed) rows as its predicate (no Chroma round trip).
        """
        matrix, alive = self._table.matrix, self._table.alive
        mask = alive if allowed is None else allowed
        if len(alive) <= self.config.exact_search_max_rows:
            ids, sims = top_k_cosine(query_vector, matrix, np.flatnonzero(mask), k)
            return list(zip(ids.tolist(), sims.tolist(), strict=True))
        index = self._dense_index(matrix)
        found, scores = index.search(query_vector.reshape(1, -1), matrix, k, allowed=mask)
        return [(r, s) for r, s in zip(found[0].tolist(), scores[0].tolist(), strict=True) if r >= 0]

    def _dense_index(self, matrix: FloatMatrix) -> VectorIndex:
        """The vector index of every row of ``matrix`` (rows appended since are inserted).

        Rows only ever get appended (a deleted chunk's row stays, masked out by the live
        rows), so the index grows with :meth:`VectorIndex.with_rows`: a new index replaces
        it, and a search in flight keeps the one it started with.
        """
        index = self._vectors
        if index is not None and len(index) == matrix.shape[0]:
            return index
        with self._lock:
            index = self._vectors
            if index is None or len(index) > matrix.shape[0]:
                index = VectorIndex.build(matrix, workers=self.workers)
            else:
                new = np.arange(len(index), matrix.shape[0], dtype=np.int64)
                index = index.with_rows(matrix, new, workers=self.workers)
            self._vectors = index
            return index

    def _pool_hits(
        self, query_vector: FloatMatrix, rows: Sequence[int], allowed: npt.NDArray[np.bool_]
    ) -> list[tuple[int, float]]:
        """The given rows that are allowed, with their cosine, best first (ties: lower row)."""
        kept = [int(r) for r in dict.fromkeys(rows) if 0 <= int(r) < allowed.shape[0] and allowed[int(r)]]
        if not kept:
            return []
        sims = row_cosines(query_vector, self._table.matrix, np.asarray(kept, dtype=np.int64)).tolist()
        return sorted(zip(kept, sims, strict=True), key=lambda rs: (-rs[1], rs[0]))

    def _direct(
        self,
        direct: DirectEvidence,
        dense_hits: Sequence[tuple[int, float]],
        lexical_rows: Sequence[int],
        k: int,
        *,
        fallback: str,
    ) -> list[Retrieved]:
        """The direct ranking (the dense hits and the lexical ones, by direct score), as results."""
        dense = {row for row, _ in dense_hits}
        rows = [*dense, *lexical_rows]
        return [
            self._result(
                row,
                score,
                cosine=cosine,
                lexical_score=lex,
                entity_score=0.0,
                matched=[],
                abstract_id=int(self._row_abstract[row]),
                depth=0,
                source="dense" if row in dense else "lexical",
                fallback=fallback,
            )
            for row, score, cosine, lex in direct.ranked(rows)[:k]
        ]

    def _result(
        self,
        row: int,
        score: float,
        *,
        cosine: float,
        entity_score: float,
        matched: list[str],
        lexical_score: float = 0.0,
        bridge_score: float = 0.0,
        tree_score: float = 0.0,
        abstract_id: int,
        depth: int,
        source: str,
        fallback: str | None,
        walk: Reached | None = None,
    ) -> Retrieved:
        meta = self._table.result_metadata(row)
        meta.update(
            {
                "strategy": self.name,
                "score": score,
                "cosine": cosine,
                "lexical_score": lexical_score,
                "entity_score": entity_score,
                "bridge_score": bridge_score,
                "tree_score": tree_score,
                "matched_entities": matched,
                "abstract_id": abstract_id,
                "abstract_level": self._abs_level[abstract_id],
                "depth": depth,
                **hop_provenance(walk),
                "found_by": source,
                "fallback": fallback,
            }
        )
        return Retrieved(id=self._table.ids[row], text=self._table.texts[row], score=score, metadata=meta)

    def abstract_results(
        self, results: Sequence[Retrieved], query_vector: FloatMatrix, allowed: npt.NDArray[np.bool_] | None
    ) -> list[Retrieved]:
        """The summaries of the level-0 abstracts the results (chunks of this index) belong to.

        Args:
            results: Chunks of this index, best first (their abstracts come in that order).
            query_vector: The query's unit embedding (each abstract's ``score`` is its cosine).
            allowed: Under a filter, its live rows: an abstract is returned only when every
                live chunk it summarises passes the filter, so a summary never carries text of
                a row the filter excludes. None: no filter.

        Returns:
            One result per abstract (``metadata["type"] == "abstract"``, id ``abstract::<n>``).
        """
        first_row: dict[int, int] = {}  # each abstract's first result row, in result order
        for r in results:
            row = self._table.id_to_row[r.id]
            first_row.setdefault(int(self._row_abstract[row]), row)
        seen = list(first_row)
        if allowed is not None:
            live = self._table.alive
            excluded = set(self._row_abstract[live & ~fit_mask(allowed, live.shape[0])].tolist())
            seen = [a for a in seen if a not in excluded]
        out = []
        for a in seen:
            cos = float(self._abs_matrix[a] @ query_vector) / max(float(np.linalg.norm(query_vector)), 1e-12)
            out.append(
                Retrieved(
                    id=f"abstract::{a}",
                    text=self._abs_summary[a],
                    score=cos,
                    metadata={
                        "strategy": self.name,
                        "type": "abstract",
                        "abstract_id": a,
                        "abstract_level": self._abs_level[a],
                        "entities": self._abs_entities[a][:20],
                        # the names the document carries (its source file, LlamaIndex document)
                        **_document_names(self._table.rows.metadatas[first_row[a]]),
                        DOC_ID_KEY: self._abs_doc[a],
                    },
                )
            )
        return out

    # ------------------------------------------------------------------ internals: persistence
    def _restore(self, files: Mapping[str, FileData]) -> None:
        self._parent_cache = None
        try:
            self._filter = CuckooFilter.from_bytes(files["filter.bin"])
            self._forest = AbstractForest.from_bytes(files["forest.bin"])
            matrix = array_view(files["chunk_embeddings.npy"], dtype=np.float32, ndim=2)
            self._abs_matrix = array_view(files["abstract_embeddings.npy"], dtype=np.float32, ndim=2)
            chunks = json_from_bytes(files["chunks.json"])
            abstracts = json_from_bytes(files["abstracts.json"])
            ids = [str(x) for x in chunks["ids"]]
            doc_ids = [str(x) for x in chunks["doc_ids"]]
            alive = np.asarray(chunks["alive"], dtype=bool)
            row_abstract = np.asarray(chunks["abstract"], dtype=np.int64)
            self._abs_level = [int(x) for x in abstracts["level"]]
            self._abs_summary = [str(x) for x in abstracts["summary"]]
            self._abs_entities = [[str(e) for e in ents] for ents in abstracts["entities"]]
            self._abs_doc = [None if d is None else str(d) for d in abstracts["doc_id"]]
            self._abs_alive = [bool(x) for x in abstracts["alive"]]
            links = links_from_files(files)
        except KeyError as exc:
            raise ValueError(f"the index is missing {exc}; rebuild it") from exc
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"the index files are malformed ({exc}); rebuild it") from exc
        n, n_abs = len(ids), len(self._abs_level)
        consistent = (
            len(doc_ids) == n
            and alive.shape == (n,)
            and row_abstract.shape == (n,)
            and matrix.shape == (n, self.embedder.dimension)
            and self._abs_matrix.shape == (n_abs, self.embedder.dimension)
            and len(self._abs_summary)
            == len(self._abs_entities)
            == len(self._abs_doc)
            == len(self._abs_alive)
            == n_abs
            and len(self._forest) == n_abs
            and _ranges_within(self._forest, n)
            and _ids_within(self._filter, n_abs)
            and (n == 0 or (row_abstract.min() >= 0 and row_abstract.max() < n_abs))
            and links.num_units == n
        )
        if not consistent:
            raise ValueError(
                "the index files disagree with each other (sizes or dimensions); rebuild the index"
            )
        vectors = None
        if f"{_DENSE_PREFIX}{HEADER_FILE}" in files:
            vectors = VectorIndex.from_files(files, matrix, _DENSE_PREFIX)
            if len(vectors) != n:  # from_files already checked the dimension and the row range
                raise ValueError("the saved dense index does not cover the chunks; rebuild the index")
        self._table = ChunkTable.restore(chunks, matrix, store=self.store, what="chunks", files=files)
        self._vectors = vectors
        self._row_abstract = row_abstract
        self._links = links
        self.report.counts.update(
            {"documents": len(self._table.doc_rows), "chunks": self.num_chunks, "entities": self.num_entities}
        )


# ---------------------------------------------------------------------- module helpers
_DENSE_PREFIX = "dense."


def _ranges_within(forest: AbstractForest, n_rows: int) -> bool:
    """Whether every node's chunk range lies inside the ``n_rows`` saved rows (a forged file's may not)."""
    arrays = forest.arrays()
    begin = np.asarray(arrays["chunk_begin"], dtype=np.int64)
    end = np.asarray(arrays["chunk_end"], dtype=np.int64)
    return bool(np.all((begin >= 0) & (begin <= end) & (end <= n_rows)))


def _ids_within(entity_filter: CuckooFilter, n_abstracts: int) -> bool:
    """Whether every abstract id the filter maps an entity to is one of the saved abstracts."""
    return all(0 <= i < n_abstracts for _, _, ids in entity_filter.entries() for i in ids)


def _named_in(entity: str, texts: Sequence[str]) -> bool:
    """Whether a chunk text still names ``entity`` (case-insensitive)."""
    low = entity.lower()
    return any(low in t.lower() for t in texts)


def _unit_mean(vectors: FloatMatrix) -> FloatMatrix:
    """The normalised mean of row vectors (zeros when they cancel out)."""
    c = np.asarray(vectors, dtype=np.float64).mean(axis=0)
    norm = float(np.linalg.norm(c))
    out: FloatMatrix = (c / norm if norm > 0 else c).astype(np.float32)
    return out


def _document_names(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A chunk's names of its document besides its ``doc_id`` (``source``, ``ref_doc_id``, ...).

    Every chunk of one document carries the same ones (the grouping rule), so an abstract takes
    them from any of its chunks.
    """
    return {key: metadata[key] for key in DOCUMENT_NAME_KEYS if key != DOC_ID_KEY and key in metadata}


def _all_stopwords(ngram: str) -> bool:
    words = ngram.split()
    return all(w in _STOPWORDS or len(w) < 2 for w in words)
