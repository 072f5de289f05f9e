"""The lifecycle every strategy shares: add, delete, save, all written once.

A strategy keeps its indexed rows in a :class:`core.strategies.table.ChunkTable` and its
own structures (abstracts, windows, a graph) beside them. :class:`IndexLifecycle` does the
rest the same way for all of them:

* one writer at a time per object (:meth:`_writing`) and per index directory (its writer
  lock), and changes swapped in while no query runs (:meth:`Follows._changing`), so a query
  never sees half of a change;
* a delete removes exactly the rows the caller named (a document id, or the name its chunks
  carry, narrowed by a filter), from Chroma first, then from the index;
* a save writes the table with the deleted rows' texts, metadata, ids and vectors blanked
  (:meth:`ChunkTable.to_files`), so no later generation holds them; when the index owns its
  Chroma (the embedded one under its persist directory), the save then has Chroma's own files
  forget them too (:meth:`core.store.ChunkStore.forget_deleted`).

The base also builds (:meth:`_build_into`), saves (:meth:`save`: the table's files, the
strategy's, one manifest) and loads (:meth:`_load_saved`: checks, store, restore, follow).
A strategy supplies the hooks: :meth:`_index_documents` (chunk, embed, store and index new
documents), :meth:`_forget_rows` (drop deleted rows from its own structures),
:meth:`_index_files` / :meth:`_manifest` (what it saves), :meth:`_from_saved` and
``_restore`` (how it is rebuilt from them) and :meth:`_reload_options` (what a follower's
reload passes on).
"""

from __future__ import annotations

import inspect
import logging
import os
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, TypeVar, cast

import numpy as np
import numpy.typing as npt

from core.embed import Embedder, as_embedder, window_chars
from core.filters import MetadataFilter, parse_filter
from core.persist import FileData, index_kind, save_index
from core.store import ChunkStore, StoredChunks
from core.strategies.base import check_doc_ids, check_k, check_query
from core.strategies.common import (
    check_embedder,
    check_new_index_directory,
    check_rebuild_store,
    default_store,
    embed_in_batches,
    index_directory,
    jsonable,
    normalise_rows,
    open_index,
    stage_lines,
    still_belongs,
    store_from_meta,
    timed,
)
from core.strategies.config import StrategyConfig
from core.strategies.direct import DirectConfig
from core.strategies.entity_links import EntityLinks
from core.strategies.follow import DEFAULT_REFRESH_INTERVAL, Follows
from core.strategies.table import (
    ChunkRows,
    ChunkTable,
    added_stored_rows,
    chunk_new_documents,
    stored_row_metadata,
)
from core.strategies.workers import available_cores, check_workers, using_cores
from core.types import BuildReport, Document
from core.writer_lock import WriterLock, holds_lock

L = TypeVar("L", bound="IndexLifecycle")


class Synced(NamedTuple):
    """What :meth:`IndexLifecycle.sync` took in: chunks (UMG-RAG: documents) added, removed and changed."""

    added: int
    removed: int
    changed: int


FloatMatrix = npt.NDArray[np.float32]

__all__ = [
    "DEFAULT_SYNC_WAIT",
    "ChunkedIndex",
    "InMemoryStoreWarning",
    "IncompleteForgetWarning",
    "IndexLifecycle",
    "Synced",
    "retrieve_options_of",
]

logger = logging.getLogger("bridge_rag.lifecycle")

#: Seconds a :meth:`IndexLifecycle.sync` waits for another worker's writer lock.
DEFAULT_SYNC_WAIT = 10.0


def retrieve_options_of(strategy_type: type) -> tuple[str, ...] | None:
    """The keyword options a strategy class's ``retrieve`` takes (known before anything is built).

    None when that ``retrieve`` is not bridge-rag's own and takes ``**kwargs``: a subclass's
    override may pass any option on.
    """
    retrieve = getattr(strategy_type, "retrieve")  # noqa: B009  # each strategy declares its own
    parameters = inspect.signature(retrieve).parameters.values()
    if not str(getattr(retrieve, "__module__", "")).startswith("core.") and any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters
    ):
        return None
    return _keyword_options(retrieve)


def _keyword_options(retrieve: Any) -> tuple[str, ...]:
    """The keyword-only parameters of a ``retrieve`` method: the options it takes by name."""
    parameters = inspect.signature(retrieve).parameters.values()
    return tuple(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


class InMemoryStoreWarning(UserWarning):
    """A save whose chunks live in an in-memory Chroma collection (reopened only in its process)."""


class IncompleteForgetWarning(UserWarning):
    """A save after a delete could not compact the index's own Chroma files (retried at the next save).

    The delete itself is done and saved: no query, ``get`` or index file returns the rows. Only
    Chroma's files may still hold copies (see :meth:`core.store.ChunkStore.forget_deleted`).
    """


class IndexLifecycle(Follows):
    """Base of the strategies: :meth:`add_documents`, :meth:`delete_documents` and autosave.

    Subclasses set ``store``, ``_table`` and ``_lock`` (an RLock guarding their structures)
    and implement the hooks.
    """

    name: ClassVar[str]
    #: Shown in messages ("Bridge-RAG"); the saved format's version (a loader checks it).
    label: ClassVar[str]
    index_version: ClassVar[int]
    #: Chroma collection of an index whose manifest names none.
    default_collection: ClassVar[str]
    #: The settings class (its ``from_dict`` reads a manifest's ``config``).
    config_type: ClassVar[type[StrategyConfig]]
    #: The constructor's models (``llm``, ``entity_extractor``, ...): keywords that
    #: ``from_documents`` / ``from_store`` / ``load`` pass on instead of reading as settings.
    model_options: ClassVar[tuple[str, ...]] = ()
    #: Whether a query runs a spaCy pipeline by default (BubbleRAG's query concepts), so that
    #: a process answering queries can import spaCy cheaply up front (see ``bridge-rag query``).
    queries_use_spacy: ClassVar[bool] = False

    store: Any
    embedder: Embedder
    config: Any
    show_progress: bool
    #: Cores a build or an update uses (:mod:`core.strategies.workers`); default: every core.
    workers: int
    report: BuildReport
    persist_path: Path | None
    _table: ChunkTable
    _lock: threading.RLock
    _links: EntityLinks

    def _init_shared(
        self, store: Any, embedder: Embedder, config: StrategyConfig | None, show_progress: bool
    ) -> None:
        """Sets the state every strategy starts with; a constructor calls it first.

        Args:
            store: The Chroma collection (or None, where the strategy allows one).
            embedder: Embeds chunks and queries.
            config: The settings; None: :attr:`config_type`'s defaults.
            show_progress: Show progress bars on long work.
        """
        self.config = self.config_type() if config is None else config
        self.store = store
        self.embedder = embedder
        self.show_progress = show_progress
        self.report = BuildReport()
        self.persist_path = None
        self.workers = available_cores()
        self._lock = threading.RLock()
        self._table = ChunkTable(embedder.dimension)
        self._links = EntityLinks()

    @property
    def retrieve_options(self) -> tuple[str, ...]:
        """The options ``retrieve`` takes besides the query and ``k``; any other raises TypeError."""
        return _keyword_options(getattr(self, "retrieve"))  # noqa: B009  # each strategy declares its own

    @property
    def default_k(self) -> int:
        """The default number of results (``config.k``)."""
        k: int = self.config.k
        return k

    # ------------------------------------------------------------------ the lifecycle
    def add_documents(self, documents: Sequence[Document]) -> list[str]:
        """Chunks, embeds and indexes more documents without a rebuild.

        Args:
            documents: The new documents.

        Returns:
            Their document ids.

        Raises:
            TypeError: An item is not a :class:`core.types.Document`.
            ValueError: A document has no text or an id that is already indexed.
            core.writer_lock.IndexLockedError: Another writer holds the index directory.
        """
        docs = list(documents)
        if not docs:
            return []
        self._check_writable("add_documents")
        with self._writing():
            self._hold_writer_lock()
            with self._building():
                ids = self._index_documents(docs, first_build=False)
            self._autosave()
        return ids

    def delete_documents(
        self, doc_ids: Sequence[str], *, filter: Mapping[str, Any] | MetadataFilter | None = None
    ) -> int:
        """Removes documents: their chunks leave Chroma, then every structure of the index.

        Exactly the rows named are removed: those of the documents with these ids, or whose
        chunks carry these names (``doc_id`` / ``source`` / ``ref_doc_id`` metadata), and,
        with ``filter``, only those that pass it. The next save holds nothing of them.

        Args:
            doc_ids: Document ids or names; unknown ones are ignored.
            filter: A metadata filter in Chroma's ``where`` syntax (a tenant's), narrowing
                the delete to the rows that pass it.

        Returns:
            The number of chunks (or units) removed.

        Raises:
            TypeError: ``doc_ids`` is a single string or holds a non-string.
            ValueError: Without ``filter``, a name that several documents carry (their
                metadata differ, e.g. two tenants' ``report.pdf``): name one by its id.
            core.filters.FilterError: A malformed filter, or one a query of this index refuses
                (UMG-RAG over a store: a chunk's own key).
        """
        names = check_doc_ids(doc_ids)
        flt = self._check_filter(filter)  # what a query with this filter would refuse, a delete refuses
        self._check_writable("delete_documents")
        with self._writing():
            self._hold_writer_lock()
            with self._lock:
                rows = self._table.rows_named(names, flt)
            if not rows:
                return 0
            self._delete_rows(rows, flt)
            try:
                self._after_change()
            finally:  # the delete is saved even when the slow work after it is interrupted
                self._autosave()
        return len(rows)

    def _delete_rows(self, rows: Sequence[int], flt: MetadataFilter | None) -> None:
        """A delete's removal: the rows leave Chroma, then every structure (:meth:`_drop_rows`).

        A row the app has since rewritten in Chroma under the same id so that it no longer
        belongs to what the delete names (another document's chunk, or another tenant's with a
        filter; not yet synced) leaves the index but stays in Chroma: the next sync takes it
        in as the app wrote it (:func:`core.strategies.common.still_belongs`). A row Chroma
        holds as the index does is always deleted.
        """
        table = self._table
        row_of = {table.ids[r]: r for r in rows}
        now = self.store.get(list(row_of), include_embeddings=False, missing_ok=True)
        kept: set[str] = set()
        for cid, text, meta in zip(now.ids, now.texts, now.metadatas, strict=True):
            r = row_of[cid]
            indexed = table.metadatas[r]
            same = (text, stored_row_metadata(meta)) == (table.texts[r], stored_row_metadata(indexed))
            if not same and not still_belongs(cid, meta, table.doc_ids[r], flt):
                kept.add(cid)
        self._deleted_from_store()
        self.store.delete([cid for cid in row_of if cid not in kept])
        self._drop_rows(rows, from_store=False)

    def _drop_rows(self, rows: Sequence[int], *, from_store: bool) -> None:
        """Removes rows from every structure while no query runs: a delete's, and a sync's, removal.

        Args:
            rows: The rows (sorted).
            from_store: Delete them from Chroma first, so a failure there changes nothing (a
                sync over the app's own collection does not: the app deleted or rewrote them).
        """
        self._deleted_from_store()
        if from_store:
            self.store.delete([self._table.ids[r] for r in rows])
        with self._changing(), self._lock:
            self._table.remove_rows(rows)
            self._forget_rows(rows)

    def sync(self, *, wait: float = DEFAULT_SYNC_WAIT) -> Synced:
        """Takes in what the app added to, changed in or deleted from the Chroma collection itself.

        After the one-line swap an app may keep writing through its own store
        (``vectorstore.add_documents``, ``add_texts`` over an existing id, ``delete``): call
        this after such writes. The collection's ids, texts and metadata (not its vectors) are
        read and compared with the index. What is gone from the collection, or changed there,
        leaves every structure of the index, as through :meth:`delete_documents` (its old text
        is in no later save); what is new or changed there is indexed: Bridge-RAG and BubbleRAG
        index a chunk as stored (not re-embedded), in a document grouped by the rule of
        :meth:`from_store`; UMG-RAG re-cuts and re-embeds each document whose chunks changed
        (:mod:`core.strategies.umg.source`; one the app stored anew with the same text and
        metadata only has its record renewed, saved but not counted). When nothing changed,
        nothing is written and no writer lock is taken. The index is saved when it has a
        directory. A sync that takes the writer lock lets it go when it is done (unless this
        object held it before), so every worker of a deployment may sync: one waits up to
        ``wait`` seconds for another's sync, then takes in what that one saved.

        Args:
            wait: Seconds to wait while another worker holds the writer lock.

        Returns:
            How many chunks (UMG-RAG: documents) were added, removed and changed.

        Raises:
            core.writer_lock.IndexLockedError: Another writer still holds the index directory
                after ``wait`` seconds (a process that adds or deletes keeps it until closed).
            NotImplementedError: An index with no collection to follow (UMG-RAG built from
                documents rather than from a store).
            ValueError: Chunks added with an embedding function of another dimension.
        """
        self._check_writable("sync")
        self.refresh()  # another worker may have synced and saved already: compare with that
        first = self._sync_candidates()  # a reader's check: no lock, nothing written
        if not first:
            return Synced(0, 0, 0)
        with self._writing():
            held = self._holds_writer_lock()
            self._hold_writer_lock(wait)  # may load what another writer saved meanwhile
            try:
                with using_cores(self.workers):
                    return self._sync_locked(first)
            finally:
                if not held:  # the lock was the sync's: another worker may sync next
                    self.close()

    def _sync_candidates(self) -> list[str]:
        """What :meth:`sync` may have to take in (empty: nothing changed), read without a lock.

        Raises:
            NotImplementedError: The strategy has nothing to follow.
        """
        raise NotImplementedError(
            f"{self.label} has no Chroma collection of the app's to follow; add and delete through "
            "the retriever, or rebuild"
        )

    def _sync_locked(self, candidates: Sequence[str]) -> Synced:
        """:meth:`sync`'s change, under the writer lock: the candidates checked again, then applied."""
        raise NotImplementedError  # pragma: no cover

    def save(self, path: str | os.PathLike[str]) -> None:
        """Saves the index atomically (Chroma keeps the chunks; this saves what is derived).

        The directory gets a new generation (a versioned manifest with a SHA-256 per file);
        a crash during the save leaves the previous generation loadable. After a delete the
        deleted rows are blanked in every file, and older generations (which still hold
        them) are removed. When the index owns its Chroma
        (:attr:`core.store.ChunkStore.index_owned`), the first save to its own directory after
        a delete then has Chroma's files forget the deleted rows
        (:meth:`core.store.ChunkStore.forget_deleted`), before the writer lock is let go.

        The first directory an object is built into, loads from or saves to is its own
        (``persist_path``): later changes save there, and a save there first catches up with
        what another worker saved since, so it never drops that. A save to another directory
        writes a copy (a backup) over whatever that directory holds; the object keeps its own
        directory, goes on following it, and holds no lock on the copy.

        Args:
            path: The index directory, or the persist directory holding it (as ``load`` reads).

        Raises:
            core.writer_lock.IndexLockedError: Another writer holds the directory.
            core.writer_lock.CatchUpError: Another worker saved a generation there that
                this object could not load; nothing was written over it.

        Warns:
            InMemoryStoreWarning: The chunks live in an in-memory Chroma collection: the saved
                index can be reopened only in this process (``load(path, store=...)``).
            IncompleteForgetWarning: Chroma's files could not be compacted after a delete
                (another process holds them, say); the next save tries again.
        """
        if self.store is not None and self.store.in_memory:
            warnings.warn(
                "this index's chunks live in an in-memory Chroma collection, which ends with this "
                f"process: {str(path)!r} can be reopened only here, with store=...; build with "
                "persist_directory=... to keep the chunks",
                InMemoryStoreWarning,
                stacklevel=2,
            )
        own = self.persist_path
        if own is None or Path(path).resolve() != Path(own).resolve():
            path = index_directory(path, self.name)
        path = Path(path).absolute()  # a later chdir moves no autosave
        found = index_kind(path)
        if found not in (None, "", self.name):
            raise ValueError(
                f"{str(path)!r} holds a {found} index; save this {self.name} index to another directory "
                f"(e.g. {str(path / self.name)!r}) rather than over it"
            )
        copy = own is not None and Path(own).resolve() != path.resolve()
        held = holds_lock(self, path)
        lock = WriterLock.acquire(path, self)  # one writer per index directory
        try:
            if not copy:
                self._catch_up(lock, held)  # another worker saved there since: keep what it wrote
            self._save_generation(path, copy)
            if not copy:
                self._forget_deleted()
        finally:  # a copy, or a first save that failed, keeps no lock there
            if not held and (copy or self.persist_path is None):
                lock.release()

    def _deleted_from_store(self) -> None:
        """Notes that rows left Chroma (or the index): the next save has an own Chroma forget them.

        Kept in the object's ``__dict__`` alone, so a switch to another generation (which
        copies a freshly loaded object's attributes) keeps it.
        """
        self.__dict__["_forget_due"] = True

    def _forget_deleted(self) -> None:
        """After a save that followed deletes: the index's own Chroma forgets the deleted rows.

        Only for a store the index owns (:attr:`core.store.ChunkStore.index_owned`): a store
        the app passed in, or a Chroma server, is the app's and is left as Chroma keeps it. A
        failure warns and is retried at the next save.
        """
        if not self.__dict__.get("_forget_due"):
            return
        store = self.store
        if isinstance(store, ChunkStore) and store.index_owned:
            try:
                store.forget_deleted()
            except Exception as exc:  # the delete is done and saved: say what is left, retry later
                warnings.warn(
                    f"the deleted rows are gone from the index and its Chroma collection, but "
                    f"Chroma's files may still hold copies: {exc}",
                    IncompleteForgetWarning,
                    stacklevel=3,
                )
                return
        self.__dict__.pop("_forget_due", None)

    def _save_generation(self, path: Path, copy: bool) -> None:
        """Writes the new generation to ``path``; the object's own directory follows its saves."""
        follower = self._follower
        follows = follower is not None and follower.directory.resolve() == path.resolve()
        # The snapshot (bytes) is taken as a query reads: a follower's switch to a newer
        # generation (a copy takes no lock that would keep it away) waits for it, so the files
        # are all of one generation. The write then holds back no switch (nor the queries
        # behind one), only other saves and changes (the lock), so generations stay in order.
        with ExitStack() as held:
            with self._gate().query():
                held.enter_context(self._lock)
                if isinstance(self.config, DirectConfig) and self.config.lexical_weight > 0:
                    self._table.lexical()  # saved with the index: a loaded index needs no rebuild
                files = {**self._table.to_files(), **self._index_files()}
                meta = {
                    "config": self.config.to_dict(),
                    "embedder": {"name": self.embedder.name, "dimension": self.embedder.dimension},
                    "store": None
                    if self.store is None
                    else {"collection": self.store.name, "location": jsonable(self.store.location)},
                    **self._manifest(),
                }
                keep_previous = not self._table.has_dead_rows
            generation = save_index(
                path, files, meta, kind=self.name, version=self.index_version, keep_previous=keep_previous
            ).name
        if not copy:  # a copy's generation is the copy's: this object still serves its own
            self._generation, self.persist_path = generation, path
            if not follows:
                self._follow_own_saves(path)

    def _follow_own_saves(self, path: Path) -> None:
        """Lets an object that built or saved an index catch up with what another worker saves there.

        Such an object follows no generation until it writes again: then, as a loaded one, it
        first loads what another worker saved since its own save (:meth:`refresh` does it at
        once), so its next save never drops that worker's change.
        """
        cls = type(self)

        def reload(old: IndexLifecycle) -> IndexLifecycle:
            return cls._load_saved(path, old.store, old.embedder, None, True, old._reload_options())

        self._follow(path, self._generation or "", None, reload)

    # ------------------------------------------------------------------ build and load
    @classmethod
    def from_documents(
        cls: type[L],
        documents: Iterable[Document],
        *,
        embedder: Any = None,
        store: ChunkStore | None = None,
        persist_directory: str | os.PathLike[str] | None = None,
        collection_name: str | None = None,
        config: StrategyConfig | None = None,
        show_progress: bool = True,
        workers: int | None = None,
        **options: Any,
    ) -> L:
        """Chunks, embeds, stores and indexes a new corpus.

        Args:
            documents: The documents (``core.types.Document``).
            embedder: Anything :func:`core.embed.as_embedder` accepts; None = all-MiniLM-L6-v2.
            store: A :class:`ChunkStore` to write to. Default: an embedded Chroma under
                ``persist_directory/chroma`` or, without a directory, an in-memory one.
            persist_directory: Where to keep Chroma's data and the index; the index is saved
                there after the build (reopen it with :meth:`load`).
            collection_name: Chroma collection for the default store (default: the
                strategy's ``default_collection``).
            config: Settings (the strategy's ``config_type``); keyword overrides apply on top.
            show_progress: Show progress bars.
            workers: Cores the build uses (embedding threads, entity and triple extraction
                processes; :mod:`core.strategies.workers`); None: every core. The index is
                the same whatever the count.
            **options: The strategy's models (its ``model_options``, e.g. ``llm=``) and
                fields of its settings (``k=8``, ...).

        Returns:
            The built strategy.

        Raises:
            TypeError: An option that is neither a model nor a setting of the strategy.
            ValueError: Empty corpus, documents without text, duplicate document ids, or
                ``workers`` below 1.
            FileExistsError: ``persist_directory`` already holds this strategy's index (and no
                ``store`` was given: open it with ``load``), or is itself a saved index.
        """
        docs = list(documents)
        cores = check_workers(workers)
        settings, models = cls._settings_and_models(config, options)  # checked before a store is made
        if persist_directory is not None:  # before a store is made there, or one given is written
            check_new_index_directory(persist_directory, cls.label)
        collection = collection_name or cls.default_collection
        target = store if store is not None else cls._new_store(persist_directory, collection)
        rag = cls._construct(target, as_embedder(embedder), settings, models, show_progress)
        rag.workers = cores
        return rag._build_into(docs, persist_directory)

    @classmethod
    def from_store(
        cls: type[L],
        store: ChunkStore,
        *,
        embedder: Any = None,
        config: StrategyConfig | None = None,
        show_progress: bool = True,
        workers: int | None = None,
        **options: Any,
    ) -> L:
        """Builds the index over the chunks already in a Chroma collection (not re-embedded).

        Each stored item is a chunk as it is. Its document is named by ``metadata["doc_id"]``,
        else ``metadata["source"]``, else its own id, and holds only chunks whose metadata
        agree apart from the chunks' own keys (two tenants' ``report.pdf`` are two documents,
        ``report.pdf#<hash>``); a document's chunks are ordered by ``chunk_order``, else
        ``start_index``, when every chunk has a distinct one, else by the collection's order
        (:func:`core.strategies.common.document_groups`). Entities a chunk's metadata carries
        from the same extractor (:mod:`core.ingest.precomputed`) are used instead of extracting them.

        Args:
            store: The collection (wrap a chromadb Collection with ``ChunkStore(collection)``).
            embedder: The embedder that produced the stored vectors (used for queries).
            config: Settings; keyword overrides apply on top.
            show_progress: Show progress bars.
            workers: Cores the build uses, as for :meth:`from_documents`; None: every core.
            **options: The strategy's models and fields of its settings, as for
                :meth:`from_documents`.

        Returns:
            The built strategy.

        Raises:
            ValueError: The collection is empty, its dimension differs from the embedder's,
                or ``workers`` is below 1.
        """
        cores = check_workers(workers)
        rag = cls._create(store, embedder, config, show_progress, options)
        rag.workers = cores
        with rag._building():
            rag._index_stored()
        return rag

    @classmethod
    def load(
        cls: type[L],
        path: str | os.PathLike[str],
        *,
        store: ChunkStore | None = None,
        embedder: Any = None,
        refresh_interval: float | None = DEFAULT_REFRESH_INTERVAL,
        memory_map: bool = True,
        **models: Any,
    ) -> L:
        """Loads an index saved by :meth:`save` (or built with ``persist_directory``).

        Nothing is re-embedded or re-extracted, and Chroma is not read: chunk texts and
        metadata come from the index files (memory-mapped), and the collection is opened only
        when the index changes (an add, a delete, a sync).

        Args:
            path: The index directory, or the ``persist_directory`` of :meth:`from_documents`.
            store: The Chroma collection holding the chunks; default: the embedded Chroma under
                ``persist_directory/chroma``, or the server recorded in the manifest.
            embedder: Query embedder; default all-MiniLM-L6-v2. Its dimension must match.
            refresh_interval: Seconds between checks for a newer generation saved by the
                directory's writer, which this object then switches to (see
                :mod:`core.strategies.follow`); None: only an explicit :meth:`refresh`.
            memory_map: Map the large arrays (embedding matrices, vector index, texts,
                links) read-only from the index files instead of reading them into memory,
                so the worker processes of one machine share one copy in the page cache
                (:class:`core.persist.IndexFiles` says what is verified and when). False
                reads everything into this process's memory.
            **models: The strategy's models (its ``model_options``: an entity extractor, an
                LLM, ...), for queries and for documents added later.

        Returns:
            The loaded strategy.

        Raises:
            FileNotFoundError: No index at ``path``.
            TypeError: A keyword that is not one of the strategy's models.
            ValueError: Corrupted files, another format version, a dimension mismatch, or a
                Chroma collection that does not hold the indexed chunks.
        """
        cls._split_options(models, settings_allowed=False)
        return cls._load_saved(path, store, embedder, refresh_interval, memory_map, models)

    @classmethod
    def _split_options(
        cls, options: Mapping[str, Any], *, settings_allowed: bool = True
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """``options`` as (models, settings overrides); an unknown name is a TypeError."""
        models = {k: v for k, v in options.items() if k in cls.model_options}
        settings = {k: v for k, v in options.items() if k not in cls.model_options}
        if settings and not settings_allowed:
            raise TypeError(
                f"{cls.label} takes no model {', '.join(sorted(settings))}; "
                f"its models are: {', '.join(cls.model_options) or 'none'}"
            )
        return models, settings

    @classmethod
    def _create(
        cls: type[L],
        store: ChunkStore | None,
        embedder: Any,
        config: StrategyConfig | None,
        show_progress: bool,
        options: Mapping[str, Any],
    ) -> L:
        """A new, empty strategy from a build's arguments (models and settings split)."""
        settings, models = cls._settings_and_models(config, options)
        return cls._construct(store, as_embedder(embedder), settings, models, show_progress)

    @classmethod
    def _construct(
        cls: type[L],
        store: ChunkStore | None,
        embedder: Embedder,
        config: StrategyConfig,
        models: Mapping[str, Any],
        show_progress: bool = False,
    ) -> L:
        """The strategy's constructor, called from this one place (builds, loads, reloads)."""
        strategy: L = cast(Any, cls)(store, embedder, config=config, show_progress=show_progress, **models)
        return strategy

    @classmethod
    def _settings_and_models(
        cls, config: StrategyConfig | None, options: Mapping[str, Any]
    ) -> tuple[StrategyConfig, dict[str, Any]]:
        """A build's settings (``config`` with the overrides in ``options``) and its models."""
        models, overrides = cls._split_options(options)
        return cls.config_type.merged(config, overrides, cls.label), cls._models(models)

    @classmethod
    def _new_store(cls, persist_directory: str | os.PathLike[str] | None, collection_name: str) -> ChunkStore:
        """The store of a new build: in memory, or an embedded Chroma under the directory."""
        return default_store(persist_directory, collection_name, index_name=cls.name, label=cls.label)

    def _build_into(self: L, docs: list[Document], persist_directory: str | os.PathLike[str] | None) -> L:
        """Indexes a new corpus; with a directory, under its writer lock, saved there after."""
        if not docs:
            raise ValueError("cannot build an index from an empty corpus; pass at least one document")
        if persist_directory is not None:  # one writer: taken before Chroma is touched
            root = Path(persist_directory)
            check_rebuild_store(root, root / self.name, self.store, self.default_collection)
            WriterLock.acquire(root / self.name, self)
        with self._building():
            self._index_documents(docs, first_build=True)
        if persist_directory is not None:
            self.save(Path(persist_directory) / self.name)
        return self

    @classmethod
    def _load_saved(
        cls: type[L],
        path: str | os.PathLike[str],
        store: ChunkStore | None,
        embedder: Any,
        refresh_interval: float | None,
        memory_map: bool,
        options: Mapping[str, Any],
    ) -> L:
        """Loads a saved index: its files checked, its embedder checked, its store found.

        ``options`` go to :meth:`_from_saved` (models a strategy needs for queries); the
        other arguments are those of a strategy's ``load``.

        Raises:
            FileNotFoundError: No index at ``path``.
            ValueError: Corrupted files, another format version, a dimension mismatch, or a
                Chroma collection that does not hold the indexed rows.
        """
        root, index_dir, generation, meta, files = open_index(
            path, cls.name, kind=cls.name, version=cls.index_version, memory_map=memory_map
        )
        emb = as_embedder(embedder)
        check_embedder(emb, meta)
        given = store
        from_manifest = store is None and meta.get("store") is not None
        if from_manifest:
            store = store_from_meta(root, index_dir, meta, cls.default_collection)
        rag = cls._from_saved(store, emb, meta, files, **options)
        rag._restore(files)

        def reload(old: L) -> L:
            # A collection found through the manifest is found again through the new one: a
            # rebuild may have replaced it (UMG-RAG's side collection), and the store opens lazily.
            if from_manifest:
                try:
                    return cls._load_saved(
                        index_dir, None, old.embedder, None, memory_map, old._reload_options()
                    )
                except (ValueError, FileNotFoundError):
                    pass  # the new manifest names no store to find (a worker's wrapped collection)
            # The store the caller gave, as it is now: a rebuild may have made it anew, or the
            # one a strategy opened beside it (UMG-RAG's windows).
            again = given.current() if given is not None else None
            where = again or given or old.store
            return cls._load_saved(index_dir, where, old.embedder, None, memory_map, old._reload_options())

        rag._follow(index_dir, generation, refresh_interval, reload)
        return rag

    # ------------------------------------------------------------------ hooks
    def _index_documents(self, docs: list[Document], *, first_build: bool) -> list[str]:
        """Chunks, embeds, stores and indexes documents; returns their ids."""
        raise NotImplementedError  # pragma: no cover

    def _forget_rows(self, rows: Sequence[int]) -> None:
        """Drops deleted rows from the strategy's own structures (the table already did)."""

    def _after_change(self) -> None:
        """Slow work a change left to do outside its exclusive block (Bridge-RAG's LLM summaries)."""

    def _check_writable(self, what: str) -> None:
        """Raises when this index cannot be changed (Bubble over a bare graph has no store)."""

    def _index_files(self) -> dict[str, bytes]:
        """The strategy's own files for :meth:`save` (the table's are added by the base)."""
        raise NotImplementedError  # pragma: no cover

    def _manifest(self) -> dict[str, Any]:
        """Extra manifest entries for :meth:`save` (config, embedder and store are the base's)."""
        return {}

    @classmethod
    def _from_saved(
        cls: type[L],
        store: ChunkStore | None,
        embedder: Embedder,
        meta: Mapping[str, Any],
        files: Mapping[str, FileData],
        **options: Any,
    ) -> L:
        """A new, empty strategy with the saved settings (``_restore`` fills it from ``files``).

        ``options`` are the strategy's constructor arguments (its models).
        """
        config = cls.config_type.from_dict(meta.get("config", {}))
        return cls._construct(store, embedder, config, cls._models(options))

    @classmethod
    def _models(cls, models: Mapping[str, Any]) -> dict[str, Any]:
        """The constructor's model arguments from what a caller passed (a strategy converts them)."""
        return dict(models)

    def _index_stored(self) -> None:
        """Indexes the chunks already in ``self.store`` (:meth:`from_store`)."""
        raise NotImplementedError(f"{self.label} cannot be built from a store")  # pragma: no cover

    def _restore(self, files: Mapping[str, FileData]) -> None:
        """Rebuilds the strategy's structures from its saved files."""
        raise NotImplementedError  # pragma: no cover

    def _reload_options(self) -> dict[str, Any]:
        """What :meth:`_from_saved` needs again when a follower reloads (models)."""
        return {}

    # ------------------------------------------------------------------ queries
    def _query_args(
        self,
        query: str,
        k: int | None,
        filter: Mapping[str, Any] | MetadataFilter | None,
        options: Mapping[str, Any],
    ) -> tuple[str, int, MetadataFilter | None]:
        """A ``retrieve`` call's query, ``k`` and filter, checked; an unknown option is refused.

        Checked before the query is embedded (a remote embedder costs a call).

        Raises:
            TypeError: ``query`` is not a str, ``k`` not an int, or an unknown option.
            ValueError: Empty or over-long query, or ``k`` < 1.
            core.filters.FilterError: A malformed filter, or one the index cannot honour.
        """
        if options:
            raise TypeError(
                f"unknown retrieve option(s): {', '.join(sorted(options))}; "
                f"{type(self).__name__}.retrieve takes k and {', '.join(self.retrieve_options)}"
            )
        text = check_query(query, self.config.max_query_chars)
        return text, check_k(k, self.config.k), self._check_filter(filter)

    def _check_filter(self, filter: Mapping[str, Any] | MetadataFilter | None) -> MetadataFilter | None:
        """The parsed filter (a strategy refuses those its structures cannot honour)."""
        return parse_filter(filter)

    # ------------------------------------------------------------------ plumbing
    def _store_rows(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        vectors: Any,
        metadatas: Sequence[Mapping[str, Any]],
        *,
        first_build: bool,
    ) -> None:
        """Writes new rows to Chroma; an update first replaces orphans an interrupted write left.

        A process killed between its Chroma write and its save leaves rows in the collection
        that the saved index does not hold; the same documents indexed again have the same
        chunk ids. In an update (not a first build, which must not take over a collection
        another index fills) those ids, stored but not rows of this index, are deleted first,
        so the next update repairs the collection instead of failing on "ids already in the
        collection".
        """
        store = self.store
        known = self._table.id_to_row
        unknown = [i for i in ids if i not in known] if not first_build else []
        orphans = store.existing(unknown) if unknown else []
        if orphans:
            logger.warning(
                "bridge-rag: replacing %d chunk(s) an interrupted write left in %r (e.g. %r)",
                len(orphans),
                store.name,
                orphans[0],
            )
            self._deleted_from_store()
            store.delete(orphans)
        store.add(ids, texts, vectors, metadatas, show_progress=getattr(self, "show_progress", False))

    @contextmanager
    def _building(self) -> Iterator[None]:
        """While a build or an update indexes: its stages announced, every worker core in use."""
        with stage_lines(self.show_progress), using_cores(self.workers):
            yield

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One change at a time on this object (threads calling add / delete together)."""
        mutex: threading.RLock | None = self.__dict__.get("_write_mutex")
        if mutex is None:  # first use: setdefault is atomic, so racing threads share one mutex
            mutex = self.__dict__.setdefault("_write_mutex", threading.RLock())
        with mutex:
            yield

    def _autosave(self) -> None:
        """Saves to the directory the index was loaded from or saved to, if any."""
        if self.persist_path is not None:
            self.save(self.persist_path)


class ChunkedIndex(IndexLifecycle):
    """A strategy over chunks it cuts itself (Bridge-RAG, BubbleRAG): their size and count.

    New documents are chunked, embedded and stored here the same way for every such
    strategy; the strategy indexes the stored rows in its own structures (:meth:`_extend`).
    """

    report: BuildReport
    show_progress: bool

    def _index_documents(self, docs: list[Document], *, first_build: bool) -> list[str]:
        with timed(self.report, "chunk"):
            doc_ids, rows = chunk_new_documents(
                docs,
                self._table.doc_rows,
                chunk_size=self.chunk_size,
                chunk_overlap=self.config.chunk_overlap,
            )
        with timed(self.report, "embed"):
            embeddings = embed_in_batches(self.embedder, rows.texts, show_progress=self.show_progress)
        with timed(self.report, "store"):
            self._store_rows(rows.ids, rows.texts, embeddings, rows.metadatas, first_build=first_build)
        self._extend(rows, normalise_rows(embeddings), first_build=first_build)
        return doc_ids

    def _extend(self, rows: ChunkRows, embeddings: FloatMatrix, *, first_build: bool) -> None:
        """Indexes chunk rows already in Chroma (unit-normalised embeddings) in the strategy's structures."""
        raise NotImplementedError  # pragma: no cover

    def _sync_candidates(self) -> list[str]:
        """The chunk ids new to the index, gone from the collection or changed there."""
        return [cid for ids in self._store_changes() for cid in ids]

    def _sync_locked(self, candidates: Sequence[str]) -> Synced:
        new, gone, changed = self._store_changes(candidates)
        with self._lock:
            stale = sorted(self._table.id_to_row[cid] for cid in [*gone, *changed])
        if stale:
            self._drop_rows(stale, from_store=False)
        try:
            if stale:
                self._after_change()
            added = [*new, *changed]
            if added:
                try:
                    rows, vectors = added_stored_rows(self.store, added, self._table)
                except KeyError:  # deleted again meanwhile: take what is still there
                    added = self.store.existing(added)
                    rows, vectors = added_stored_rows(self.store, added, self._table)
                if added:
                    self._extend(rows, vectors, first_build=False)
        finally:
            if stale or new or changed:  # what was removed is saved even if the rest failed
                self._autosave()
        return Synced(len(new), len(gone), len(changed))

    def _store_changes(self, only: Sequence[str] | None = None) -> tuple[list[str], list[str], list[str]]:
        """The collection's ids that are new to the index, gone from the collection, and changed there.

        Args:
            only: Check these ids alone (a writer re-checking what a reader found); None: the
                whole collection.
        """
        new: dict[str, None] = {}
        changed: dict[str, None] = {}
        seen: set[str] = set()
        for page in self.store.pages() if only is None else [self._stored_now(only)]:
            with self._lock:
                table = self._table
                for cid, text, meta in zip(page.ids, page.texts, page.metadatas, strict=True):
                    seen.add(cid)
                    row = table.id_to_row.get(cid)
                    if row is None:
                        new[cid] = None
                    elif table.texts[row] != text or table.metadatas[row] != stored_row_metadata(meta):
                        changed[cid] = None
        with self._lock:
            known = self._table.id_to_row
            unseen = [cid for cid in (known if only is None else only) if cid in known and cid not in seen]
        # pages read while the app deletes can skip an id: gone only if the collection says so
        # (ids read by id were just asked for: those not read are gone)
        still = set(self.store.existing(unseen)) if unseen and only is None else set()
        return list(new), [cid for cid in unseen if cid not in still], list(changed)

    def _stored_now(self, ids: Sequence[str]) -> StoredChunks:
        """Those of ``ids`` the collection holds, with their texts and metadata."""
        store: ChunkStore = self.store
        while True:
            try:
                return store.get(store.existing(ids), include_embeddings=False)
            except KeyError:  # deleted between the two reads: ask again
                continue

    @property
    def chunk_size(self) -> int:
        """The chunk size in use: ``config.chunk_size``, or what fits the embedder's window."""
        size: int | None = self.config.chunk_size
        return size if size is not None else window_chars(self.embedder)

    @property
    def num_chunks(self) -> int:
        """Live chunks in the index."""
        return self._table.num_live

    @property
    def chunk_table(self) -> ChunkTable:
        """The chunk rows (ids, texts, vectors, liveness), for pieces built on the index; read only."""
        return self._table
