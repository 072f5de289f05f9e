"""The lifecycle contract, checked the same way for every strategy and both frameworks.

``delete_documents("doc-12")`` once removed the documents "d" and "o" of a UMG index and kept
"doc-12" (a string is a sequence of its characters). Every entry point now refuses a single
string, and nothing is removed.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from core import UMGRAG, BridgeRAG, BubbleRAG, Document, Strategy
from core.store import ChunkStore

STRATEGIES = [BridgeRAG, UMGRAG, BubbleRAG]
DOCS = [
    Document("Doc twelve is about the Marrowick observatory and its telescope.", id="doc-12"),
    Document("The document d describes the River Tessel near Corvane.", id="d"),
    Document("The document o describes the Halden Institute in Corvane.", id="o"),
    Document("The document x describes Ilse Varga, an astronomer.", id="x"),
]


def _build(cls: type[Any], embedder: Any) -> Any:
    store = ChunkStore.ephemeral(f"c-{uuid.uuid4().hex[:10]}")
    return cls.from_documents(DOCS, embedder=embedder, store=store, show_progress=False)


def _doc_ids(strategy: Any) -> set[str]:
    return {r.metadata["doc_id"] for r in strategy.retrieve("a document", k=50)}


@pytest.mark.parametrize("cls", STRATEGIES, ids=lambda c: c.name)
def test_every_strategy_meets_the_whole_contract(cls: type[Any], st_embedder: Any) -> None:
    strategy = _build(cls, st_embedder)
    assert isinstance(strategy, Strategy)
    for member in ("from_documents", "from_store", "load", "save", "add_documents", "delete_documents"):
        assert callable(getattr(cls, member)), member
    assert {"strategy", "score", "found_by"} <= cls.provenance_keys
    results = strategy.retrieve("Who works at the Marrowick observatory?", k=2)
    assert set(results[0].metadata) & cls.provenance_keys
    vector = st_embedder.embed_query("Who works at the Marrowick observatory?")
    by_vector = strategy.retrieve_by_vector("Who works at the Marrowick observatory?", vector, k=2)
    assert [r.id for r in by_vector] == [r.id for r in results]
    with pytest.raises(TypeError, match="unknown retrieve option"):
        strategy.retrieve_by_vector("Who?", vector, k=2, no_such_option=1)


@pytest.mark.parametrize("cls", STRATEGIES, ids=lambda c: c.name)
def test_core_delete_refuses_a_single_string(cls: type[Any], st_embedder: Any) -> None:
    strategy = _build(cls, st_embedder)
    before = _doc_ids(strategy)
    assert before == {"doc-12", "d", "o", "x"}
    with pytest.raises(TypeError, match="single string"):
        strategy.delete_documents("doc-12")
    assert _doc_ids(strategy) == before  # nothing removed
    assert strategy.delete_documents(["doc-12"]) >= 1
    assert _doc_ids(strategy) == {"d", "o", "x"}


@pytest.mark.parametrize("name", ["BridgeRetriever", "UMGRetriever", "BubbleRetriever"])
def test_langchain_delete_refuses_a_single_string(name: str, st_embedder: Any) -> None:
    import langchain_bridge

    cls = getattr(langchain_bridge, name)
    retriever = cls(strategy=_build(cls.strategy_cls, st_embedder), k=50)
    before = {d.metadata["doc_id"] for d in retriever.invoke("a document")}
    with pytest.raises(TypeError, match="single string"):
        retriever.delete_documents("doc-12")
    assert {d.metadata["doc_id"] for d in retriever.invoke("a document")} == before
    retriever.delete_documents(["doc-12"])
    assert "doc-12" not in {d.metadata["doc_id"] for d in retriever.invoke("a document")}


@pytest.mark.parametrize("name", ["BridgeRetriever", "UMGRetriever", "BubbleRetriever"])
def test_llama_index_delete_and_insert_take_one_document(name: str, st_embedder: Any) -> None:
    from llama_index.core.schema import Document as LlamaDocument

    import llama_index_bridge

    cls = getattr(llama_index_bridge, name)
    retriever = cls(_build(cls.strategy_cls, st_embedder), k=50)
    with pytest.raises(TypeError, match="ref_doc_id must be"):
        retriever.delete_ref_doc(["doc-12"])  # type: ignore[arg-type]
    assert retriever.delete_ref_doc("doc-12") >= 1
    assert retriever.delete_ref_doc("doc-12") == 0
    assert retriever.insert(LlamaDocument(text="A new note on the Tessel ferry.", id_="new")) == ["new"]
    assert "new" in {n.node.metadata["doc_id"] for n in retriever.retrieve("Tessel ferry")}


def test_registry_names_every_strategy() -> None:
    from core.strategies.registry import available_strategies, get_strategy, register_strategy

    assert available_strategies() == ["bridge", "bubble", "umg"]
    assert get_strategy("bridge") is BridgeRAG
    assert get_strategy("umg") is UMGRAG
    assert get_strategy("bubble") is BubbleRAG
    with pytest.raises(ValueError, match="no strategy named 'nope'; choose one of: bridge, bubble, umg"):
        get_strategy("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_strategy(BridgeRAG)
    with pytest.raises(TypeError, match="does not meet the Strategy contract"):
        register_strategy(object)  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", STRATEGIES, ids=lambda c: c.name)
def test_builds_and_loads_sort_models_from_settings(cls: type[Any], st_embedder: Any, tmp_path: Any) -> None:
    """One base builds and loads every strategy: its models pass on, other keywords are settings."""
    with pytest.raises(TypeError, match=f"unknown {cls.label} setting"):
        cls.from_documents(DOCS, embedder=st_embedder, store=ChunkStore.ephemeral("lc-x"), no_such_setting=1)
    strategy = cls.from_documents(
        DOCS, embedder=st_embedder, persist_directory=tmp_path, show_progress=False, k=3
    )
    assert strategy.config.k == 3
    assert strategy.default_k == 3
    with pytest.raises(TypeError, match="takes no model k"):
        cls.load(tmp_path, embedder=st_embedder, k=5)
    loaded = cls.load(tmp_path, embedder=st_embedder, refresh_interval=None)
    assert loaded.default_k == 3
    assert [r.id for r in loaded.retrieve("Marrowick observatory")] == [
        r.id for r in strategy.retrieve("Marrowick observatory")
    ]


def test_umg_refuses_an_llm_on_every_entry_point(st_embedder: Any, tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="UMG-RAG uses no LLM"):
        UMGRAG.from_documents(DOCS, embedder=st_embedder, store=ChunkStore.ephemeral("lc-u"), llm=object())
    UMGRAG.from_documents(DOCS, embedder=st_embedder, persist_directory=tmp_path, show_progress=False)
    with pytest.raises(ValueError, match="UMG-RAG uses no LLM"):
        UMGRAG.load(tmp_path, embedder=st_embedder, llm=object())
