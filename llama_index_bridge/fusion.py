"""``UncertaintyFusionRetriever``: UMG-RAG's entropy-weighted fusion over any LlamaIndex retrievers.

It stands beside ``QueryFusionRetriever``: the retrievers' lists for the query are fused,
each weighted, per query, by the confidence of its score distribution
(:mod:`core.confidence_fusion`). Scores are the ``NodeWithScore.score`` each retriever gives;
a retriever whose nodes carry no score is fused by rank. Each retriever gets its own copy of
the query bundle (a ``VectorIndexRetriever`` writes its embedding into the bundle it is
given, which another retriever's model must not reuse). ``aretrieve`` runs the retrievers
concurrently, a retriever without an async implementation of its own in a worker thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from core.confidence_fusion import (
    DEFAULT_SCALING,
    DEFAULT_TEMPERATURE,
    RankedList,
    Scaling,
    check_scaling,
    check_temperature,
    check_weights,
    fuse_ranked_lists,
)

__all__ = ["UncertaintyFusionRetriever"]


class UncertaintyFusionRetriever(BaseRetriever):
    """Fuses several retrievers' nodes, each list weighted by its per-query confidence.

    Args:
        retrievers: The retrievers whose lists are fused.
        weights: A prior weight per retriever (default equal), times its confidence.
        similarity_top_k: Fused nodes returned; None: all of them.
        temperature: Softmax temperature of the confidence (on z-scores).
        scaling: An item's contribution: ``"rank"`` (``1 / (1 + rank)``) or ``"minmax"`` (its
            score scaled to [0, 1]); see :mod:`core.confidence_fusion`.
        callback_manager: LlamaIndex callbacks.

    Raises:
        ValueError: No retrievers, not one weight per retriever, a negative weight, a
            temperature that is not positive, or an unknown ``scaling``.

    Example:
        >>> fused = UncertaintyFusionRetriever([bm25, index.as_retriever()])  # doctest: +SKIP
        >>> fused.retrieve("Who founded the observatory?")  # doctest: +SKIP
    """

    def __init__(
        self,
        retrievers: Sequence[BaseRetriever],
        weights: Sequence[float] | None = None,
        similarity_top_k: int | None = None,
        temperature: float = DEFAULT_TEMPERATURE,
        scaling: Scaling = DEFAULT_SCALING,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        if not retrievers:
            raise ValueError("UncertaintyFusionRetriever needs at least one retriever")
        if similarity_top_k is not None and similarity_top_k < 1:
            raise ValueError(f"similarity_top_k must be >= 1 or None, got {similarity_top_k}")
        self.retrievers = list(retrievers)
        self.weights = None if weights is None else check_weights(weights, len(retrievers))
        self.similarity_top_k = similarity_top_k
        self.temperature = check_temperature(temperature)
        self.scaling = check_scaling(scaling)
        super().__init__(callback_manager=callback_manager, **kwargs)

    def _fuse(self, results: Sequence[list[NodeWithScore]]) -> list[NodeWithScore]:
        by_id: dict[str, NodeWithScore] = {}
        lists = []
        for hits in results:
            keys = [h.node.node_id for h in hits]
            for key, hit in zip(keys, hits, strict=True):
                by_id.setdefault(key, hit)
            scores = [h.score for h in hits]
            known = all(s is not None for s in scores)
            lists.append(RankedList(keys, [float(s) for s in scores if s is not None] if known else None))
        fused, _ = fuse_ranked_lists(
            lists, self.weights, temperature=self.temperature, k=self.similarity_top_k, scaling=self.scaling
        )
        return [NodeWithScore(node=by_id[str(item.key)].node, score=item.score) for item in fused]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._fuse([r.retrieve(dataclasses.replace(query_bundle)) for r in self.retrievers])

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = await asyncio.gather(
            *(_aretrieved(r, dataclasses.replace(query_bundle)) for r in self.retrievers)
        )
        return self._fuse(list(results))


async def _aretrieved(retriever: BaseRetriever, query_bundle: QueryBundle) -> list[NodeWithScore]:
    """``retriever.aretrieve``, or its ``retrieve`` in a worker thread when it has no async path of its own.

    LlamaIndex's default ``_aretrieve`` calls the sync ``_retrieve`` on the event loop, which
    would block the loop and run such retrievers one after the other.
    """
    if type(retriever)._aretrieve is BaseRetriever._aretrieve:
        return await asyncio.to_thread(retriever.retrieve, query_bundle)
    return await retriever.aretrieve(query_bundle)
