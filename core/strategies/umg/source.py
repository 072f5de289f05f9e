"""What a UMG-RAG index built over a collection knows of it, to follow the app's later writes.

UMG-RAG re-cuts a collection's chunks into sentence windows of whole documents
(:func:`core.strategies.common.documents_from_chunks`), so it follows the collection a
document at a time: each document it indexed from the collection has a signature (a hash
of its rebuilt text and metadata), and a document whose signature changed, or that is new
or gone, is re-cut, added or removed. Signatures are hashes: no text of a document is kept
here, and a deleted document's signature leaves with it. A document deleted through the
retriever leaves the collection too (:func:`delete_source_documents`), so no sync brings it
back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from core.store import ChunkStore
from core.strategies.common import document_groups, documents_from_chunks
from core.types import Document

__all__ = [
    "SourceChanges",
    "delete_source_documents",
    "document_signature",
    "source_changes",
    "source_documents",
]


class SourceChanges(NamedTuple):
    """The documents of a collection that are new to an index, gone from it, or changed."""

    new: list[Document]
    gone: list[str]
    changed: list[Document]

    def __bool__(self) -> bool:
        return bool(self.new or self.gone or self.changed)

    @property
    def names(self) -> list[str]:
        """Every document id concerned, sorted."""
        return sorted({*(d.id or "" for d in (*self.new, *self.changed)), *self.gone})


def document_signature(doc: Document) -> str:
    """A hash of a document's text and metadata: equal exactly when both are."""
    payload = json.dumps({"text": doc.text, "metadata": doc.metadata}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def source_documents(store: ChunkStore) -> list[Document]:
    """A collection's documents, rebuilt from its chunks as a UMG-RAG build rebuilds them."""
    stored = store.get(include_embeddings=False)
    return documents_from_chunks(stored.ids, stored.texts, stored.metadatas)


def source_changes(known: Mapping[str, str], docs: list[Document]) -> SourceChanges:
    """How ``docs`` (a collection's documents now) differ from the ``known`` signatures.

    Args:
        known: The signature of each document the index took from the collection, by id.
        docs: The collection's documents now (:func:`source_documents`).

    Returns:
        The documents new to the index, the ids of those gone from the collection, and the
        documents whose text or metadata changed there.
    """
    now = {doc.id or "": doc for doc in docs}
    new = [doc for name, doc in now.items() if name not in known]
    changed = [doc for name, doc in now.items() if name in known and known[name] != document_signature(doc)]
    return SourceChanges(new, sorted(set(known) - set(now)), changed)


def delete_source_documents(store: ChunkStore, names: Sequence[str]) -> int:
    """Deletes documents from a collection: every chunk grouped into them as a build groups them.

    Args:
        store: The collection the index follows.
        names: Document ids as :func:`source_documents` names them.

    Returns:
        The number of chunks deleted.
    """
    stored = store.get(include_embeddings=False)
    groups = document_groups(stored.ids, stored.metadatas)
    ids = [stored.ids[i] for name in dict.fromkeys(names) for i in groups.get(name, [])]
    if ids:
        store.delete(ids)
    return len(ids)
