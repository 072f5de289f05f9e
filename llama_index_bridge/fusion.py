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
from collections.abc import Hashable, Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, QueryType

from core.confidence_fusion import (
    DEFAULT_RANK_CONSTANT,
    DEFAULT_SCALING,
    DEFAULT_TEMPERATURE,
    RankedList,
    Scaling,
    check_rank_constant,
    check_scaling,
    check_temperature,
    check_weights,
    fuse_ranked_lists,
    item_key,
)
from core.strategies.base import check_k
from llama_index_bridge.retrievers import check_query_type, in_base_span

__all__ = ["UncertaintyFusionRetriever"]


class UncertaintyFusionRetriever(BaseRetriever):
    """Fuses several retrievers' nodes, each list weighted by its per-query confidence.

    Args:
        retrievers: The retrievers whose lists are fused.
        weights: A prior weight per retriever (default equal), times its confidence.
        similarity_top_k: Fused nodes returned; None: all of them.
        temperature: Softmax temperature of the confidence (on z-scores).
        scaling: An item's contribution: ``"rank"`` (``1 / (rank + c)``, 1-based ranks) or ``"minmax"`` (its
            score scaled to [0, 1]); see :mod:`core.confidence_fusion`.
        id_key: Metadata key identifying a node across lists; default its text (without
            metadata), so the same passage from two retrievers that give it different node
            ids is one result, as ``QueryFusionRetriever`` merges it.
        callback_manager: LlamaIndex callbacks.
        c: The rank constant of ``"rank"`` contributions, keyword only (1 by default, chosen
            with the temperature: :data:`core.confidence_fusion.DEFAULT_RANK_CONSTANT`).

    Raises:
        TypeError: ``retrievers`` is not a list of retrievers (an index, a vector store, one
            retriever not in a list), or ``similarity_top_k`` is not an int.
        ValueError: No retrievers, not one weight per retriever, a negative weight, a
            temperature that is not positive, an unknown ``scaling``, or a negative ``c``.

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
        id_key: str | None = None,
        callback_manager: CallbackManager | None = None,
        *,
        c: float = DEFAULT_RANK_CONSTANT,
        **kwargs: Any,
    ) -> None:
        self.retrievers = _checked_retrievers(retrievers)
        self.weights = None if weights is None else check_weights(weights, len(self.retrievers))
        self.similarity_top_k = _checked_top_k(similarity_top_k)
        self.id_key = id_key
        self.temperature = check_temperature(temperature)
        self.scaling = check_scaling(scaling)
        self.c = check_rank_constant(c)
        super().__init__(callback_manager=callback_manager, **kwargs)

    @in_base_span
    def retrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        """Fuses the retrievers' nodes for a query string or ``QueryBundle``.

        Raises:
            TypeError: The query is neither a str nor a ``QueryBundle``.
        """
        return super().retrieve(check_query_type(str_or_query_bundle))

    @in_base_span
    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        """Async :meth:`retrieve`: the retrievers run concurrently."""
        return await super().aretrieve(check_query_type(str_or_query_bundle))

    def _key(self, hit: NodeWithScore, source: int) -> Hashable:
        text = hit.node.get_content(metadata_mode=MetadataMode.NONE)
        return item_key(text, hit.node.metadata, self.id_key, source, "node")

    def _fuse(self, results: Sequence[list[NodeWithScore]]) -> list[NodeWithScore]:
        by_id: dict[Hashable, NodeWithScore] = {}
        lists = []
        for source, hits in enumerate(results):
            keys = [self._key(h, source) for h in hits]
            for key, hit in zip(keys, hits, strict=True):
                by_id.setdefault(key, hit)
            scores = [h.score for h in hits]
            known = all(s is not None for s in scores)
            lists.append(RankedList(keys, [float(s) for s in scores if s is not None] if known else None))
        fused, _ = fuse_ranked_lists(
            lists,
            self.weights,
            temperature=self.temperature,
            k=self.similarity_top_k,
            scaling=self.scaling,
            c=self.c,
        )
        return [NodeWithScore(node=by_id[item.key].node, score=item.score) for item in fused]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._fuse([r.retrieve(dataclasses.replace(query_bundle)) for r in self.retrievers])

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = await asyncio.gather(
            *(_aretrieved(r, dataclasses.replace(query_bundle)) for r in self.retrievers)
        )
        return self._fuse(list(results))


def _checked_retrievers(retrievers: object) -> list[BaseRetriever]:
    """``retrievers`` as a list, when it is a non-empty sequence of LlamaIndex retrievers.

    Raises:
        TypeError: One retriever not in a list, or an item that is not a retriever.
        ValueError: No retrievers.
    """
    if isinstance(retrievers, BaseRetriever):
        raise TypeError("retrievers must be a list of retrievers, got a single one; wrap it in a list")
    if not isinstance(retrievers, Sequence) or isinstance(retrievers, str):
        raise TypeError(
            f"retrievers must be a list of LlamaIndex retrievers, got {type(retrievers).__name__}"
        )
    if not retrievers:
        raise ValueError("UncertaintyFusionRetriever needs at least one retriever")
    for i, r in enumerate(retrievers):
        if not isinstance(r, BaseRetriever):
            hint = "; pass its .as_retriever()" if callable(getattr(r, "as_retriever", None)) else ""
            raise TypeError(f"retrievers[{i}] ({type(r).__name__}) is not a LlamaIndex retriever{hint}")
    return list(retrievers)


def _checked_top_k(value: object) -> int | None:
    """``similarity_top_k`` when it is None or a positive int (bounded as every ``k`` is)."""
    try:
        return None if value is None else check_k(value, default=1)
    except (TypeError, ValueError) as e:
        raise type(e)(f"similarity_top_k: {e} (or None for every fused node)") from None


async def _aretrieved(retriever: BaseRetriever, query_bundle: QueryBundle) -> list[NodeWithScore]:
    """``retriever.aretrieve``, or its ``retrieve`` in a worker thread when it has no async path of its own.

    LlamaIndex's default ``_aretrieve`` calls the sync ``_retrieve`` on the event loop, which
    would block the loop and run such retrievers one after the other.
    """
    if type(retriever)._aretrieve is BaseRetriever._aretrieve:
        return await asyncio.to_thread(retriever.retrieve, query_bundle)
    return await retriever.aretrieve(query_bundle)
