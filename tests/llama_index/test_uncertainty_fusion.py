"""llama_index_bridge.UncertaintyFusionRetriever beside QueryFusionRetriever."""

from __future__ import annotations

import time
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.retrievers.bm25 import BM25Retriever

from llama_index_bridge import UncertaintyFusionRetriever
from tests.async_probe import Overlap, run_beside_a_ticker

NODES = [
    TextNode(id_="a", text="The Marrowick observatory was founded by Ilse Varga in 1901."),
    TextNode(id_="b", text="Ilse Varga was an astronomer born in Corvane."),
    TextNode(id_="c", text="The River Tessel flows through Corvane to the sea."),
    TextNode(id_="d", text="The Halden Institute studies tides on the River Tessel."),
    TextNode(id_="e", text="A bakery in Marrowick sells rye bread."),
]


ACTIVE = Overlap()


class Slow(BaseRetriever):
    def __init__(self, node: TextNode, score: float | None = None, pause: float = 0.3) -> None:
        self.node, self.score, self.pause = node, score, pause
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        time.sleep(self.pause)
        return [NodeWithScore(node=self.node, score=self.score)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        await ACTIVE.wait(self.pause)
        return [NodeWithScore(node=self.node, score=self.score)]


def test_fuses_bm25_and_the_default_vector_store(li_embed_model: Any) -> None:
    index = VectorStoreIndex(NODES, embed_model=li_embed_model)  # SimpleVectorStore
    bm25 = BM25Retriever.from_defaults(nodes=NODES, similarity_top_k=3)
    fused = UncertaintyFusionRetriever([bm25, index.as_retriever(similarity_top_k=3)], similarity_top_k=3)
    hits = fused.retrieve("Who founded the Marrowick observatory?")
    assert hits[0].node.node_id == "a"
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_scoreless_nodes_are_fused_by_rank_and_arguments_are_checked() -> None:
    fused = UncertaintyFusionRetriever([Slow(NODES[0], pause=0.0), Slow(NODES[1], 0.5, pause=0.0)])
    assert {h.node.node_id for h in fused.retrieve("q")} == {"a", "b"}
    with pytest.raises(ValueError, match="at least one retriever"):
        UncertaintyFusionRetriever([])
    with pytest.raises(ValueError, match="one per retriever"):
        UncertaintyFusionRetriever([Slow(NODES[0])], weights=[1.0, 2.0])


class Fixed(BaseRetriever):
    def __init__(self, hits: list[NodeWithScore]) -> None:
        self.hits = hits
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.hits


def test_scaling_reaches_the_fusion() -> None:
    hits = [NodeWithScore(node=n, score=s) for n, s in zip(NODES[:3], [0.9, 0.5, 0.4], strict=True)]
    by_rank = UncertaintyFusionRetriever([Fixed(hits)]).retrieve("q")  # default: rank
    by_score = UncertaintyFusionRetriever([Fixed(hits)], scaling="minmax").retrieve("q")
    assert [h.node.node_id for h in by_rank] == [h.node.node_id for h in by_score] == ["a", "b", "c"]
    assert by_rank[-1].score is not None
    assert by_rank[-1].score > 0
    assert by_score[-1].score == 0.0
    with pytest.raises(ValueError, match="scaling"):
        UncertaintyFusionRetriever([Fixed(hits)], scaling="softmax")  # type: ignore[arg-type]


def test_aretrieve_runs_concurrently_and_keeps_the_loop_free() -> None:
    fused = UncertaintyFusionRetriever([Slow(n, 1.0) for n in NODES[:3]])

    hits, ticks = run_beside_a_ticker(lambda: fused.aretrieve("anything"))
    assert len(hits) == 3
    assert ACTIVE.peak == 3  # the three retrievers ran at once
    assert ticks >= 3
