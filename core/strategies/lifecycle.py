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
  (:meth:`ChunkTable.to_files`), so no later generation holds them.

A strategy supplies three hooks: :meth:`_index_documents` (chunk, embed, store and index new
documents), :meth:`_forget_rows` (drop deleted rows from its own structures) and ``save``'s
own files.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from core.filters import MetadataFilter, parse_filter
from core.strategies.base import check_doc_ids
from core.strategies.follow import Follows
from core.strategies.table import ChunkTable
from core.types import Document

__all__ = ["IndexLifecycle"]


class IndexLifecycle(Follows):
    """Base of the strategies: :meth:`add_documents`, :meth:`delete_documents` and autosave.

    Subclasses set ``store``, ``_table`` and ``_lock`` (an RLock guarding their structures)
    and implement the hooks.
    """

    store: Any
    _table: ChunkTable
    _lock: threading.RLock

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
            core.filters.FilterError: A malformed filter.
        """
        names = check_doc_ids(doc_ids)
        flt = parse_filter(filter)
        self._check_writable("delete_documents")
        with self._writing():
            self._hold_writer_lock()
            with self._lock:
                rows = self._table.rows_named(names, flt)
            if not rows:
                return 0
            self.store.delete([self._table.ids[r] for r in rows])  # Chroma first: a failure changes nothing
            with self._changing(), self._lock:
                self._table.remove_rows(rows)
                self._forget_rows(rows)
            self._autosave()
        return len(rows)

    def save(self, path: Any) -> None:  # pragma: no cover - every strategy defines it
        """Saves the index atomically to the directory ``path``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ hooks
    def _index_documents(self, docs: list[Document], *, first_build: bool) -> list[str]:
        """Chunks, embeds, stores and indexes documents; returns their ids."""
        raise NotImplementedError  # pragma: no cover

    def _forget_rows(self, rows: Sequence[int]) -> None:
        """Drops deleted rows from the strategy's own structures (the table already did)."""

    def _check_writable(self, what: str) -> None:
        """Raises when this index cannot be changed (Bubble over a bare graph has no store)."""

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One change at a time on this object (threads calling add / delete together)."""
        mutex: threading.RLock = self.__dict__.setdefault("_write_mutex", threading.RLock())
        with mutex:
            yield

    def _autosave(self) -> None:
        """Saves to the directory the index was loaded from or saved to, if any."""
        if self.persist_path is not None:
            self.save(self.persist_path)
