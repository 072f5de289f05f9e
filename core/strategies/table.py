"""The indexed-chunk table every strategy keeps in memory.

Chroma is the source of truth for texts, metadata and vectors; a strategy keeps the rows it
indexed in a :class:`ChunkTable` (ids, document ids, texts, metadata, a live mask, the
normalised embedding matrix, and document -> rows) so that a query never waits on Chroma.
Rows are appended in index order and never move; deleting a document marks its rows dead.
Texts and metadata are saved with the index as packed strings (:mod:`core.packed_strings`),
which a loaded table maps read-only instead of reading them back from Chroma: the workers of
one machine share them, and a load reads no chunk from the store.
Updates run under the strategy's write lock and replace the ``alive`` and ``matrix`` arrays
instead of changing them in place; a query running meanwhile reads each array whole, old or
new, but may see one array before the update and the other after it (the lists only grow).
The table also keeps the lexical index of its live rows (:meth:`ChunkTable.lexical`: BM25),
built anew after a change, the first time it is asked for.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from core.filters import MetadataColumns, MetadataFilter
from core.lexical import LexicalIndex
from core.packed_strings import PackedJson, PackedStrings
from core.persist import FileData, array_from_bytes, array_to_bytes
from core.store import ChunkStore, StoredChunks, sanitize_metadata
from core.strategies.base import check_text
from core.strategies.common import (
    DOC_ID_KEY,
    DOCUMENT_NAME_KEYS,
    EMPTY_COLLECTION,
    ORDER_KEY,
    doc_id_of,
    document_groups,
    document_key,
    normalise_rows,
    public_metadata,
    read_from_store,
    suffixed_name,
)
from core.text import chunk_document, make_doc_id
from core.types import Document

__all__ = ["ChunkRows", "ChunkTable", "check_new_documents", "chunk_new_documents", "stored_rows"]

FloatMatrix = npt.NDArray[np.float32]


#: File-name stem of the saved row texts and metadata (:meth:`ChunkTable.to_files`).
_TEXTS, _METADATA = "row_texts", "row_metadata"
#: File-name prefix of the saved lexical index, and the file of its rows.
_LEXICAL, _LEXICAL_ROWS = "lexical.", "lexical_rows.npy"


@dataclass
class ChunkRows:
    """A batch of chunk rows (new ones to index, or a table's own) in index order.

    A batch to index holds lists; a table's own texts and metadata are packed
    (:class:`core.packed_strings.PackedStrings`), read-only sequences that decode on access.
    """

    ids: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    texts: Sequence[str] = field(default_factory=list)
    metadatas: Sequence[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


class ChunkTable:
    """The rows a strategy indexed, with their live mask and embedding matrix.

    Attributes:
        rows: Ids, document ids, texts and metadata, one entry per row.
        alive: Whether each row is still indexed.
        matrix: One unit-length float32 embedding per row.
        doc_rows: Live rows of each document.
        id_to_row: Row of each live chunk id.
    """

    def __init__(self, dimension: int) -> None:
        self.rows = ChunkRows(texts=PackedStrings(), metadatas=PackedJson())
        self.alive: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self.matrix: FloatMatrix = np.zeros((0, dimension), dtype=np.float32)
        self.doc_rows: dict[str, list[int]] = {}
        self.id_to_row: dict[str, int] = {}
        self._columns = MetadataColumns(lambda: self.rows.metadatas)
        # The lexical index and the live mask it was built for (a change replaces the mask).
        self._lexical: tuple[npt.NDArray[np.bool_], LexicalIndex] | None = None

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self.rows.ids)

    @property
    def ids(self) -> list[str]:
        """Chunk id of every row."""
        return self.rows.ids

    @property
    def doc_ids(self) -> list[str]:
        """Document id of every row."""
        return self.rows.doc_ids

    @property
    def texts(self) -> Sequence[str]:
        """Text of every row (read-only; decoded on access)."""
        return self.rows.texts

    @property
    def metadatas(self) -> Sequence[dict[str, Any]]:
        """Metadata of every row (read-only; each access gives a new dict)."""
        return self.rows.metadatas

    def result_metadata(self, row: int) -> dict[str, Any]:
        """A new dict of the row's metadata for a result, with its ``doc_id`` filled in."""
        meta = self.rows.metadatas[row]
        meta.setdefault(DOC_ID_KEY, self.doc_ids[row])
        return meta

    @property
    def num_live(self) -> int:
        """Rows still indexed."""
        return int(self.alive.sum())

    def live_mask(self, flt: MetadataFilter | None = None) -> npt.NDArray[np.bool_]:
        """The live rows that pass a metadata filter (the live mask itself without one).

        Args:
            flt: A parsed filter (:func:`core.filters.parse_filter`), or None.

        Returns:
            One bool per row; a new array when ``flt`` is given.
        """
        alive = self.alive
        if flt is None:
            return alive
        passing = self._columns.mask(flt)
        return alive & passing[: alive.shape[0]]

    def lexical(self) -> LexicalIndex:
        """BM25 over the live rows' texts (:class:`core.lexical.LexicalIndex`).

        Built on first use after a change (every add or delete replaces :attr:`alive`, which
        makes the index it was built for stale), so a deleted row's words leave it. Queries
        side by side may each build it once; the index is published with one assignment, so
        a query sees either the old or the whole new one.
        """
        alive = self.alive
        cached = self._lexical
        if cached is None or cached[0] is not alive:
            cached = (alive, LexicalIndex.build(self.texts, np.flatnonzero(alive)))
            self._lexical = cached
        return cached[1]

    def rows_of(self, doc_ids: Iterable[str]) -> list[int]:
        """Live rows of the documents, sorted (unknown ids have none)."""
        return sorted({r for d in doc_ids for r in self.doc_rows.get(str(d), [])})

    # ------------------------------------------------------------------ updates
    def append(self, rows: ChunkRows, vectors: FloatMatrix) -> int:
        """Appends rows and their (unit-length) vectors; returns the first new row's index.

        Raises:
            ValueError: ``vectors`` does not have one row per chunk of the table's dimension.
        """
        if vectors.shape != (len(rows), self.matrix.shape[1]):
            raise ValueError(
                f"{len(rows)} rows need a ({len(rows)}, {self.matrix.shape[1]}) matrix, got {vectors.shape}"
            )
        base = len(self)
        self.rows.texts = _packed_texts(self.rows.texts).extended(rows.texts)
        # kept as Chroma stores them (what a load from Chroma gave before, and what filters see)
        self.rows.metadatas = _packed_metadata(self.rows.metadatas).extended(
            [sanitize_metadata(m) for m in rows.metadatas]
        )
        self.rows.ids += rows.ids
        self.rows.doc_ids += rows.doc_ids
        for i, (cid, did) in enumerate(zip(rows.ids, rows.doc_ids, strict=True)):
            self.id_to_row[cid] = base + i
            self.doc_rows.setdefault(did, []).append(base + i)
        self.matrix = np.ascontiguousarray(np.vstack([self.matrix, vectors]), dtype=np.float32)
        self.alive = np.concatenate([self.alive, np.ones(len(rows), dtype=bool)])
        return base

    def remove_rows(self, rows: Sequence[int]) -> None:
        """Marks rows dead (a document keeps its other rows)."""
        if not rows:
            return
        alive = self.alive.copy()
        alive[list(rows)] = False
        self.alive = alive
        for r in rows:
            self.id_to_row.pop(self.rows.ids[r], None)
        for doc in {self.rows.doc_ids[r] for r in rows}:
            left = [x for x in self.doc_rows.get(doc, []) if alive[x]]
            if left:
                self.doc_rows[doc] = left
            else:
                self.doc_rows.pop(doc, None)

    def rows_named(self, names: Sequence[str], flt: MetadataFilter | None = None) -> list[int]:
        """The live rows a delete names: documents by id, or by the name their chunks carry.

        A name is a document id, or a ``doc_id`` / ``source`` / ``ref_doc_id`` /
        ``document_id`` its chunks carry (:data:`core.strategies.common.DOCUMENT_NAME_KEYS`):
        two tenants' ``report.pdf`` are two documents (``report.pdf#...``) that both carry the
        name ``report.pdf``. A document's id names that document alone, unless the filter
        leaves none of it (another tenant's id): it is then read as a name.

        Args:
            names: Document ids or names.
            flt: Only rows that pass this filter (a tenant's) are named.

        Returns:
            The rows, sorted.

        Raises:
            ValueError: Without a filter, a name carried by several documents whose metadata
                disagree apart from the chunks' own keys (two tenants' ``report.pdf``; say which, and
                how to name one). Documents that agree (the nodes LlamaIndex parsed from one
                document, inserted one by one) are all removed.
        """
        mask = self.live_mask(flt)
        # A document's id names that document, unless the filter leaves none of it (another
        # tenant's), or other documents were named after it (``id#<hash>``: another tenant's
        # same-named document a sync took in): then, as any other name, it names the
        # documents whose chunks carry it.
        named_after = self.shared_names()
        by_name = {
            n: {n}
            for n in set(names)
            if n in self.doc_rows and n not in named_after and any(mask[r] for r in self.doc_rows[n])
        }
        wanted = set(names) - set(by_name)
        if wanted:
            for r in np.flatnonzero(mask).tolist():
                meta = self.rows.metadatas[r]
                for name in wanted.intersection(str(meta[k]) for k in DOCUMENT_NAME_KEYS if k in meta):
                    by_name.setdefault(name, set()).add(self.rows.doc_ids[r])
        if flt is None:  # documents that carry one name and disagree on metadata: whose?
            shared = {
                n: docs for n, docs in by_name.items() if len({self._metadata_key(d) for d in docs}) > 1
            }
            if shared:
                name, docs = next(iter(shared.items()))
                plain = (
                    f" ({name!r} is both a document's id and their shared name, so that one is named by "
                    "a filter)"
                    if name in docs
                    else ""
                )
                raise ValueError(
                    f"{len(docs)} documents carry the name {name!r} (their other metadata differ: "
                    f"{', '.join(sorted(docs))}); delete one by its id, or pass filter=... (e.g. "
                    f"the tenant's) to delete only the chunks that pass it{plain}"
                )
        rows = self.rows_of({d for ds in by_name.values() for d in ds})
        return [r for r in rows if mask[r]] if flt is not None else rows

    def shared_names(self) -> set[str]:
        """Names several documents share: those their ids carry as ``name#<hash>``."""
        return {d.split("#", 1)[0] for d in self.doc_rows if "#" in d}

    def _metadata_key(self, doc: str) -> str:
        """What a document's chunks share (:func:`~core.strategies.common.document_key`)."""
        return document_key(self.rows.metadatas[self.doc_rows[doc][0]])

    # ------------------------------------------------------------------ persistence
    @property
    def has_dead_rows(self) -> bool:
        """Whether a delete left rows that a save must blank."""
        return not bool(self.alive.all())

    def to_json(self) -> dict[str, Any]:
        """Ids, document ids and the live mask as JSON data (texts and metadata: :meth:`to_files`).

        A deleted row's chunk id and document id are saved empty: nothing of it is written.
        """
        ids, doc_ids = self.rows.ids, self.rows.doc_ids
        if self.has_dead_rows:
            alive = self.alive.tolist()
            ids = [x if a else "" for x, a in zip(ids, alive, strict=True)]
            doc_ids = [x if a else "" for x, a in zip(doc_ids, alive, strict=True)]
        return {"ids": ids, "doc_ids": doc_ids, "alive": self.alive.astype(int).tolist()}

    def to_files(self) -> dict[str, bytes]:
        """The rows' texts and metadata as packed-string files (saved beside :meth:`to_json`).

        A deleted row is saved with an empty text and empty metadata.
        """
        texts: Sequence[str] = self.rows.texts
        metadatas: Sequence[dict[str, Any]] = self.rows.metadatas
        if self.has_dead_rows:
            alive = self.alive.tolist()
            texts = [t if a else "" for t, a in zip(texts, alive, strict=True)]
            metadatas = [m if a else {} for m, a in zip(metadatas, alive, strict=True)]
        files = {**PackedStrings.to_files(texts, _TEXTS), **PackedJson.to_files(metadatas, _METADATA)}
        if self._lexical is not None:  # the lexical index, once a strategy uses it (of the live rows)
            expert_files, rows = self.lexical().to_files()
            files.update({f"{_LEXICAL}{name}": blob for name, blob in expert_files.items()})
            files[_LEXICAL_ROWS] = array_to_bytes(rows)
        return files

    def saved_matrix(self) -> FloatMatrix:
        """The embedding matrix to save: a deleted row's vector is zeros."""
        if not self.has_dead_rows:
            return self.matrix
        out = np.array(self.matrix, dtype=np.float32, copy=True)
        out[~self.alive] = 0.0
        return out

    @classmethod
    def restore(
        cls,
        data: Mapping[str, Any],
        matrix: FloatMatrix,
        *,
        store: ChunkStore | None,
        what: str = "chunks",
        texts: Sequence[str] | None = None,
        files: Mapping[str, FileData] | None = None,
    ) -> ChunkTable:
        """Rebuilds a table saved with :meth:`to_json` and :meth:`to_files`.

        Texts and metadata come from the saved files (memory-mapped when ``files`` are an
        :class:`core.persist.IndexFiles`); an index saved before they were saved reads the
        live rows' texts and metadata from Chroma instead.

        Args:
            data: The saved ids, document ids and live mask.
            matrix: The saved embedding matrix.
            store: The Chroma collection holding the chunks (None: ``texts`` are given).
            what: What the rows are, for error messages.
            texts: Saved texts, for a table saved without a store before the texts files existed.
            files: The index files, which hold :meth:`to_files` output in current saves.

        Raises:
            ValueError: The saved parts disagree in size, or the collection lacks a live row.
        """
        if files is not None and f"{_TEXTS}.npy" in files:
            try:
                packed_texts = PackedStrings.from_files(files, _TEXTS)
                packed_meta = PackedJson.from_files(files, _METADATA)
            except KeyError as exc:
                raise ValueError(f"the index is missing {exc}; rebuild it") from exc
            table = cls._restore_rows(data, matrix, packed_texts, packed_meta)
            table._restore_lexical(files)
            if store is not None and not store.is_deferred:
                _check_store_holds(store, table, what)
            return table
        n = len(data.get("ids", ()))
        row_texts = [str(t) for t in texts] if texts is not None else [""] * n
        metas: list[dict[str, Any]] = [{} for _ in range(n)]
        if store is not None:
            ids = [str(x) for x in data.get("ids", ())]
            alive = np.asarray(data.get("alive", []), dtype=bool)
            if alive.shape == (n,):
                stored = read_from_store(store, [ids[i] for i in range(n) if alive[i]], what)
                if stored is not None:
                    lookup = {cid: i for i, cid in enumerate(ids)}
                    for cid, text, meta in zip(stored.ids, stored.texts, stored.metadatas, strict=True):
                        row_texts[lookup[cid]] = text or ""
                        metas[lookup[cid]] = dict(meta or {})
        return cls._restore_rows(data, matrix, PackedStrings(tail=row_texts), PackedJson().extended(metas))

    def _restore_lexical(self, files: Mapping[str, FileData]) -> None:
        """Takes the saved lexical index when it covers exactly the live rows (else it is built anew).

        Raises:
            ValueError: A malformed lexical index.
        """
        if _LEXICAL_ROWS not in files:
            return  # saved before the table kept one, or by a strategy that uses none
        rows = array_from_bytes(files[_LEXICAL_ROWS], dtype=np.int64, ndim=1)
        if not np.array_equal(rows, np.flatnonzero(self.alive)):
            raise ValueError("the lexical index disagrees with the live rows; rebuild the index")
        expert = {n[len(_LEXICAL) :]: blob for n, blob in files.items() if n.startswith(_LEXICAL)}
        self._lexical = (self.alive, LexicalIndex.from_files(expert, rows))

    @classmethod
    def _restore_rows(
        cls,
        data: Mapping[str, Any],
        matrix: FloatMatrix,
        texts: PackedStrings,
        metadatas: PackedJson,
    ) -> ChunkTable:
        try:
            ids = [str(x) for x in data["ids"]]
            doc_ids = [str(x) for x in data["doc_ids"]]
            alive = np.asarray(data["alive"], dtype=bool)
        except KeyError as exc:
            raise ValueError(f"the index is missing {exc}; rebuild it") from exc
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the index files are malformed ({exc}); rebuild the index") from exc
        n = len(ids)
        sizes = {len(doc_ids), len(texts), len(metadatas), alive.shape[0] if alive.ndim == 1 else -1}
        if sizes != {n} or matrix.ndim != 2 or matrix.shape[0] != n:
            raise ValueError(
                "the index files disagree with each other (sizes or dimensions); rebuild the index"
            )
        table = cls(matrix.shape[1])
        table.rows = ChunkRows(ids=ids, doc_ids=doc_ids, texts=texts, metadatas=metadatas)
        table.alive = alive
        table.matrix = (
            matrix
            if matrix.dtype == np.float32 and matrix.flags.c_contiguous
            else (np.ascontiguousarray(matrix, dtype=np.float32))
        )
        for i, (cid, did) in enumerate(zip(ids, doc_ids, strict=True)):
            if alive[i]:
                table.id_to_row[cid] = i
                table.doc_rows.setdefault(did, []).append(i)
        return table


#: Live rows looked up in a collection the caller passed to ``load``, to tell a wrong one.
_STORE_SAMPLE = 64


def _check_store_holds(store: ChunkStore, table: ChunkTable, what: str) -> None:
    """Checks cheaply that a collection passed in holds the table's live rows.

    The collection must hold at least as many items as the table has live rows, and a sample
    of them spread over the table; the index never reads the chunks themselves back (its
    own files hold them).

    Raises:
        ValueError: The collection holds fewer items, or lacks a sampled one.
    """
    live = [table.ids[i] for i in np.flatnonzero(table.alive)]
    if not live:
        return
    count = store.count()
    if count < len(live):
        raise ValueError(
            f"the Chroma collection {store.name!r} does not hold the indexed {what} ({count:,} items for "
            f"{len(live):,} {what}); pass the collection the index was built over, or rebuild the index"
        )
    step = max(1, len(live) // _STORE_SAMPLE)
    read_from_store(store, live[::step], what)


def _packed_texts(column: Sequence[str]) -> PackedStrings:
    return column if isinstance(column, PackedStrings) else PackedStrings(tail=column)


def _packed_metadata(column: Sequence[dict[str, Any]]) -> PackedJson:
    return column if isinstance(column, PackedJson) else PackedJson().extended(column)


def check_new_documents(docs: Sequence[Any], known: Container[str]) -> list[tuple[str, Document]]:
    """Validates documents to index and gives each its id (derived from the text when it has none).

    Args:
        docs: The documents.
        known: Ids already indexed.

    Returns:
        ``(document id, document)`` pairs, in order.

    Raises:
        TypeError: An item is not a :class:`core.types.Document`.
        ValueError: A document has no text or invalid Unicode, or an id is repeated or taken.
    """
    out: list[tuple[str, Document]] = []
    seen: set[str] = set()
    for i, doc in enumerate(docs):
        if not isinstance(doc, Document):
            raise TypeError(
                f"document {i} is a {type(doc).__name__}; pass core.types.Document objects "
                "(the framework adapters convert LangChain / LlamaIndex documents)"
            )
        if not isinstance(doc.text, str) or not doc.text.strip():
            raise ValueError(f"document {i} (id {doc.id!r}) has no text; remove it or give it text")
        check_text(doc.text, f"document {i} (id {doc.id!r})")
        did = doc.id if doc.id is not None else make_doc_id(doc.text)
        if did in seen or did in known:
            hint = " (two documents have the same text and no id)" if doc.id is None else ""
            raise ValueError(f"duplicate document id {did!r}{hint}; document ids must be unique")
        seen.add(did)
        out.append((did, doc))
    return out


def chunk_new_documents(
    docs: Sequence[Any], known: Container[str], *, chunk_size: int, chunk_overlap: int
) -> tuple[list[str], ChunkRows]:
    """Validates documents and splits them into chunk rows with bridge-rag's chunk metadata.

    Every chunk's metadata is its document's plus ``doc_id``, ``chunk_order``,
    ``start_index`` and ``end_index``.

    Returns:
        The document ids and the rows.

    Raises:
        TypeError, ValueError: As :func:`check_new_documents`.
    """
    ids: list[str] = []
    doc_ids: list[str] = []
    texts: list[str] = []
    metadatas: list[dict[str, Any]] = []
    pairs = check_new_documents(docs, known)
    for did, doc in pairs:
        for ch in chunk_document(doc, doc_id=did, chunk_size=chunk_size, chunk_overlap=chunk_overlap):
            meta = dict(ch.metadata)
            meta.update({DOC_ID_KEY: did, ORDER_KEY: ch.order, "start_index": ch.start, "end_index": ch.end})
            ids.append(ch.id)
            doc_ids.append(did)
            texts.append(ch.text)
            metadatas.append(meta)
    return [did for did, _ in pairs], ChunkRows(ids, doc_ids, texts, metadatas)


def stored_rows(store: ChunkStore, dimension: int, *, ordered: bool) -> tuple[ChunkRows, FloatMatrix]:
    """The chunks already in a Chroma collection as rows, with their unit-length vectors.

    Nothing is re-embedded. A chunk's document is named by its ``doc_id`` / ``source`` /
    ``ref_doc_id`` metadata, else its own id, and holds only chunks whose metadata agree
    apart from the chunks' own keys (:func:`core.strategies.common.document_groups`).

    Args:
        store: The collection.
        dimension: The embedder's dimension, which the stored vectors must have.
        ordered: Group the rows by document in chunk order
            (:func:`core.strategies.common.collection_order`) instead of the collection's order.

    Raises:
        ValueError: The collection is empty, or its vectors have another dimension.
    """
    stored = store.get(include_embeddings=True)
    if not stored.ids:
        raise ValueError(EMPTY_COLLECTION)
    assert stored.embeddings is not None
    if stored.embeddings.shape[1] != dimension:
        raise ValueError(
            f"the collection's embeddings have dimension {stored.embeddings.shape[1]}, but the embedder "
            f"produces {dimension}; pass the embedder the collection was built with"
        )
    groups = document_groups(stored.ids, stored.metadatas)
    doc_of = {i: doc for doc, members in groups.items() for i in members}
    order = [i for members in groups.values() for i in members] if ordered else list(range(len(stored.ids)))
    return _as_rows(stored, order, doc_of)


def stored_row_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """A stored chunk's metadata as a row of the table keeps it (what the strategies and filters read)."""
    return sanitize_metadata(public_metadata(metadata))


def _as_rows(
    stored: StoredChunks, order: Sequence[int], doc_of: Mapping[int, str]
) -> tuple[ChunkRows, FloatMatrix]:
    """Stored chunks, in ``order``, as rows of the documents ``doc_of`` names, with unit vectors."""
    assert stored.embeddings is not None
    rows = ChunkRows(
        ids=[stored.ids[i] for i in order],
        doc_ids=[doc_of[i] for i in order],
        texts=[stored.texts[i] or "" for i in order],
        metadatas=[public_metadata(stored.metadatas[i]) for i in order],
    )
    return rows, normalise_rows(stored.embeddings[order])


def added_stored_rows(
    store: ChunkStore, ids: Sequence[str], table: ChunkTable
) -> tuple[ChunkRows, FloatMatrix]:
    """Chunks added to the collection behind the index's back, as new rows of ``table``.

    They are grouped into documents by the rule of :func:`stored_rows`. A group joins the
    table's document of the same name only when their metadata agree apart from the chunks'
    own keys (:data:`~core.strategies.common.CHUNK_KEYS`); otherwise it is a document of its
    own, ``name#<hash>``, as a build over the whole collection would name it (another
    tenant's ``report.pdf`` never joins this one's).

    Raises:
        KeyError: An id is no longer in the collection.
        ValueError: The stored vectors have another dimension than the table's.
    """
    stored = store.get(ids, include_embeddings=True)
    assert stored.embeddings is not None
    dimension = table.matrix.shape[1]
    if stored.ids and stored.embeddings.shape[1] != dimension:
        raise ValueError(
            f"chunks added to the collection have dimension {stored.embeddings.shape[1]}, the index "
            f"{dimension}; add them with the embedding function the store was built with"
        )
    shared = table.shared_names()
    order: list[int] = []
    doc_of: dict[int, str] = {}
    for group, members in document_groups(stored.ids, stored.metadatas).items():
        first = members[0]
        name, key = (
            doc_id_of(stored.ids[first], stored.metadatas[first]),
            document_key(stored.metadatas[first]),
        )
        doc = group
        if name in table.doc_rows and table._metadata_key(name) == document_key(
            stored_row_metadata(stored.metadatas[first])
        ):
            doc = name
        elif name in table.doc_rows or name in shared:
            doc = suffixed_name(name, key)
        order += members
        doc_of.update(dict.fromkeys(members, doc))
    return _as_rows(stored, order, doc_of)
