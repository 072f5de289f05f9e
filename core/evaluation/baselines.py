"""Sparse, hybrid and entity-linked baselines over the shared chunks of a benchmark run.

All index exactly the chunks of :class:`~core.evaluation.corpus.SharedCorpus` (the ones dense
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
from core.strategies.entity_links import is_nameable
from core.strategies.umg.sparse import BM25Expert
from core.text import query_ngrams, title_entities
from core.types import Retrieved

__all__ = ["BM25Baseline", "HybridRRFBaseline", "TwoHopBaseline"]


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


class TwoHopBaseline:
    """Entity-linked two hops over titles: the plain heuristic that structure is measured against.

    The query's n-grams that are a chunk's document title (``title_entities``) give hop 1; the
    titles that those chunks' texts contain give hop 2. Every chunk is ranked by its cosine
    (an exact scan) plus a fixed bonus per hop: about thirty lines, no graph, no weights.

    Args:
        corpus: The shared chunks (with their vectors and ``title`` metadata).
        embedder: Embeds the query.
        first_bonus: Added to a chunk of a document the query names.
        second_bonus: Added to a chunk of a document that a first-hop chunk names.
        max_ngram: Longest n-gram, in words, looked up as a title.
    """

    name: ClassVar[str] = "two-hop"

    def __init__(
        self,
        corpus: SharedCorpus,
        embedder: Embedder,
        *,
        first_bonus: float = 0.2,
        second_bonus: float = 0.1,
        max_ngram: int = 8,
    ) -> None:
        self.corpus = corpus
        self.embedder = embedder
        self.bonus = (first_bonus, second_bonus)
        self.max_ngram = max_ngram
        self.titles: dict[str, list[int]] = {}
        for row, meta in enumerate(corpus.metadatas):
            title = meta.get("title")
            for name in title_entities(title) if isinstance(title, str) else []:
                if is_nameable(name):
                    self.titles.setdefault(name, []).append(row)

    def _named(self, text: str) -> set[int]:
        return {r for g in query_ngrams(text, self.max_ngram) for r in self.titles.get(g, ())}

    def retrieve(self, query: str, k: int | None = None) -> list[Retrieved]:
        """Top-k chunks by cosine plus the hop bonuses."""
        text = check_query(query)
        k = check_k(k, 4)
        scores = self.corpus.vectors @ self.embedder.embed_query(text).astype(np.float32)
        first = self._named(text)
        second = set().union(*(self._named(self.corpus.texts[r]) for r in first)) - first
        for rows, bonus in ((first, self.bonus[0]), (second, self.bonus[1])):
            scores[list(rows)] += bonus
        top = np.lexsort((np.arange(len(scores)), -scores))[:k]
        return [_result(self.corpus, int(r), float(scores[r]), self.name) for r in top]


def _result(corpus: SharedCorpus, row: int, score: float, strategy: str) -> Retrieved:
    return Retrieved(
        id=corpus.ids[row],
        text=corpus.texts[row],
        score=score,
        metadata={**corpus.metadatas[row], "strategy": strategy, "score": score},
    )
