"""What a UMG-RAG index built over a collection knows of it, to follow the app's later writes.

UMG-RAG re-cuts a collection's chunks into sentence windows of whole documents
(:func:`core.strategies.common.documents_from_chunks`), so it follows the collection a
document at a time. Of each document it took from the collection it records (:class:`Followed`)
a signature (a hash of its rebuilt text and metadata), its name and the ids of the chunks it
was rebuilt from; a document whose signature changed, or that is new or gone, is re-cut,
added or removed, and one the app stored anew with the same text and metadata (new chunk
ids) only has its record renewed. No text of a document is kept here, and a deleted
document's record leaves with it.

A document deleted through the retriever leaves the collection too
(:func:`delete_source_documents`), so no sync brings it back: exactly the chunks it was
rebuilt from, while they still carry its name and pass the delete's filter. Chunks the app
added to it since (not yet synced) stay, as does a chunk under a reused id that now belongs
to another document or, with a tenant's filter, to another tenant.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from core.filters import MetadataFilter
from core.store import ChunkStore, StoredChunks
from core.strategies.common import (
    DOCUMENT_NAME_KEYS,
    doc_id_of,
    document_groups,
    documents_from_chunks,
    still_belongs,
)
from core.types import Document

__all__ = [
    "Deleted",
    "Followed",
    "SourceChanges",
    "SourceDocument",
    "delete_source_documents",
    "document_signature",
    "documents_of",
    "source_changes",
    "source_documents",
]


class Followed(NamedTuple):
    """What an index records of a document it took from the collection.

    Attributes:
        signature: :func:`document_signature` of the document as taken in.
        name: The name its chunks carry (:func:`core.strategies.common.doc_id_of`); None in
            an index saved before it was recorded, until a sync renews the record.
        chunks: The ids of the chunks it was rebuilt from.
    """

    signature: str
    name: str | None = None
    chunks: tuple[str, ...] = ()


class SourceDocument(NamedTuple):
    """A document of the collection, with what an index that takes it in records of it."""

    document: Document
    followed: Followed

    @property
    def id(self) -> str:
        """The document's id (its name, or ``name#<hash>`` while another document shares it)."""
        return self.document.id or ""


class SourceChanges(NamedTuple):
    """The documents of a collection that are new to an index, gone from it, or changed.

    ``moved`` are those whose text and metadata are as the index took them in, but whose
    record is not (the app stored them anew under other chunk ids): only the record changes.
    """

    new: list[SourceDocument]
    gone: list[str]
    changed: list[SourceDocument]
    moved: list[SourceDocument]

    def __bool__(self) -> bool:
        return bool(self.new or self.gone or self.changed or self.moved)

    @property
    def names(self) -> list[str]:
        """Every document id concerned, sorted."""
        return sorted({*(d.id for d in (*self.new, *self.changed, *self.moved)), *self.gone})


def document_signature(doc: Document) -> str:
    """A hash of a document's text and metadata: equal exactly when both are."""
    payload = json.dumps({"text": doc.text, "metadata": doc.metadata}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def source_documents(store: ChunkStore) -> list[SourceDocument]:
    """A collection's documents, rebuilt from its chunks as a UMG-RAG build rebuilds them."""
    return documents_of(store.get(include_embeddings=False))


def documents_of(stored: StoredChunks) -> list[SourceDocument]:
    """Chunks read from a collection (without embeddings) as the documents a build rebuilds."""
    ids, metas = stored.ids, stored.metadatas
    groups = document_groups(ids, metas)
    out = []
    for doc in documents_from_chunks(ids, stored.texts, metas, groups):
        rows = groups[doc.id or ""]
        name = doc_id_of(ids[rows[0]], metas[rows[0]])
        followed = Followed(document_signature(doc), name, tuple(ids[r] for r in rows))
        out.append(SourceDocument(doc, followed))
    return out


def source_changes(known: Mapping[str, Followed], docs: list[SourceDocument]) -> SourceChanges:
    """How ``docs`` (a collection's documents now) differ from the ``known`` ones.

    Args:
        known: What the index recorded of each document it took from the collection, by id.
        docs: The collection's documents now (:func:`source_documents`).

    Returns:
        The documents new to the index, the ids of those gone from the collection, the
        documents whose text or metadata changed there, and those only stored anew.
    """
    now = {doc.id: doc for doc in docs}
    new = [doc for name, doc in now.items() if name not in known]
    kept = [(known[name], doc) for name, doc in now.items() if name in known]
    changed = [doc for was, doc in kept if was.signature != doc.followed.signature]
    moved = [doc for was, doc in kept if was.signature == doc.followed.signature and was != doc.followed]
    return SourceChanges(new, sorted(set(known) - set(now)), changed, moved)


#: Names per read of the chunks that carry them (each name is matched under four keys, and
#: SQLite takes at most 32,766 values per statement).
_NAMES_PER_READ = 1000


class Deleted(NamedTuple):
    """A whole document a delete takes out of the index, to take out of the collection too."""

    id: str
    followed: Followed
    seen: Mapping[str, Any]
    """The metadata of one of its windows (all passed the delete's filter)."""


def delete_source_documents(
    store: ChunkStore, documents: Sequence[Deleted], flt: MetadataFilter | None = None
) -> int:
    """Deletes documents an index took in from the collection: the chunks it rebuilt them from.

    The chunks are those recorded, and those the app stored the same document under since
    (its name, text and metadata under new chunk ids). A chunk is deleted only while it still
    carries the document's name and its metadata still pass ``flt`` (with the keys only
    windows carry, :data:`core.strategies.common.WINDOW_KEYS`, taken from the document's window;
    :func:`core.strategies.common.still_belongs`): one the app
    rewrote under another name since, or for another tenant (a reused id), stays, as do
    chunks the app added to a document it changed since. A record without a name (an older
    save, before a sync renewed it) deletes nothing.

    Args:
        store: The collection the index follows.
        documents: The documents deleted from the index.
        flt: The delete's filter (a tenant's), if any.

    Returns:
        The number of chunks deleted.
    """
    named = [d for d in documents if d.followed.name is not None]
    if not named:
        return 0
    chunks = _chunks_named(store, sorted({d.followed.name or "" for d in named}))
    recorded = store.get(
        [c for d in named for c in d.followed.chunks], include_embeddings=False, missing_ok=True
    )
    chunks.update(zip(recorded.ids, zip(recorded.texts, recorded.metadatas, strict=True), strict=True))
    texts, metas = [t for t, _ in chunks.values()], [m for _, m in chunks.values()]
    anew: dict[tuple[str, str], list[str]] = {}  # (name, signature) -> the chunks of such documents now
    for doc in documents_of(StoredChunks(list(chunks), texts, metas, None)):
        anew.setdefault((doc.followed.name or "", doc.followed.signature), []).extend(doc.followed.chunks)
    candidates: dict[str, list[Deleted]] = {}
    for d in named:
        for cid in (*d.followed.chunks, *anew.get((d.followed.name or "", d.followed.signature), [])):
            candidates.setdefault(cid, []).append(d)
    gone = [
        cid
        for cid, docs in candidates.items()
        if cid in chunks and any(still_belongs(cid, chunks[cid][1], d.id, flt, window=d.seen) for d in docs)
    ]
    if gone:
        store.delete(gone)
    return len(gone)


def _chunks_named(store: ChunkStore, names: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every chunk of the collection that carries one of ``names`` (as a string or a number)."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for start in range(0, len(names), _NAMES_PER_READ):
        batch = names[start : start + _NAMES_PER_READ]
        numbers = [int(n) for n in batch if _INT.fullmatch(n) and -(2**63) <= int(n) < 2**63]
        values: list[list[Any]] = [list(batch), *([numbers] if numbers else [])]
        where = {"$or": [{key: {"$in": v}} for key in DOCUMENT_NAME_KEYS for v in values]}
        read = store.get(where=where, include_embeddings=False)
        out.update(zip(read.ids, zip(read.texts, read.metadatas, strict=True), strict=True))
    return out


#: A name that Chroma may hold as an integer (``doc_id_of`` reads 5 as "5").
_INT = re.compile(r"-?(0|[1-9][0-9]*)", re.ASCII)
