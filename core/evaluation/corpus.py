"""The shared corpus of a benchmark run: one chunking, one embedding, one Chroma collection.

:func:`build_shared_corpus` chunks the documents the way Bridge-RAG does (sentence-aware
chunks of at most what the embedder reads whole, :func:`core.embed.window_chars`: 1,024
characters for all-MiniLM-L6-v2's 256 tokens, so a passage the model can read stays whole;
64 characters of overlap), embeds every chunk once and
writes chunks, vectors and metadata to one Chroma collection. Dense retrieval, BM25, the
hybrid baseline, Bridge-RAG (``BridgeRAG.from_store``) and the LangChain and LlamaIndex
peers all read that collection; strategies with their own units (UMG-RAG's sentence
windows, BubbleRAG) build their own collection in the same Chroma, through the same
embedding cache (:class:`~core.evaluation.embedding_cache.EmbeddingCache`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from core.embed import window_chars
from core.evaluation.embedding_cache import EmbeddingCache
from core.store import ChunkStore
from core.strategies.common import embed_in_batches, normalise_rows
from core.text import chunk_document
from core.types import Document

__all__ = ["BenchContext", "SharedCorpus", "build_shared_corpus"]

#: Overlap of the shared collection's chunks: Bridge-RAG's default (``BridgeConfig``); the
#: size follows the embedder (``BridgeConfig.chunk_size=None``).
CHUNK_OVERLAP = 64

SHARED_COLLECTION = "shared_chunks"


@dataclass
class SharedCorpus:
    """The chunks every collection-reading strategy shares, in collection order.

    Attributes:
        store: The Chroma collection holding them (texts, embeddings, metadata).
        ids: Chunk ids (``"{doc_id}::{order}"``).
        doc_ids: The document of each chunk.
        texts: Chunk texts.
        metadatas: Chunk metadata as stored (document metadata plus ``doc_id``,
            ``chunk_order``, ``start_index``, ``end_index``).
        seconds: Time of each step: ``chunk``, ``embed``, ``store``.
        vectors: The unit-length chunk embeddings, one row per chunk.
        chunk_size: The largest chunk, in characters.
    """

    store: ChunkStore
    ids: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    metadatas: list[dict[str, Any]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    vectors: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    chunk_size: int = 0

    @property
    def build_seconds(self) -> float:
        """Chunking, embedding and writing the collection, together."""
        return float(sum(self.seconds.values()))

    def rows(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """``(id, text, metadata)`` of each chunk, in collection order."""
        return zip(self.ids, self.texts, self.metadatas, strict=True)


def build_shared_corpus(
    documents: Sequence[Document],
    embedder: EmbeddingCache,
    store: ChunkStore,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int = CHUNK_OVERLAP,
    show_progress: bool = True,
) -> SharedCorpus:
    """Chunks, embeds and stores the documents once.

    Args:
        documents: The corpus (each with an id).
        embedder: The run's embedding cache (the vectors stay in it for later builds).
        store: An empty collection to write to.
        chunk_size: Largest chunk, in characters; None = what the embedder reads whole.
        chunk_overlap: Characters repeated between consecutive chunks.
        show_progress: Show progress bars.

    Returns:
        The shared corpus.

    Raises:
        ValueError: A document without an id or text, or a duplicate id.
    """
    if chunk_size is None:
        chunk_size = window_chars(embedder)
    corpus = SharedCorpus(store=store, chunk_size=chunk_size)
    seen: set[str] = set()
    t0 = time.perf_counter()
    for i, doc in enumerate(documents):
        if doc.id is None:
            raise ValueError(f"document {i} has no id; benchmark documents need ids to score recall")
        if not doc.text.strip():
            raise ValueError(f"document {doc.id!r} has no text; remove it from the corpus")
        if doc.id in seen:
            raise ValueError(f"duplicate document id {doc.id!r}; document ids must be unique")
        seen.add(doc.id)
        for ch in chunk_document(doc, doc_id=doc.id, chunk_size=chunk_size, chunk_overlap=chunk_overlap):
            corpus.ids.append(ch.id)
            corpus.doc_ids.append(doc.id)
            corpus.texts.append(ch.text)
            corpus.metadatas.append(
                {
                    **dict(ch.metadata),
                    "doc_id": doc.id,
                    "chunk_order": ch.order,
                    "start_index": ch.start,
                    "end_index": ch.end,
                }
            )
    corpus.seconds["chunk"] = time.perf_counter() - t0
    if not corpus.ids:
        raise ValueError("the corpus is empty; a benchmark needs at least one document")
    t0 = time.perf_counter()
    vectors = embed_in_batches(embedder, corpus.texts, show_progress=show_progress, desc="embedding corpus")
    corpus.seconds["embed"] = time.perf_counter() - t0
    corpus.vectors = normalise_rows(vectors)
    t0 = time.perf_counter()
    store.add(corpus.ids, corpus.texts, vectors, corpus.metadatas, show_progress=show_progress)
    corpus.seconds["store"] = time.perf_counter() - t0
    return corpus


@dataclass
class BenchContext:
    """What every strategy builder receives: the same corpus, embedder and Chroma data.

    Attributes:
        documents: The corpus documents, in the run's shuffled order.
        embedder: The run's embedding cache over the shared model.
        corpus: The shared chunk collection.
        chroma_path: The Chroma data directory; :meth:`new_store` opens more collections there.
        k: Results per query (peers fix their sub-retrievers' k at build time).
        show_progress: Whether builders show progress bars.
        settings: The run's settings for the strategy being built (keyword arguments of its
            constructor, e.g. ``splade=True`` for UMG-RAG); builders that take any pass them on.
    """

    documents: list[Document]
    embedder: EmbeddingCache
    corpus: SharedCorpus
    chroma_path: Path
    k: int
    show_progress: bool = True
    settings: Mapping[str, Any] = field(default_factory=dict)
    _used_names: set[str] = field(default_factory=lambda: {SHARED_COLLECTION})

    @classmethod
    def create(
        cls,
        documents: list[Document],
        embedder: EmbeddingCache,
        chroma_path: Path,
        *,
        k: int,
        show_progress: bool = True,
    ) -> BenchContext:
        """Builds the shared corpus in a new Chroma under ``chroma_path`` and the context over it.

        Args:
            documents: The corpus documents (each with an id).
            embedder: The run's embedding cache.
            chroma_path: Where the run's Chroma keeps its data.
            k: Results per query.
            show_progress: Show progress bars.
        """
        corpus = build_shared_corpus(
            documents,
            embedder,
            ChunkStore.persistent(chroma_path, SHARED_COLLECTION),
            show_progress=show_progress,
        )
        return cls(
            documents=documents,
            embedder=embedder,
            corpus=corpus,
            chroma_path=chroma_path,
            k=k,
            show_progress=show_progress,
        )

    def new_store(self, name: str) -> ChunkStore:
        """A new, empty collection in the run's Chroma, named ``name`` (``name-2``, ... if taken).

        Copies of the context (``dataclasses.replace``) share the names taken.

        Args:
            name: The collection's name (Chroma's rules: 3-512 characters, letters, digits,
                ``.``, ``_`` and ``-``).

        Returns:
            The store.
        """
        candidate, n = name, 1
        while candidate in self._used_names:
            n += 1
            candidate = f"{name}-{n}"
        self._used_names.add(candidate)
        return ChunkStore.persistent(self.chroma_path, candidate)
