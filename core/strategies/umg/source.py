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
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from core.filters import MetadataFilter
from core.store import ChunkStore, StoredChunks
from core.strategies.common import doc_id_of, document_groups, documents_from_chunks, public_metadata
from core.types import Document

__all__ = [
    "Followed",
    "SourceChanges",
    "SourceDocument",
    "delete_source_documents",
    "document_signature",
    "source_changes",
    "source_documents",
]


class Followed(NamedTuple):
    """What an index records of a document it took from the collection.

    Attributes:
        signature: :func:`document_signature` of the document as taken in.
        name: The name its chunks carry (:func:`core.strategies.common.doc_id_of`); "" in an
            index saved before it was recorded, until a sync renews the record.
        chunks: The ids of the chunks it was rebuilt from.
    """

    signature: str
    name: str = ""
    chunks: tuple[str, ...] = ()


class SourceDocument(NamedTuple):
    """A document of the collection, with what an index that takes it in records of it."""

    document: Document
    followed: Followed

    @property
    def name(self) -> str:
        """The document's id."""
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
        return sorted({*(d.name for d in (*self.new, *self.changed, *self.moved)), *self.gone})


def document_signature(doc: Document) -> str:
    """A hash of a document's text and metadata: equal exactly when both are."""
    payload = json.dumps({"text": doc.text, "metadata": doc.metadata}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def source_documents(store: ChunkStore, stored: StoredChunks | None = None) -> list[SourceDocument]:
    """A collection's documents, rebuilt from its chunks as a UMG-RAG build rebuilds them.

    Args:
        store: The collection.
        stored: Its chunks, already read (without embeddings); None: read them here.
    """
    if stored is None:
        stored = store.get(include_embeddings=False)
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
    now = {doc.name: doc for doc in docs}
    new = [doc for name, doc in now.items() if name not in known]
    kept = [(known[name], doc) for name, doc in now.items() if name in known]
    changed = [doc for was, doc in kept if was.signature != doc.followed.signature]
    moved = [doc for was, doc in kept if was.signature == doc.followed.signature and was != doc.followed]
    return SourceChanges(new, sorted(set(known) - set(now)), changed, moved)


def delete_source_documents(
    store: ChunkStore, documents: Sequence[Followed], flt: MetadataFilter | None = None
) -> int:
    """Deletes documents an index took in from the collection: the chunks it rebuilt them from.

    A chunk is deleted only while it still carries the document's name and passes ``flt``:
    one the app rewrote under another name since, or for another tenant (a reused id), stays,
    as do chunks the app added to the document since. A record without a name (an older
    save, before a sync renewed it) deletes nothing.

    Args:
        store: The collection the index follows.
        documents: What the index recorded of each document.
        flt: The delete's filter (a tenant's), if any.

    Returns:
        The number of chunks deleted.
    """
    wanted = {cid: doc.name for doc in documents if doc.name for cid in doc.chunks}
    for attempt in range(3):  # the app may delete some of them between the two reads: look again
        present = store.existing(list(wanted)) if wanted else []
        if not present:
            return 0
        try:
            stored = store.get(present, include_embeddings=False)
            break
        except KeyError:
            if attempt == 2:
                raise
    ids = [
        cid
        for cid, meta in zip(stored.ids, stored.metadatas, strict=True)
        if doc_id_of(cid, meta) == wanted[cid] and (flt is None or flt.matches(public_metadata(meta)))
    ]
    if ids:
        store.delete(ids)
    return len(ids)
