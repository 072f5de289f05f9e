"""Fixtures for the LangChain tests that run real Bridge-RAG indexes.

The sentence-transformers model is loaded once per session (``st_embedder``); LangChain sees it
through :class:`CountingEmbeddings`, a small ``Embeddings`` adapter (langchain-huggingface is not
installed) that also records every call, so tests can check which embedding function a retriever
used and that nothing was re-embedded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from core.data import load_demo_corpus
from core.embed import SentenceTransformerEmbedder


class CountingEmbeddings(Embeddings):
    """LangChain ``Embeddings`` over a core embedder that records every call.

    Attributes:
        model_name: Shown in the embedder name bridge-rag records in a saved index.
        query_calls: Number of ``embed_query`` calls.
        document_calls: Number of ``embed_documents`` calls.
        embedded_texts: Every text passed to ``embed_documents``, in call order.
        queries: Every text passed to ``embed_query``, in call order.
    """

    def __init__(self, embedder: SentenceTransformerEmbedder) -> None:
        self.embedder = embedder
        self.model_name = "all-MiniLM-L6-v2"
        self.query_calls = 0
        self.document_calls = 0
        self.embedded_texts: list[str] = []
        self.queries: list[str] = []
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.document_calls += 1
            self.embedded_texts.extend(texts)
        return [[float(x) for x in row] for row in self.embedder.embed_documents(texts)]

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            self.query_calls += 1
            self.queries.append(text)
        return [float(x) for x in self.embedder.embed_query(text)]


@pytest.fixture(scope="session")
def lc_embeddings(st_embedder: SentenceTransformerEmbedder) -> CountingEmbeddings:
    """One shared LangChain embeddings object (its counters are shared too: read deltas)."""
    return CountingEmbeddings(st_embedder)


@pytest.fixture(scope="session")
def make_embeddings(st_embedder: SentenceTransformerEmbedder) -> Callable[[], CountingEmbeddings]:
    """Factory for fresh LangChain embeddings objects with their own counters."""
    return lambda: CountingEmbeddings(st_embedder)


@pytest.fixture(scope="session")
def lc_demo_docs() -> list[Document]:
    """The 46 demo documents as LangChain documents (``id`` = the demo id)."""
    return [Document(page_content=d.text, id=d.id, metadata=dict(d.metadata)) for d in load_demo_corpus()]
