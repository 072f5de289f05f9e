"""langchain_bridge.UncertaintyFusionRetriever: a drop-in for EnsembleRetriever."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from langchain_chroma import Chroma
from langchain_classic.retrievers import EnsembleRetriever
from langchain_community.retrievers import BM25Retriever
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.callbacks.manager import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import ConfigurableField, RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_bridge import UncertaintyFusionRetriever
from tests.async_probe import Overlap, run_beside_a_ticker

DOCS = [
    Document("The Marrowick observatory was founded by Ilse Varga in 1901.", id="a"),
    Document("Ilse Varga was an astronomer born in Corvane.", id="b"),
    Document("The River Tessel flows through Corvane to the sea.", id="c"),
    Document("The Halden Institute studies tides on the River Tessel.", id="d"),
    Document("A bakery in Marrowick sells rye bread.", id="e"),
]


ACTIVE = Overlap()


class SlowRetriever(BaseRetriever):
    """Returns fixed documents after a pause (sync: sleeps; async: awaits)."""

    docs: list[Document]
    pause: float = 0.3

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        time.sleep(self.pause)
        return self.docs

    async def _aget_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        await ACTIVE.wait(self.pause)
        return self.docs


def _chroma(embeddings: Any) -> Chroma:
    store = Chroma(collection_name=f"uf-{uuid.uuid4().hex[:8]}", embedding_function=embeddings)
    store.add_documents(DOCS)
    return store


def test_fuses_bm25_and_chroma_with_scores_and_confidences(lc_embeddings: Any) -> None:
    bm25 = BM25Retriever.from_documents(DOCS, k=3)
    dense = _chroma(lc_embeddings).as_retriever(search_kwargs={"k": 3})
    fused = UncertaintyFusionRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5])
    docs = fused.invoke("Who founded the Marrowick observatory?")
    assert docs[0].id == "a"
    assert len({d.id for d in docs}) == len(docs) <= 6
    scores = [d.metadata["fusion_score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    confidences = docs[0].metadata["fusion_confidences"]
    assert len(confidences) == 2
    assert all(0.0 <= c <= 1.0 for c in confidences)
    assert len(UncertaintyFusionRetriever(retrievers=[bm25, dense], k=2).invoke("Corvane")) == 2


def test_a_retriever_filter_is_kept(lc_embeddings: Any) -> None:
    dense = _chroma(lc_embeddings).as_retriever(search_kwargs={"k": 5, "filter": {"tag": "x"}})
    store = dense.vectorstore
    store.add_documents([Document("Tagged text about the observatory.", id="t", metadata={"tag": "x"})])
    docs = UncertaintyFusionRetriever(retrievers=[dense]).invoke("observatory")
    assert [d.id for d in docs] == ["t"]


async def test_a_per_call_filter_is_refused_not_ignored(lc_embeddings: Any) -> None:
    """``invoke(q, filter=...)`` once returned every tenant's documents (BM25 drops a filter)."""
    bm25 = BM25Retriever.from_documents(DOCS, k=2)
    fused = UncertaintyFusionRetriever(retrievers=[bm25, _chroma(lc_embeddings).as_retriever()])
    with pytest.raises(TypeError, match=r"no per-call search options \(got filter\)"):
        fused.invoke("observatory", filter={"tag": "x"})
    with pytest.raises(TypeError, match=r"\(got k\)"):
        await fused.ainvoke("observatory", k=2)
    assert fused.invoke("observatory", verbose=False)  # LangChain's own keywords still pass


def test_works_over_a_non_chroma_store_and_a_scoreless_retriever(lc_embeddings: Any) -> None:
    memory = InMemoryVectorStore.from_documents(DOCS, lc_embeddings)
    scoreless = SlowRetriever(docs=[DOCS[4], DOCS[2]], pause=0.0)
    fused = UncertaintyFusionRetriever(retrievers=[memory.as_retriever(search_kwargs={"k": 2}), scoreless])
    ids = [d.id for d in fused.invoke("Who founded the Marrowick observatory?")]
    assert set(ids) >= {"e", "c", "a"}


def test_scaling_reaches_the_fusion() -> None:
    bm25 = BM25Retriever.from_documents(DOCS, k=3)
    query = "Marrowick observatory founded by Ilse Varga"
    by_rank = UncertaintyFusionRetriever(retrievers=[bm25]).invoke(query)  # default: rank
    by_score = UncertaintyFusionRetriever(retrievers=[bm25], scaling="minmax").invoke(query)
    assert [d.id for d in by_rank] == [d.id for d in by_score]
    assert by_rank[-1].metadata["fusion_score"] > 0, "rank: the last place still counts"
    assert by_score[-1].metadata["fusion_score"] == 0.0, "min-max: the lowest score gives nothing"
    with pytest.raises(ValueError, match="scaling"):
        UncertaintyFusionRetriever(retrievers=[bm25], scaling="softmax")


def test_weights_must_match_the_retrievers() -> None:
    bm25 = BM25Retriever.from_documents(DOCS, k=2)
    with pytest.raises(ValueError, match="one weight per retriever"):
        UncertaintyFusionRetriever(retrievers=[bm25, bm25], weights=[1.0])


def test_callbacks_see_the_run_with_our_documents() -> None:
    seen: list[Any] = []

    class Handler(BaseCallbackHandler):
        def on_retriever_end(self, documents: Any, **kwargs: Any) -> None:
            seen.append(documents)

    fused = UncertaintyFusionRetriever(retrievers=[BM25Retriever.from_documents(DOCS, k=2)])
    out = fused.invoke("River Tessel", config={"callbacks": [Handler()]})
    assert seen
    assert [d.id for d in seen[-1]] == [d.id for d in out]


def test_ainvoke_runs_the_retrievers_concurrently_and_keeps_the_loop_free() -> None:
    slow = [SlowRetriever(docs=[d]) for d in DOCS[:3]]
    fused = UncertaintyFusionRetriever(retrievers=slow)

    docs, ticks = run_beside_a_ticker(lambda: fused.ainvoke("anything"))
    assert len(docs) == 3
    assert ACTIVE.peak == 3  # the three retrievers ran at once, not one after the other
    assert ticks >= 3  # the loop kept running while they waited


def test_documents_are_matched_by_text_as_ensemble_retriever_matches_them() -> None:
    loaded = [Document(d.page_content) for d in DOCS]  # loaded from files: no ids
    bm25 = BM25Retriever.from_documents(loaded, k=3)
    memory = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    memory.add_documents(loaded)  # the store gives its copies ids of its own
    fused = UncertaintyFusionRetriever(retrievers=[bm25, memory.as_retriever(search_kwargs={"k": 3})])
    docs = fused.invoke("Who founded the observatory?")
    texts = [d.page_content for d in docs]
    assert len(texts) == len(set(texts))
    ensemble = EnsembleRetriever(retrievers=fused.retrievers)
    assert set(texts) == {d.page_content for d in ensemble.invoke("Who founded the observatory?")}


def test_id_key_names_the_document_that_lacks_it() -> None:
    tagged = RunnableLambda(lambda q: [Document("alpha", metadata={"uid": 1}), Document("beta")])
    other = RunnableLambda(lambda q: [Document("alpha again", metadata={"uid": 1})])
    with pytest.raises(ValueError, match=r"retriever 1 has no metadata\['uid'\]"):
        UncertaintyFusionRetriever(retrievers=[tagged], id_key="uid").invoke("q")
    both = UncertaintyFusionRetriever(retrievers=[tagged.with_config(), other], id_key="uid")
    with pytest.raises(ValueError, match="retriever 1 has no"):
        both.invoke("q")
    same = RunnableLambda(
        lambda q: [Document("alpha", metadata={"uid": 1}), Document("b", metadata={"uid": 2})]
    )
    docs = UncertaintyFusionRetriever(retrievers=[same, other], id_key="uid").invoke("q")
    assert [d.metadata["uid"] for d in docs] == [1, 2]  # uid 1 from both lists is one document


def test_c_and_weights_are_checked_and_c_reaches_the_fusion() -> None:
    bm25 = BM25Retriever.from_documents(DOCS, k=3)
    flat = UncertaintyFusionRetriever(retrievers=[bm25], c=60).invoke("River Tessel")
    steep = UncertaintyFusionRetriever(retrievers=[bm25]).invoke("River Tessel")
    ratio = [d.metadata["fusion_score"] / flat[0].metadata["fusion_score"] for d in flat]
    assert ratio == pytest.approx([61 / 61, 61 / 62, 61 / 63])
    assert steep[2].metadata["fusion_score"] / steep[0].metadata["fusion_score"] == pytest.approx(
        2 / 4
    )  # c=1
    steepest = UncertaintyFusionRetriever(retrievers=[bm25], c=0).invoke("River Tessel")
    assert steepest[2].metadata["fusion_score"] / steepest[0].metadata["fusion_score"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        UncertaintyFusionRetriever(retrievers=[bm25], c=-1)
    with pytest.raises(ValueError, match="finite and >= 0"):
        UncertaintyFusionRetriever(retrievers=[bm25, bm25], weights=[-1.0, 1.0])


def test_each_retriever_runs_as_a_child_run_with_the_callers_config(lc_embeddings: Any) -> None:
    runs: list[tuple[str, list[str], dict[str, Any]]] = []

    class Handler(BaseCallbackHandler):
        def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
            runs.append((kwargs.get("name") or "", kwargs.get("tags") or [], kwargs.get("metadata") or {}))

    bm25 = BM25Retriever.from_documents(DOCS, k=2)
    dense = _chroma(lc_embeddings).as_retriever(search_kwargs={"k": 2})
    fused = UncertaintyFusionRetriever(retrievers=[bm25, dense])
    config: Any = {"callbacks": [Handler()], "tags": ["app"], "metadata": {"tenant": "acme"}}
    fused.invoke("River Tessel", config=config)
    assert len(runs) == 3  # the fusion and both retrievers, scored directly or not
    for _, tags, metadata in runs:
        assert "app" in tags
        assert metadata.get("tenant") == "acme"
    assert {tag for _, tags, _ in runs[1:] for tag in tags} >= {"retriever_1", "retriever_2"}
    runs.clear()
    asyncio.run(fused.ainvoke("River Tessel", config=config))
    assert len(runs) == 3


def test_configurable_fields_of_a_retriever_take_effect() -> None:
    bm25 = BM25Retriever.from_documents(DOCS, k=3).configurable_fields(
        k=ConfigurableField(id="bm25_k", name="BM25 k")
    )
    fused = UncertaintyFusionRetriever(retrievers=[bm25])
    assert [s.id for s in fused.config_specs] == ["bm25_k"]
    assert len(fused.invoke("River Tessel")) == 3
    assert len(fused.invoke("River Tessel", config={"configurable": {"bm25_k": 1}})) == 1


def test_run_id_and_the_retrievers_langsmith_parameters_reach_the_runs(lc_embeddings: Any) -> None:
    """``invoke(q, run_id=...)`` names the fusion's run, as ``BaseRetriever.invoke`` does; each child
    run scored directly carries its retriever's ``ls_*`` metadata, as its own ``invoke`` would."""
    runs: list[tuple[str, Any, dict[str, Any]]] = []

    class Handler(BaseCallbackHandler):
        def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
            runs.append((kwargs.get("name") or "", kwargs.get("run_id"), kwargs.get("metadata") or {}))

    bm25 = BM25Retriever.from_documents(DOCS, k=2)
    dense = InMemoryVectorStore.from_documents(DOCS, lc_embeddings).as_retriever(search_kwargs={"k": 2})
    fused = UncertaintyFusionRetriever(retrievers=[bm25, dense])
    run_id = uuid.uuid4()
    for call in (
        lambda: fused.invoke("River Tessel", config={"callbacks": [Handler()]}, run_id=run_id),
        lambda: asyncio.run(fused.ainvoke("River Tessel", config={"callbacks": [Handler()]}, run_id=run_id)),
    ):
        runs.clear()
        assert call()
        assert runs[0][1] == run_id
        by_name = {name: metadata for name, _, metadata in runs[1:]}
        assert by_name["BM25Retriever"]["ls_retriever_name"] == "bm25"
        assert by_name["VectorStoreRetriever"]["ls_vector_store_provider"] == "InMemoryVectorStore"


def test_bad_retrievers_say_what_to_pass(lc_embeddings: Any) -> None:
    from pydantic import ValidationError

    store = InMemoryVectorStore.from_documents(DOCS, lc_embeddings)
    with pytest.raises(ValidationError, match="needs at least one retriever"):
        UncertaintyFusionRetriever(retrievers=[])
    with pytest.raises(ValidationError, match="got a single one; wrap it in a list"):
        UncertaintyFusionRetriever(retrievers=store.as_retriever())  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"retrievers\[0\] \(InMemoryVectorStore\) is a vector store"):
        UncertaintyFusionRetriever(retrievers=[store])  # type: ignore[list-item]
