"""``llama_index_bridge.BubbleRetriever``: retrieval, query engines, persistence and the vector-store swap."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import chromadb
import networkx as nx
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode
from llama_index.vector_stores.chroma import ChromaVectorStore

from llama_index_bridge import BubbleRetriever
from tests.fake_strategy import FakeStrategy

SMALL_IDS = ("marrowick-observatory", "ilse-varga", "tomas-brel", "anton-falk", "comet-varga")
QUERY = "Who built the telescope at Ilse Varga's observatory in Marrowick?"


@pytest.fixture(scope="module")
def small_docs(li_demo_docs: list[Document]) -> list[Document]:
    return [d for d in li_demo_docs if d.doc_id in SMALL_IDS]


@pytest.fixture(scope="module")
def retriever(
    small_docs: list[Document], li_embed_model: Any, tmp_path_factory: pytest.TempPathFactory
) -> BubbleRetriever:
    return BubbleRetriever.from_defaults(
        documents=small_docs,
        embed_model=li_embed_model,
        persist_dir=tmp_path_factory.mktemp("bubble"),
        similarity_top_k=3,
        show_progress=False,
    )


def test_is_a_llama_index_retriever_with_provenance(retriever: BubbleRetriever) -> None:
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve(QUERY)
    assert len(nodes) == 3
    assert nodes[0].node.metadata["strategy"] == "bubble"
    assert nodes[0].node.metadata["found_by"] == "evidence"
    # structured provenance stays out of the prompt
    assert "evidence_triples" not in nodes[0].node.get_content(metadata_mode=MetadataMode.LLM)


async def test_concurrent_aretrieve_matches_serial(retriever: BubbleRetriever) -> None:
    serial = [n.node.node_id for n in retriever.retrieve(QUERY)]
    results = await asyncio.gather(*(retriever.aretrieve(QUERY) for _ in range(10)))
    assert all([n.node.node_id for n in r] == serial for r in results)


def test_query_engine_with_mock_llm(retriever: BubbleRetriever) -> None:
    response = RetrieverQueryEngine.from_args(retriever, llm=MockLLM()).query(QUERY)
    assert len(response.source_nodes) == 3


def test_persist_and_reload(retriever: BubbleRetriever, li_embed_model: Any, tmp_path: Path) -> None:
    retriever.persist(tmp_path / "copy")
    loaded = BubbleRetriever.from_persist_dir(
        tmp_path / "copy", embed_model=li_embed_model, similarity_top_k=3, store=retriever.strategy.store
    )
    assert [n.node.node_id for n in loaded.retrieve(QUERY)] == [
        n.node.node_id for n in retriever.retrieve(QUERY)
    ]
    with pytest.raises(ValueError, match="persist_dir"):
        BubbleRetriever.from_defaults()


def test_insert_and_delete_ref_doc(small_docs: list[Document], li_embed_model: Any) -> None:
    r = BubbleRetriever.from_defaults(
        documents=small_docs[:2], embed_model=li_embed_model, show_progress=False
    )
    r.insert(Document(text="Zephyrine Quill opened the Quillworks studio in Pellmire.", doc_id="zq"))
    assert r.retrieve("Who opened the Quillworks studio?")[0].node.metadata["doc_id"] == "zq"
    assert r.delete_ref_doc("zq") == 1
    assert all(n.node.metadata["doc_id"] != "zq" for n in r.retrieve("Quillworks studio"))


def test_from_vector_store_and_networkx(small_docs: list[Document], li_embed_model: Any) -> None:
    collection = chromadb.EphemeralClient().get_or_create_collection(f"li-app-{uuid.uuid4().hex[:12]}")
    index = VectorStoreIndex.from_documents(
        small_docs,
        storage_context=StorageContext.from_defaults(
            vector_store=ChromaVectorStore(chroma_collection=collection)
        ),
        embed_model=li_embed_model,
    )
    swapped = BubbleRetriever.from_vector_store(
        index.vector_store, embed_model=li_embed_model, show_progress=False
    )
    nodes = swapped.retrieve(QUERY)
    assert nodes[0].node.metadata["doc_id"] in SMALL_IDS
    assert "_node_content" not in nodes[0].node.metadata
    with pytest.raises(TypeError, match="ChromaVectorStore"):
        BubbleRetriever.from_vector_store(collection)
    g = nx.Graph()
    g.add_edge("Ilse Varga", "Marrowick Observatory", relation="founded")
    g.add_edge("Tomas Brel", "Ilse Varga", relation="student of")
    r = BubbleRetriever.from_networkx(g, embed_model=li_embed_model, show_progress=False)
    assert r.retrieve("Who founded the Marrowick Observatory?")[0].node.metadata["type"] == "evidence_graph"
    assert len(r.to_networkx().edges) == 2
    with pytest.raises(TypeError, match="BubbleRAG"):
        BubbleRetriever(FakeStrategy())
