"""Baseline strategies the benchmarks compare against."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from core.embed import Embedder
from core.filters import MetadataFilter, parse_filter
from core.store import ChunkStore
from core.strategies.base import COMMON_PROVENANCE_KEYS, DEFAULT_MAX_QUERY_CHARS, check_k, check_query
from core.types import Document, Retrieved

__all__ = ["DenseRetriever"]


class DenseRetriever:
    """Plain dense retrieval: the query embedding's nearest chunks in a Chroma collection.

    Args:
        store: The collection to search.
        embedder: The embedder the collection was built with.
        k: Default number of results.
    """

    name: ClassVar[str] = "dense"
    provenance_keys: ClassVar[frozenset[str]] = COMMON_PROVENANCE_KEYS

    def __init__(self, store: ChunkStore, embedder: Embedder, *, k: int = 4) -> None:
        self.store = store
        self.embedder = embedder
        self.default_k = check_k(k, 4)

    def retrieve(
        self,
        query: str,
        k: int | None = None,
        *,
        filter: Mapping[str, Any] | MetadataFilter | None = None,
        **options: Any,
    ) -> list[Retrieved]:
        """Top-k chunks by cosine similarity (Chroma's HNSW index).

        Args:
            query: The question.
            k: Number of results.
            filter: A metadata filter in Chroma's ``where`` syntax, validated like the
                strategies' and passed to Chroma's own filtered search.
            **options: Unknown options raise TypeError.
        """
        if options:
            raise TypeError(f"unknown retrieve option(s): {', '.join(sorted(options))}")
        text = check_query(query, DEFAULT_MAX_QUERY_CHARS)
        k = check_k(k, self.default_k)
        flt = parse_filter(filter)
        return self.retrieve_by_vector(text, self.embedder.embed_query(text), k, filter=flt)

    def retrieve_by_vector(
        self,
        query: str,
        query_vector: npt.NDArray[np.float32],
        k: int | None = None,
        *,
        filter: Mapping[str, Any] | MetadataFilter | None = None,
    ) -> list[Retrieved]:
        """:meth:`retrieve` with the query embedding already computed."""
        k = check_k(k, self.default_k)
        flt = parse_filter(filter)
        where = flt.where if flt is not None else None
        return [
            Retrieved(
                id=hit_id,
                text=doc,
                score=sim,
                metadata={**meta, "strategy": self.name, "score": sim, "found_by": "dense"},
            )
            for hit_id, sim, doc, meta in self.store.query(query_vector, k, where=where)
        ]

    def add_documents(self, documents: Sequence[Document]) -> list[str]:
        """Not supported: the baseline reads a collection another strategy built."""
        raise NotImplementedError("DenseRetriever searches an existing collection; add documents through it")

    def delete_documents(self, doc_ids: Sequence[str]) -> int:
        """Not supported (see :meth:`add_documents`)."""
        raise NotImplementedError("DenseRetriever searches an existing collection")

    def save(self, path: str | os.PathLike[str]) -> None:
        """Nothing to save: the collection is the whole state."""
