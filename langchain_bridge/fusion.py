"""``UncertaintyFusionRetriever``: UMG-RAG's entropy-weighted fusion over any LangChain retrievers.

A drop-in for ``EnsembleRetriever`` (the same ``retrievers`` and ``weights`` arguments):
instead of reciprocal-rank fusion with fixed weights, each retriever's list is weighted, per
query, by the confidence of its score distribution (:mod:`core.confidence_fusion`).

Where the scores come from, per retriever:

* a vector-store retriever (``vectorstore.as_retriever()``, search type ``similarity``):
  the store's relevance scores (its own distance-to-relevance function) for a search with
  the retriever's ``search_kwargs`` (filters kept); a store without a relevance function
  (``InMemoryVectorStore``) returns its documents, fused by rank;
* LangChain's ``BM25Retriever``, which returns no scores: its own BM25 model scores the query
  once (``vectorizer.get_scores``), as the retriever itself does, and its top ``k`` are kept;
* any other retriever: its documents, scored by a ``relevance_score`` / ``score`` /
  ``similarity_score`` metadata value when every document has one, else by rank (a
  scoreless list, see :mod:`core.confidence_fusion`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, RetrieverLike
from langchain_core.vectorstores import VectorStoreRetriever
from pydantic import Field, model_validator

from core.confidence_fusion import (
    DEFAULT_SCALING,
    DEFAULT_TEMPERATURE,
    RankedList,
    Scaling,
    fuse_ranked_lists,
)

__all__ = ["UncertaintyFusionRetriever"]

#: Metadata keys read as a document's score, in this order.
SCORE_KEYS = ("relevance_score", "score", "similarity_score")

Scored = tuple[list[Document], list[float] | None]


def _metadata_scores(docs: Sequence[Document]) -> list[float] | None:
    for key in SCORE_KEYS:
        values = [d.metadata.get(key) for d in docs]
        if docs and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            return [float(v) for v in values]  # type: ignore[arg-type]
    return None


def _bm25_scored(retriever: Any, query: str) -> Scored:
    """LangChain's ``BM25Retriever`` results with the BM25 scores it computes but drops."""
    scores = np.asarray(retriever.vectorizer.get_scores(retriever.preprocess_func(query)), dtype=np.float64)
    k = min(int(retriever.k), scores.size)
    if k <= 0:
        return [], []
    head = np.argpartition(-scores, k - 1)[:k]
    top = head[np.argsort(-scores[head], kind="stable")]
    return [retriever.docs[i] for i in top.tolist()], scores[top].tolist()


def _is_bm25(retriever: Any) -> bool:
    return all(hasattr(retriever, a) for a in ("vectorizer", "preprocess_func", "docs", "k")) and callable(
        getattr(retriever.vectorizer, "get_scores", None)
    )


def _unzipped(pairs: Sequence[tuple[Document, float]]) -> Scored:
    return [d for d, _ in pairs], [float(s) for _, s in pairs]


def _search_kwargs(retriever: Any) -> dict[str, Any]:
    kwargs = dict(retriever.search_kwargs)
    kwargs.setdefault("k", 4)  # VectorStoreRetriever's default
    return kwargs


def _is_similarity_search(retriever: Any) -> bool:
    return isinstance(retriever, VectorStoreRetriever) and retriever.search_type == "similarity"


class UncertaintyFusionRetriever(BaseRetriever):
    """Fuses several retrievers' results, each list weighted by its per-query confidence.

    Example:
        >>> fused = UncertaintyFusionRetriever(retrievers=[bm25, chroma.as_retriever()])  # doctest: +SKIP
        >>> fused.invoke("Who founded the observatory?")  # doctest: +SKIP
    """

    retrievers: list[RetrieverLike] = Field(description="The retrievers whose lists are fused.")
    weights: list[float] | None = Field(
        default=None, description="A prior weight per retriever (default equal), times its confidence."
    )
    temperature: float = Field(
        default=DEFAULT_TEMPERATURE, gt=0, description="Softmax temperature of the confidence (z-scores)."
    )
    scaling: Scaling = Field(
        default=DEFAULT_SCALING,
        description="An item's contribution: 'rank' (1 / (1 + rank)) or 'minmax' (its score).",
    )
    k: int | None = Field(default=None, ge=1, description="Fused documents returned; None: all of them.")
    id_key: str | None = Field(
        default=None,
        description="Metadata key identifying a document across lists; default its id, else its text.",
    )

    @model_validator(mode="after")
    def _one_weight_each(self) -> UncertaintyFusionRetriever:
        if self.weights is not None and len(self.weights) != len(self.retrievers):
            raise ValueError(
                f"{len(self.weights)} weights for {len(self.retrievers)} retrievers; give one per retriever"
            )
        return self

    def _key(self, doc: Document) -> Hashable:
        if self.id_key is not None:
            return str(doc.metadata.get(self.id_key))
        return doc.id if doc.id else doc.page_content

    def _scored(self, retriever: Any, query: str, callbacks: Any) -> Scored:
        if _is_similarity_search(retriever):
            try:  # the store's own distance-to-relevance function (no [0, 1] range warning)
                return _unzipped(
                    retriever.vectorstore._similarity_search_with_relevance_scores(
                        query, **_search_kwargs(retriever)
                    )
                )
            except NotImplementedError:
                pass  # a store without a relevance function: its documents, fused by rank
        elif _is_bm25(retriever):
            return _bm25_scored(retriever, query)
        docs = retriever.invoke(query, config={"callbacks": callbacks})
        return docs, _metadata_scores(docs)

    async def _ascored(self, retriever: Any, query: str, callbacks: Any) -> Scored:
        if _is_similarity_search(retriever):
            try:
                return _unzipped(
                    await retriever.vectorstore._asimilarity_search_with_relevance_scores(
                        query, **_search_kwargs(retriever)
                    )
                )
            except NotImplementedError:
                pass
        elif _is_bm25(retriever):
            return await asyncio.to_thread(_bm25_scored, retriever, query)
        docs = await retriever.ainvoke(query, config={"callbacks": callbacks})
        return docs, _metadata_scores(docs)

    def _fuse(self, results: Sequence[Scored]) -> list[Document]:
        by_key: dict[Hashable, Document] = {}
        lists = []
        for docs, scores in results:
            keys = [self._key(d) for d in docs]
            for key, doc in zip(keys, docs, strict=True):
                by_key.setdefault(key, doc)
            lists.append(RankedList(keys, scores))
        fused, confidences = fuse_ranked_lists(
            lists, self.weights, temperature=self.temperature, k=self.k, scaling=self.scaling
        )
        out = []
        for item in fused:
            doc = by_key[item.key]
            meta = {**doc.metadata, "fusion_score": item.score, "fusion_confidences": confidences}
            out.append(Document(page_content=doc.page_content, metadata=meta, id=doc.id))
        return out

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        results = [
            self._scored(r, query, run_manager.get_child(tag=f"retriever_{i + 1}"))
            for i, r in enumerate(self.retrievers)
        ]
        return self._fuse(results)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        results = await asyncio.gather(
            *(
                self._ascored(r, query, run_manager.get_child(tag=f"retriever_{i + 1}"))
                for i, r in enumerate(self.retrievers)
            )
        )
        return self._fuse(results)
