"""An embedding cache keyed by text, with an account of the time it saves.

A benchmark run embeds the corpus once and lets every strategy that indexes the same texts
reuse the vectors. Build times then understate what a strategy costs on its own, so the
cache records how long each text took to embed; :meth:`EmbeddingCache.account` reports, for
one strategy's build, the embedding time it was spared (its cache hits) and the time it
spent (its misses). Queries are never cached: :meth:`EmbeddingCache.embed_query` always
calls the model, so query latencies include a real query embedding.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.embed import Embedder

__all__ = ["EmbeddingAccount", "EmbeddingCache"]

FloatArray = npt.NDArray[np.float32]


@dataclass
class EmbeddingAccount:
    """Embedding work of one phase (e.g. one strategy's build).

    Attributes:
        hits: Texts served from the cache.
        hit_seconds: What embedding those texts cost when they were first embedded.
        misses: Texts the model embedded during the phase.
        miss_seconds: Model time spent on them.
    """

    hits: int = 0
    hit_seconds: float = 0.0
    misses: int = 0
    miss_seconds: float = 0.0


class EmbeddingCache:
    """Wraps an :class:`~core.embed.Embedder`; each distinct document text is embedded once.

    Thread-safe. The returned vectors are the model's own (a cache hit returns exactly the
    vector computed on the first call).

    Args:
        inner: The embedder that does the work.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self._vectors: dict[str, FloatArray] = {}
        self._cost: dict[str, float] = {}
        self._accounts: list[EmbeddingAccount] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EmbeddingCache({self.inner!r}, texts={len(self._vectors)})"

    @property
    def dimension(self) -> int:
        """The inner embedder's dimension."""
        return self.inner.dimension

    def __len__(self) -> int:
        return len(self._vectors)

    def embed_documents(self, texts: Sequence[str]) -> FloatArray:
        """Embeds texts, computing only those not seen before (in one call to the model).

        Args:
            texts: The texts.

        Returns:
            A float32 matrix, one L2-normalised row per text.

        Raises:
            TypeError: ``texts`` is a single string.
        """
        if isinstance(texts, str):
            raise TypeError(
                "embed_documents expects a sequence of strings, got a single str (use embed_query)"
            )
        items = list(texts)
        with self._lock:
            missing = list(dict.fromkeys(t for t in items if t not in self._vectors))
            hit_texts = [t for t in items if t in self._vectors]
            elapsed = 0.0
            if missing:
                t0 = time.perf_counter()
                vectors = self.inner.embed_documents(missing)
                elapsed = time.perf_counter() - t0
                share = elapsed / len(missing)
                for text, vector in zip(missing, vectors, strict=True):
                    self._vectors[text] = np.array(vector, dtype=np.float32)
                    self._cost[text] = share
            for acct in self._accounts:
                acct.hits += len(hit_texts)
                acct.hit_seconds += sum(self._cost[t] for t in hit_texts)
                acct.misses += len(missing)
                acct.miss_seconds += elapsed
            if not items:
                return np.zeros((0, self.dimension), dtype=np.float32)
            return np.ascontiguousarray(np.stack([self._vectors[t] for t in items]), dtype=np.float32)

    def embed_query(self, text: str) -> FloatArray:
        """Embeds a query with the model (never cached)."""
        return self.inner.embed_query(text)

    def embed_query_with_documents(self, query: str, texts: Sequence[str]) -> tuple[FloatArray, FloatArray]:
        """A query's vector (never cached) and some texts' vectors (cached), in one model call.

        When the inner model embeds queries like documents (``queries_as_documents``), the
        query rides in the same batch as the texts not seen before, as it would without the
        cache (see :func:`core.embed.embed_query_with`); otherwise two calls.
        """
        items = list(texts)
        if getattr(self.inner, "queries_as_documents", False) is not True:
            return self.embed_query(query), self.embed_documents(items)
        with self._lock:
            missing = list(dict.fromkeys(t for t in items if t not in self._vectors))
        if not missing:
            return self.embed_query(query), self.embed_documents(items)
        both = np.asarray(self.inner.embed_documents([query, *missing]), dtype=np.float32)
        with self._lock:
            for text, vector in zip(missing, both[1:], strict=True):
                self._vectors.setdefault(text, np.array(vector, dtype=np.float32))
                self._cost.setdefault(text, 0.0)
        return both[0], self.embed_documents(items)

    @contextmanager
    def account(self) -> Iterator[EmbeddingAccount]:
        """Records the cache hits and misses of every call made inside the ``with`` block."""
        acct = EmbeddingAccount()
        with self._lock:
            self._accounts.append(acct)
        try:
            yield acct
        finally:
            with self._lock:
                self._accounts.remove(acct)
