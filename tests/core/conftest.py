"""Shared fixtures for the core tests: one real embedder and one spaCy extractor per session.

The real all-MiniLM-L6-v2 model is wrapped in :class:`CachingEmbedder`, which returns the
model's own vectors but computes each distinct text only once, so several indexes over
the same texts cost one embedding pass. :class:`CountingEmbedder` counts calls (to prove
that loading an index embeds nothing) and :func:`hash_embedder` is a deterministic fake
for tests that only check wiring.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any
from uuid import uuid4

import numpy as np
import numpy.typing as npt
import pytest

from core.data import load_demo_corpus
from core.embed import CallableEmbedder, Embedder, SentenceTransformerEmbedder
from core.entities import EntityExtractor, SpacyEntityExtractor, default_entity_extractor
from core.store import ChunkStore
from core.strategies.bridge import BridgeRAG
from core.types import Document

FloatArray = npt.NDArray[np.float32]

HASH_DIM = 32
_WORD = re.compile(r"\w+")


class CachingEmbedder:
    """Embeds with ``inner`` but computes each distinct text once (thread-safe)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self._docs: dict[str, FloatArray] = {}
        self._queries: dict[str, FloatArray] = {}
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_documents(self, texts: Sequence[str]) -> FloatArray:
        items = list(texts)
        with self._lock:
            missing = list(dict.fromkeys(t for t in items if t not in self._docs))
            if missing:
                for text, vector in zip(missing, self.inner.embed_documents(missing), strict=True):
                    self._docs[text] = vector
            if not items:
                return np.zeros((0, self.dimension), dtype=np.float32)
            return np.ascontiguousarray(np.stack([self._docs[t] for t in items]), dtype=np.float32)

    def embed_query(self, text: str) -> FloatArray:
        with self._lock:
            if text not in self._queries:
                self._queries[text] = self.inner.embed_query(text)
            return self._queries[text].copy()


class CountingEmbedder:
    """Delegates to ``inner`` and counts the calls of each method."""

    def __init__(self, inner: Embedder, name: str | None = None) -> None:
        self.inner = inner
        self.name = name or inner.name
        self.document_calls = 0
        self.documents_embedded = 0
        self.query_calls = 0

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_documents(self, texts: Sequence[str]) -> FloatArray:
        self.document_calls += 1
        self.documents_embedded += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> FloatArray:
        self.query_calls += 1
        return self.inner.embed_query(text)


def _hash_vectors(texts: Sequence[str]) -> FloatArray:
    out = np.zeros((len(texts), HASH_DIM), dtype=np.float32)
    for i, text in enumerate(texts):
        out[i, 0] = 0.1  # a bias, so no vector is all zeros
        for word in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
            out[i, 1 + h % (HASH_DIM - 1)] += 1.0
    return out


def hash_embedder(name: str = "hash-32") -> CallableEmbedder:
    """A deterministic 32-d bag-of-words embedder (for wiring tests only)."""
    return CallableEmbedder(_hash_vectors, name=name, dimension=HASH_DIM)


def unique_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def real_embedder(st_embedder: SentenceTransformerEmbedder) -> SentenceTransformerEmbedder:
    """The session's one real model (see tests/conftest.py)."""
    return st_embedder


@pytest.fixture(scope="session")
def embedder(real_embedder: SentenceTransformerEmbedder) -> CachingEmbedder:
    return CachingEmbedder(real_embedder)


@pytest.fixture(scope="session")
def extractor() -> EntityExtractor:
    ext = default_entity_extractor()
    assert isinstance(ext, SpacyEntityExtractor), "the core tests need a spaCy English model"
    return ext


@pytest.fixture
def fake_embedder() -> CallableEmbedder:
    return hash_embedder()


@pytest.fixture
def new_store() -> Callable[[], ChunkStore]:
    """A factory of fresh in-memory collections (each with a unique name)."""
    return lambda: ChunkStore.ephemeral(unique_name())


@pytest.fixture(scope="session")
def demo_docs() -> list[Document]:
    return load_demo_corpus()


@pytest.fixture(scope="session")
def small_docs(demo_docs: list[Document]) -> list[Document]:
    """Eight demo documents that share entities (Marrowick, Varga, Halden Institute, ...)."""
    return demo_docs[:8]


@pytest.fixture(scope="session")
def demo_rag(demo_docs: list[Document], embedder: CachingEmbedder, extractor: EntityExtractor) -> BridgeRAG:
    """The demo corpus indexed with default settings. Shared: tests must not modify it
    (change its config only through ``monkeypatch``)."""
    return BridgeRAG.from_documents(
        demo_docs,
        embedder=embedder,
        entity_extractor=extractor,
        store=ChunkStore.ephemeral(unique_name("demo")),
        show_progress=False,
    )


@pytest.fixture
def make_rag(embedder: CachingEmbedder, extractor: EntityExtractor) -> Callable[..., BridgeRAG]:
    """Builds a BridgeRAG over documents in a fresh in-memory collection (real model + spaCy)."""

    def build(docs: Sequence[Document], **kwargs: Any) -> BridgeRAG:
        kwargs.setdefault("embedder", embedder)
        kwargs.setdefault("entity_extractor", extractor)
        kwargs.setdefault("show_progress", False)
        if "store" not in kwargs and "persist_directory" not in kwargs:
            kwargs["store"] = ChunkStore.ephemeral(unique_name())
        return BridgeRAG.from_documents(docs, **kwargs)

    return build
