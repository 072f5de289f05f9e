"""Fixtures for the LlamaIndex tests that run real Bridge-RAG indexes.

The sentence-transformers model is loaded once per session (``st_embedder``); LlamaIndex sees it
through :class:`CountingEmbedding`, a small ``BaseEmbedding`` adapter that also records every call,
so tests can check that nothing was re-embedded and which model embedded the queries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from llama_index.core import Document
from llama_index.core.embeddings import BaseEmbedding
from pydantic import PrivateAttr

from core.data import load_demo_corpus
from core.embed import SentenceTransformerEmbedder


class CountingEmbedding(BaseEmbedding):
    """LlamaIndex ``BaseEmbedding`` over a core embedder that records every call.

    ``embedded_texts`` holds every text embedded for indexing and ``queries`` every query, in
    call order.
    """

    _embedder: SentenceTransformerEmbedder = PrivateAttr()
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _texts: list[str] = PrivateAttr(default_factory=list)
    _queries: list[str] = PrivateAttr(default_factory=list)

    def __init__(self, embedder: SentenceTransformerEmbedder, **kwargs: Any) -> None:
        super().__init__(model_name="all-MiniLM-L6-v2", **kwargs)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "CountingEmbedding"

    @property
    def embedded_texts(self) -> list[str]:
        return self._texts

    @property
    def queries(self) -> list[str]:
        return self._queries

    def _get_query_embedding(self, query: str) -> list[float]:
        with self._lock:
            self._queries.append(query)
        return [float(x) for x in self._embedder.embed_query(query)]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self._texts.extend(texts)
        return [[float(x) for x in row] for row in self._embedder.embed_documents(texts)]


@pytest.fixture(scope="session")
def li_embed_model(st_embedder: SentenceTransformerEmbedder) -> CountingEmbedding:
    """One shared LlamaIndex embedding model (its records are shared too: read deltas)."""
    return CountingEmbedding(st_embedder)


@pytest.fixture(scope="session")
def make_embed_model(st_embedder: SentenceTransformerEmbedder) -> Callable[[], CountingEmbedding]:
    """Factory for fresh LlamaIndex embedding models with their own records."""
    return lambda: CountingEmbedding(st_embedder)


@pytest.fixture(scope="session")
def li_demo_docs() -> list[Document]:
    """The 46 demo documents as LlamaIndex documents (``id_`` = the demo id)."""
    return [Document(text=d.text, id_=d.id, metadata=dict(d.metadata)) for d in load_demo_corpus()]
