"""Sparse and hybrid baselines over the shared chunks of a benchmark run.

Both index exactly the chunks of :class:`~core.evaluation.corpus.SharedCorpus` (the ones dense
retrieval and Bridge-RAG read from Chroma), so the rows of a comparison differ only in how
they rank the same units.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from core.embed import Embedder
from core.evaluation.corpus import SharedCorpus
from core.native.fusion import rrf_fuse
from core.strategies.base import check_k, check_query
from core.strategies.umg.sparse import BM25Expert
from core.types import Retrieved

__all__ = ["BM25Baseline", "HybridRRFBaseline"]


class BM25Baseline:
    """BM25 (bm25s, Lucene variant, English stopwords) over the shared chunks.

    Args:
        corpus: The shared chunks.
    """

    name: ClassVar[str] = "bm25"

    def __init__(self, corpus: SharedCorpus) -> None:
        self.corpus = corpus
        self.expert = BM25Expert()
        self.expert.index(corpus.texts)

    def search(self, query: str, n: int) -> list[tuple[int, float]]:
        """The ``n`` best chunks as ``(row, score)`` pairs (chunks without a query term are left out)."""
        rows, scores = self.expert.search(query, n)
        return [(int(r), float(s)) for r, s in zip(rows, scores, strict=True)]

    def retrieve(self, query: str, k: int | None = None) -> list[Retrieved]:
        """Top-k chunks by BM25 score."""
        text = check_query(query)
        return [
            _result(self.corpus, row, score, self.name) for row, score in self.search(text, check_k(k, 4))
        ]


class HybridRRFBaseline:
    """Reciprocal-rank fusion of dense (Chroma) and BM25 lists over the shared chunks.

    Args:
        corpus: The shared chunks.
        embedder: Embeds the query.
        candidates: Length of each list before fusion.
        k_rrf: RRF smoothing constant (60, as in Cormack et al., 2009).
    """

    name: ClassVar[str] = "hybrid"

    def __init__(
        self, corpus: SharedCorpus, embedder: Embedder, *, candidates: int = 50, k_rrf: float = 60.0
    ) -> None:
        self.corpus = corpus
        self.embedder = embedder
        self.candidates = check_k(candidates, 50)
        self.k_rrf = k_rrf
        self.bm25 = BM25Baseline(corpus)
        self._row = {cid: i for i, cid in enumerate(corpus.ids)}

    def retrieve(self, query: str, k: int | None = None) -> list[Retrieved]:
        """Top-k chunks by fused reciprocal rank."""
        text = check_query(query)
        k = check_k(k, 4)
        dense = [
            self._row[cid]
            for cid, *_ in self.corpus.store.query(self.embedder.embed_query(text), self.candidates)
        ]
        sparse = [row for row, _ in self.bm25.search(text, self.candidates)]
        offsets = np.asarray([0, len(dense), len(dense) + len(sparse)], dtype=np.int64)
        ids, scores = rrf_fuse(offsets, np.asarray(dense + sparse, dtype=np.int64), k_rrf=self.k_rrf, k=k)
        return [_result(self.corpus, int(r), float(s), self.name) for r, s in zip(ids, scores, strict=True)]


def _result(corpus: SharedCorpus, row: int, score: float, strategy: str) -> Retrieved:
    return Retrieved(
        id=corpus.ids[row],
        text=corpus.texts[row],
        score=score,
        metadata={**corpus.metadatas[row], "strategy": strategy, "score": score},
    )
