"""``EntityHopCompressor``: multi-hop for any LangChain retriever, as a document compressor.

Put it in a ``ContextualCompressionRetriever`` over the retriever an app already runs: the
retriever's documents seed the entity-hop walk over a Bridge-RAG index of the same corpus
(:mod:`core.entity_hop`), and the merged ranking comes back with the provenance keys of the
strategies' retrievers (``found_by``, ``score``, ``cosine``, ``hop``, ``hop_score``,
``hop_entities``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field, field_validator

from core.adapters import split_fields
from core.entity_hop import EntityHopWalk, Seed
from core.filters import parse_filter
from langchain_bridge.retrievers import chroma_store_parts, core_documents, to_langchain_document

__all__ = ["EntityHopCompressor"]


class EntityHopCompressor(BaseDocumentCompressor):
    """The entity-hop walk from a retriever's documents, over an index of the same corpus.

    Build it with :meth:`from_documents` (the documents the retriever's store holds, one
    chunk each as stored), :meth:`from_vectorstore` (the chunks already in its Chroma store)
    or :meth:`load` (a bridge-rag index directory). A retrieved document
    is matched to the index by its id, else by its text; one the index does not hold keeps
    its rank.

    Example:
        ```python
        from langchain_classic.retrievers import ContextualCompressionRetriever

        from langchain_bridge import EntityHopCompressor

        retriever = ContextualCompressionRetriever(
            base_compressor=EntityHopCompressor.from_documents(chunks, embedding=embeddings, k=5),
            base_retriever=vectorstore.as_retriever(search_kwargs={"k": 10}),
        )
        retriever.invoke("Where was the composer of By the Beautiful Sea born?")
        ```
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    walk: EntityHopWalk = Field(description="The walk over the Bridge-RAG index of the corpus.")
    k: int = Field(default=4, ge=1, description="Documents returned (seeds and reached chunks merged).")
    filter: dict[str, Any] | None = Field(
        default=None,
        description="Chroma where-filter: seeds match, and the walk reaches, only chunks that pass.",
    )
    """A metadata filter in Chroma's ``where`` syntax, e.g. the tenant's ``{"tenant": "acme"}``
    that the base retriever applies too: the walk then reaches only that tenant's chunks."""
    include_abstracts: bool = Field(
        default=False, description="Also return the Bridge-RAG abstracts of the documents, after them."
    )
    """After the ``k`` documents, the summaries of the Bridge-RAG abstracts they belong to, as
    extra context (``metadata["type"] == "abstract"``; under ``filter``, only abstracts whose
    every chunk passes it)."""

    @field_validator("filter")
    @classmethod
    def _check_filter(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        parse_filter(value)  # a FilterError (a ValueError) says what is wrong
        return value

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        *,
        embedding: Any = None,
        k: int = 4,
        filter: dict[str, Any] | None = None,
        **settings: Any,
    ) -> EntityHopCompressor:
        """Indexes the corpus the retriever searches (each document as one or more chunks).

        Args:
            documents: The documents (their ``id`` or ``metadata["doc_id"]`` name them).
            embedding: A LangChain ``Embeddings`` (the query is embedded once per call);
                default all-MiniLM-L6-v2.
            k: Documents returned.
            filter: See the field of that name.
            **settings: This compressor's ``include_abstracts``,
                :class:`core.strategies.bridge.strategy.BridgeConfig` fields (``chunk_size``,
                ``link_hops``, ...), or ``persist_directory`` to keep the index.
        """
        fields, settings = split_fields(settings, cls.model_fields)
        docs = core_documents(documents)
        walk = EntityHopWalk.from_documents(docs, embedder=embedding, k=k, **settings)
        return cls(walk=walk, k=k, filter=filter, **fields)

    @classmethod
    def from_vectorstore(
        cls, vectorstore: Any, *, k: int = 4, filter: dict[str, Any] | None = None, **settings: Any
    ) -> EntityHopCompressor:
        """Indexes the chunks already in the base retriever's ``langchain_chroma.Chroma`` store.

        Nothing is re-embedded; the query is embedded with the store's embedding function. The
        base retriever's documents and the index's chunks are then the same rows, matched by id.

        Args:
            vectorstore: A ``langchain_chroma.Chroma`` with an embedding function.
            k: Documents returned.
            filter: See the field of that name.
            **settings: This compressor's ``include_abstracts``, or
                :class:`core.strategies.bridge.strategy.BridgeConfig` fields.

        Raises:
            TypeError: ``vectorstore`` is not a Chroma store.
            ValueError: The store has no embedding function, or is empty.
        """
        fields, settings = split_fields(settings, cls.model_fields)
        store, embedder = chroma_store_parts(vectorstore)
        walk = EntityHopWalk.from_store(store, embedder=embedder, k=k, **settings)
        return cls(walk=walk, k=k, filter=filter, **fields)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        embedding: Any = None,
        k: int = 4,
        filter: dict[str, Any] | None = None,
        include_abstracts: bool = False,
    ) -> EntityHopCompressor:
        """Opens a bridge-rag index directory of the same corpus (no rebuild)."""
        walk = EntityHopWalk.load(path, embedder=embedding, k=k)
        return cls(walk=walk, k=k, filter=filter, include_abstracts=include_abstracts)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The documents and the chunks the walk reaches from them, best first (``k`` of them)."""
        seeds = [Seed(d.id or d.metadata.get("id"), d.page_content) for d in documents]
        out: list[Document] = []
        abstracts = self.include_abstracts
        for hit in self.walk.expand(query, seeds, self.k, filter=self.filter, include_abstracts=abstracts):
            original = documents[hit.seed] if hit.seed is not None else None
            if hit.result is None:
                if original is not None:  # a seed the index does not hold: as retrieved
                    out.append(original)
                continue
            doc = to_langchain_document(hit.result)
            if original is not None:  # the retriever's own document, with the walk's provenance
                meta = {
                    **original.metadata,
                    **self.walk.provenance(hit.result, original.metadata),
                    "id": doc.id,
                }  # the chunk matched
                doc = Document(page_content=original.page_content, metadata=meta, id=original.id or doc.id)
            out.append(doc)
        return out
