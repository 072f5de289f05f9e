"""llama_index_bridge.UncertaintyFusionRetriever beside QueryFusionRetriever."""

from __future__ import annotations

import asyncio
import threading
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
    with pytest.raises(ValueError, match="one weight per retriever"):
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


def test_c_reaches_the_fusion_and_is_checked() -> None:
    hits = [NodeWithScore(node=n, score=s) for n, s in zip(NODES[:3], [0.9, 0.5, 0.4], strict=True)]

    def ratio(**options: Any) -> float:
        fused = UncertaintyFusionRetriever([Fixed(hits)], **options).retrieve("q")
        assert fused[0].score is not None
        assert fused[2].score is not None
        return fused[2].score / fused[0].score

    assert ratio() == pytest.approx(2 / 4)  # c = 1 by default, as in LangChain's
    assert ratio(c=0) == pytest.approx(1 / 3)
    assert ratio(c=60) == pytest.approx(61 / 63)
    with pytest.raises(ValueError, match="c must be a finite number >= 0"):
        UncertaintyFusionRetriever([Fixed(hits)], c=-1)
    positional = UncertaintyFusionRetriever([Fixed(hits)], None, 2, 0.25, "rank", "doc_id")
    assert (positional.id_key, positional.c, positional.similarity_top_k) == ("doc_id", 1.0, 2)


def test_aretrieve_runs_concurrently_and_keeps_the_loop_free() -> None:
    fused = UncertaintyFusionRetriever([Slow(n, 1.0) for n in NODES[:3]])

    hits, ticks = run_beside_a_ticker(lambda: fused.aretrieve("anything"))
    assert len(hits) == 3
    assert ACTIVE.peak == 3  # the three retrievers ran at once
    assert ticks >= 3


class SyncOnly(BaseRetriever):
    """No async path of its own: LlamaIndex's default would run it on the event loop."""

    lock = threading.Lock()
    active = peak = 0

    def __init__(self, node: TextNode, pause: float = 0.3) -> None:
        self.node, self.pause = node, pause
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        with SyncOnly.lock:
            SyncOnly.active += 1
            SyncOnly.peak = max(SyncOnly.peak, SyncOnly.active)
        time.sleep(self.pause)
        with SyncOnly.lock:
            SyncOnly.active -= 1
        return [NodeWithScore(node=self.node, score=1.0)]


def test_aretrieve_moves_sync_only_retrievers_off_the_loop() -> None:
    fused = UncertaintyFusionRetriever([SyncOnly(n) for n in NODES[:3]])
    hits, ticks = run_beside_a_ticker(lambda: fused.aretrieve("anything"))
    assert len(hits) == 3
    assert ticks >= 3  # the loop kept running while they slept
    assert SyncOnly.peak == 3  # and they slept at the same time, not one after the other


def test_each_retriever_gets_its_own_query_bundle(li_embed_model: Any) -> None:
    from llama_index.core.embeddings import MockEmbedding

    small = VectorStoreIndex(NODES, embed_model=MockEmbedding(embed_dim=8)).as_retriever(similarity_top_k=2)
    other = VectorStoreIndex(NODES, embed_model=li_embed_model).as_retriever(similarity_top_k=2)
    fused = UncertaintyFusionRetriever([small, other])
    bundle = QueryBundle("Who founded the Marrowick observatory?")
    assert len(fused.retrieve(bundle)) >= 2  # each retriever embedded the query with its own model
    assert bundle.embedding is None  # and the caller's bundle is left as it was
    assert len(asyncio.run(fused.aretrieve(bundle))) >= 2


def test_weights_and_temperature_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="finite and >= 0"):
        UncertaintyFusionRetriever([Slow(NODES[0]), Slow(NODES[1])], weights=[-1.0, 1.0])
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="temperature must be a positive"):
            UncertaintyFusionRetriever([Slow(NODES[0])], temperature=bad)


def test_the_same_passage_under_two_node_ids_is_one_result() -> None:
    """Two retrievers over the same text give it different ids (a store's uuids, our chunk ids)."""
    copies = [TextNode(id_=f"copy-{n.node_id}", text=n.text) for n in NODES[:3]]
    first = Fixed([NodeWithScore(node=n, score=s) for n, s in zip(NODES[:3], [0.9, 0.6, 0.5], strict=True)])
    second = Fixed([NodeWithScore(node=n, score=s) for n, s in zip(copies, [0.8, 0.7, 0.2], strict=True)])
    hits = UncertaintyFusionRetriever([first, second]).retrieve("q")
    assert [h.node.get_content() for h in hits] == [n.text for n in NODES[:3]]  # each once
    tagged = [TextNode(id_=n.node_id, text=n.text.upper(), metadata={"doc": n.node_id}) for n in NODES[:3]]
    for n, t in zip(NODES[:3], tagged, strict=True):
        n.metadata["doc"] = t.metadata["doc"]
    third = Fixed([NodeWithScore(node=n, score=0.5) for n in tagged])
    by_key = UncertaintyFusionRetriever([first, third], id_key="doc").retrieve("q")
    assert len(by_key) == 3
    with pytest.raises(ValueError, match=r"no metadata\['tenant'\]"):
        UncertaintyFusionRetriever([first], id_key="tenant").retrieve("q")
    for n in NODES[:3]:
        n.metadata.pop("doc")


def test_bad_arguments_say_what_to_pass(li_embed_model: Any) -> None:
    index = VectorStoreIndex(NODES, embed_model=li_embed_model)
    with pytest.raises(TypeError, match="got a single one; wrap it in a list"):
        UncertaintyFusionRetriever(index.as_retriever())  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"retrievers\[1\] \(VectorStoreIndex\) is not a LlamaIndex retriever; pass its"
    ):
        UncertaintyFusionRetriever([index.as_retriever(), index])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="similarity_top_k: k must be an int, got str"):
        UncertaintyFusionRetriever([Slow(NODES[0])], similarity_top_k="3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="query must be a str or a llama_index QueryBundle, got NoneType"):
        UncertaintyFusionRetriever([Slow(NODES[0], pause=0.0)]).retrieve(None)  # type: ignore[arg-type]


def test_one_span_per_retrieve() -> None:
    """LlamaIndex opens a span per traced call; the query check must not add a second one."""
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

    handler = SimpleSpanHandler()
    root = get_dispatcher()
    root.add_span_handler(handler)
    try:
        UncertaintyFusionRetriever([Slow(NODES[0], pause=0.0)]).retrieve("q")
        asyncio.run(UncertaintyFusionRetriever([Slow(NODES[0], pause=0.0)]).aretrieve("q"))
    finally:
        root.span_handlers.remove(handler)
    names = [span.id_.rsplit("-", 5)[0] for span in handler.completed_spans]
    assert names.count("UncertaintyFusionRetriever.retrieve") == 1
    assert names.count("UncertaintyFusionRetriever.aretrieve") == 1
