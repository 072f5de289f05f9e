from __future__ import annotations

import asyncio
import json
import threading
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from llama_index.core import Document as LlamaDocument
from llama_index.core.base.response.schema import Response
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers.no_text import NoText
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

import llama_index_bridge
from core.types import Document as CoreDocument
from core.types import Retrieved
from llama_index_bridge import StrategyRetriever, from_llama_document, to_node_with_score
from tests.fake_strategy import FakeStrategy

QUERY = "Which iron tower is in Paris?"


@pytest.fixture
def strategy() -> FakeStrategy:
    return FakeStrategy()


@pytest.fixture
def retriever(strategy: FakeStrategy) -> StrategyRetriever:
    return StrategyRetriever(strategy, k=2)


def test_real_packages_are_not_shadowed() -> None:
    import langchain_core
    import llama_index.core

    assert llama_index.core.__file__ is not None
    assert "site-packages" in llama_index.core.__file__
    assert langchain_core.__file__ is not None
    assert "site-packages" in langchain_core.__file__


def test_all_exports() -> None:
    assert "StrategyRetriever" in llama_index_bridge.__all__
    for name in llama_index_bridge.__all__:
        assert hasattr(llama_index_bridge, name)


def test_is_a_llama_index_retriever(retriever: StrategyRetriever) -> None:
    assert isinstance(retriever, BaseRetriever)


def test_retrieve_maps_results(retriever: StrategyRetriever) -> None:
    nodes = retriever.retrieve(QUERY)

    assert [n.node.node_id for n in nodes] == ["eiffel::0", "louvre::0"]
    top = nodes[0]
    assert isinstance(top, NodeWithScore)
    assert isinstance(top.node, TextNode)
    assert top.score == pytest.approx(5 / 6)
    assert top.node.get_content() == "The Eiffel Tower is a wrought iron tower in Paris."
    assert top.node.metadata == {
        "source": "wiki/eiffel",
        "doc_id": "eiffel",
        "provenance": {"strategy": "fake", "matched": ["in", "iron", "is", "paris", "tower"], "depth": 1},
    }
    assert top.node.ref_doc_id == "eiffel"
    assert nodes[0].score is not None
    assert nodes[1].score is not None
    assert nodes[0].score > nodes[1].score


def test_provenance_is_hidden_from_llm_and_embed_views(retriever: StrategyRetriever) -> None:
    node = retriever.retrieve(QUERY)[0].node
    for mode in (MetadataMode.LLM, MetadataMode.EMBED):
        content = node.get_content(metadata_mode=mode)
        assert "source: wiki/eiffel" in content
        assert "provenance" not in content
    assert "provenance" in node.get_content(metadata_mode=MetadataMode.ALL)


def test_hidden_metadata_keys_can_be_chosen(strategy: FakeStrategy) -> None:
    retriever = StrategyRetriever(strategy, k=1, hidden_metadata_keys=["source", "absent"])
    node = retriever.retrieve(QUERY)[0].node
    assert node.excluded_llm_metadata_keys == ["source"]
    assert node.excluded_embed_metadata_keys == ["source"]
    content = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "source" not in content
    assert "provenance" in content


def test_default_k_is_four(strategy: FakeStrategy) -> None:
    retriever = StrategyRetriever(strategy)
    assert retriever.k == 4
    assert len(retriever.retrieve(QUERY)) == 4
    assert strategy.calls[-1][1] == 4


@pytest.mark.parametrize("k", [1, 3, 5])
def test_k(strategy: FakeStrategy, k: int) -> None:
    assert len(StrategyRetriever(strategy, k=k).retrieve(QUERY)) == k


def test_search_kwargs_are_forwarded(strategy: FakeStrategy) -> None:
    source = {"depth": 2, "min_score": 0.5}
    retriever = StrategyRetriever(strategy, k=3, search_kwargs=source)
    nodes = retriever.retrieve(QUERY)

    assert strategy.calls[-1][1:3] == (3, {"depth": 2, "min_score": 0.5})
    assert [n.node.node_id for n in nodes] == ["eiffel::0", "louvre::0", "ore::0"]
    assert all(n.node.metadata["provenance"]["depth"] == 2 for n in nodes)
    source["depth"] = 9  # the retriever keeps its own copy
    assert retriever.search_kwargs == {"depth": 2, "min_score": 0.5}


@pytest.mark.parametrize("key", ["k", "query"])
def test_reserved_search_kwargs_are_rejected(strategy: FakeStrategy, key: str) -> None:
    with pytest.raises(ValueError, match="may not contain"):
        StrategyRetriever(strategy, search_kwargs={key: 1})


@pytest.mark.parametrize(
    ("k", "error", "match"),
    [
        (0, ValueError, "k must be >= 1"),
        (-1, ValueError, "k must be >= 1"),
        ("3", TypeError, "k must be an int"),
        (2.0, TypeError, "k must be an int"),
        (True, TypeError, "k must be an int"),
    ],
)
def test_bad_k(strategy: FakeStrategy, k: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        StrategyRetriever(strategy, k=k)


def test_bad_strategy_is_rejected() -> None:
    with pytest.raises(TypeError, match=r"core\.strategies\.Strategy"):
        StrategyRetriever(object())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "error", "match"),
    [
        ("", ValueError, "query is empty"),
        ("  ", ValueError, "query is empty"),
        (QueryBundle(query_str=""), ValueError, "query is empty"),
        (QueryBundle(query_str=42), TypeError, "query must be a str"),  # type: ignore[arg-type]
    ],
)
def test_bad_query_errors_propagate_unchanged(
    retriever: StrategyRetriever, query: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        retriever.retrieve(query)


async def test_bad_query_errors_propagate_from_aretrieve(retriever: StrategyRetriever) -> None:
    with pytest.raises(ValueError, match="query is empty"):
        await retriever.aretrieve("")


def test_retrieve_accepts_a_query_bundle(retriever: StrategyRetriever) -> None:
    nodes = retriever.retrieve(QueryBundle(query_str=QUERY))
    assert [n.node.node_id for n in nodes] == ["eiffel::0", "louvre::0"]


async def test_aretrieve_matches_retrieve(retriever: StrategyRetriever) -> None:
    assert await retriever.aretrieve(QUERY) == retriever.retrieve(QUERY)


async def test_aretrieve_runs_in_a_worker_thread(
    retriever: StrategyRetriever, strategy: FakeStrategy
) -> None:
    await retriever.aretrieve(QUERY)
    assert strategy.calls[-1][3] != threading.get_ident()


async def test_aretrieve_calls_run_concurrently() -> None:
    # Both retrievals must be inside the strategy at once to pass the barrier; a blocked
    # event loop (or serialised calls) breaks the barrier instead.
    barrier = threading.Barrier(2, timeout=30)
    retriever = StrategyRetriever(FakeStrategy(hook=barrier.wait), k=1)
    first, second = await asyncio.gather(
        retriever.aretrieve(QUERY), retriever.aretrieve("capital of Germany")
    )
    assert [n.node.node_id for n in first] == ["eiffel::0"]
    assert [n.node.node_id for n in second] == ["berlin::0"]


def test_query_engine_with_mock_llm(retriever: StrategyRetriever) -> None:
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUERY)

    assert [n.node.node_id for n in response.source_nodes] == ["eiffel::0", "louvre::0"]
    # MockLLM echoes its prompt: the retrieved text reached it, the provenance did not.
    assert "The Eiffel Tower is a wrought iron tower in Paris." in str(response)
    assert "provenance" not in str(response)


async def test_query_engine_async(retriever: StrategyRetriever) -> None:
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = await engine.aquery(QUERY)
    assert [n.node.node_id for n in response.source_nodes] == ["eiffel::0", "louvre::0"]


def test_query_engine_retrieval_only(retriever: StrategyRetriever) -> None:
    # from_args(..., response_mode="no_text") would fall back to Settings.llm (OpenAI, absent
    # offline), so the no-text synthesizer is given its LLM directly.
    engine = RetrieverQueryEngine(retriever, response_synthesizer=NoText(llm=MockLLM()))
    response = engine.query(QUERY)

    assert isinstance(response, Response)
    assert not response.response
    assert [n.node.node_id for n in response.source_nodes] == ["eiffel::0", "louvre::0"]
    assert [n.node.node_id for n in engine.retrieve(QueryBundle(QUERY))] == ["eiffel::0", "louvre::0"]


class _Opaque:
    def __str__(self) -> str:
        return "opaque"


def test_unfriendly_metadata_becomes_json() -> None:
    r = Retrieved(
        id="x::0",
        text="text",
        score=np.float32(0.5),  # type: ignore[arg-type]
        metadata={
            "np_float": np.float32(1.5),
            "np_int": np.int64(3),
            "array": np.arange(3),
            "tuple": (1, "a"),
            "set": {"b", "a"},
            "mixed_set": {1, "a"},
            "nested": {1: {"deep": (np.float64(2.0),)}},
            "nan": float("nan"),
            "object": _Opaque(),
            "fraction": Fraction(1, 3),
            "none": None,
            "flag": True,
        },
    )
    scored = to_node_with_score(r)
    node = scored.node
    assert isinstance(scored.score, float)
    assert scored.score == 0.5
    assert node.metadata["np_float"] == 1.5
    assert type(node.metadata["np_float"]) is float
    assert node.metadata["np_int"] == 3
    assert type(node.metadata["np_int"]) is int
    assert node.metadata["array"] == [0, 1, 2]
    assert node.metadata["tuple"] == [1, "a"]
    assert node.metadata["set"] == ["a", "b"]
    assert sorted(node.metadata["mixed_set"], key=str) == [1, "a"]
    assert node.metadata["nested"] == {"1": {"deep": [2.0]}}
    assert node.metadata["nan"] is None
    assert node.metadata["object"] == "opaque"
    assert node.metadata["fraction"] == "1/3"
    assert node.metadata["none"] is None
    assert node.metadata["flag"] is True
    # It serialises and survives a round trip.
    assert json.loads(node.to_json())["metadata"] == node.metadata
    assert TextNode.from_json(node.to_json()).metadata == node.metadata
    assert node.get_content(metadata_mode=MetadataMode.LLM)
    # Structured values are hidden from the LLM view by default.
    assert set(node.excluded_llm_metadata_keys) == {"array", "tuple", "set", "mixed_set", "nested"}
    # The result itself is untouched.
    assert isinstance(r.metadata["tuple"], tuple)


def test_to_node_with_score_without_doc_id() -> None:
    scored = to_node_with_score(Retrieved(id="a", text="t", score=1.0))
    assert scored.node.node_id == "a"
    assert scored.node.ref_doc_id is None
    assert scored.node.metadata == {}


def test_from_llama_document() -> None:
    doc = LlamaDocument(text="Rome is in Italy.", id_="rome", metadata={"n": 1})
    core_doc = from_llama_document(doc)
    assert isinstance(core_doc, CoreDocument)
    assert core_doc.text == "Rome is in Italy."
    assert core_doc.id == "rome" == doc.doc_id
    assert dict(core_doc.metadata) == {
        "n": 1,
        "ref_doc_id": "rome",
        "document_id": "rome",
    }  # LlamaIndex's keys
    assert core_doc.metadata is not doc.metadata


def test_from_llama_text_node_ignores_metadata_in_text() -> None:
    node = TextNode(text="body", id_="n1", metadata={"title": "T"})
    core_doc = from_llama_document(node)
    assert core_doc.text == "body"
    assert core_doc.id == "n1"


def test_documents_round_trip_into_a_strategy() -> None:
    strategy = FakeStrategy(documents=[])
    strategy.add_documents([from_llama_document(LlamaDocument(text="Rome is in Italy.", id_="rome"))])
    [scored] = StrategyRetriever(strategy).retrieve("Rome")
    assert scored.node.ref_doc_id == "rome"
