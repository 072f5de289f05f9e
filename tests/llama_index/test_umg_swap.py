"""The one-line swap to UMG / UMGP over a LlamaIndex app's ``ChromaVectorStore``, in a query engine.

LlamaIndex itself split the demo corpus into nodes (its default sentence splitter, which records
``start_char_idx`` in the node content but not as metadata) and stored them in Chroma with their
``ref_doc_id``; ``UMGRetriever.from_vector_store`` regroups the nodes by document, rebuilds each
document and builds its sentence windows beside the app's collection.
"""

from __future__ import annotations

import uuid
from typing import Any

import chromadb
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import Document
from llama_index.vector_stores.chroma import ChromaVectorStore

from llama_index_bridge import UMGRetriever


@pytest.fixture(scope="module")
def app_embed_model(make_embed_model: Any) -> Any:
    return make_embed_model()


@pytest.fixture(scope="module")
def app_collection() -> Any:
    return chromadb.EphemeralClient().get_or_create_collection(f"li-umg-{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="module")
def app_index(li_demo_docs: list[Document], app_collection: Any, app_embed_model: Any) -> VectorStoreIndex:
    return VectorStoreIndex.from_documents(
        li_demo_docs,
        storage_context=StorageContext.from_defaults(
            vector_store=ChromaVectorStore(chroma_collection=app_collection)
        ),
        embed_model=app_embed_model,
        transformations=[SentenceSplitter(chunk_size=96, chunk_overlap=0)],
    )


@pytest.fixture(scope="module")
def swapped(app_index: VectorStoreIndex, app_embed_model: Any) -> UMGRetriever:
    return UMGRetriever.from_vector_store(
        app_index.vector_store, embed_model=app_embed_model, parent_promotion=True, show_progress=False
    )


def test_swap_groups_nodes_by_document(
    swapped: UMGRetriever, app_collection: Any, li_demo_docs: list[Document]
) -> None:
    assert app_collection.count() > len(li_demo_docs)  # several nodes per long document
    assert swapped.strategy.report.counts["documents"] == len(li_demo_docs)
    assert swapped.parent_promotion is True
    assert swapped.strategy.store.name == f"{app_collection.name}_umg"
    doc_ids = {m["doc_id"] for m in swapped.strategy.store.get(include_embeddings=False).metadatas}
    assert doc_ids == {d.id_ for d in li_demo_docs}


def test_query_engine_over_the_swapped_store(
    swapped: UMGRetriever, demo_questions: list[dict[str, Any]]
) -> None:
    question = demo_questions[3]["question"]
    response = RetrieverQueryEngine.from_args(swapped, llm=MockLLM()).query(question)
    assert len(response.source_nodes) == 4
    assert question in str(response)
    for n in response.source_nodes:
        assert n.node.metadata["strategy"] == "umgp"
        # Provenance stays in the metadata but out of the prompt.
        assert "confidences" in n.node.excluded_llm_metadata_keys
        assert "granularity" in n.node.excluded_llm_metadata_keys


def test_swap_errors(app_index: VectorStoreIndex) -> None:
    with pytest.raises(TypeError, match="ChromaVectorStore"):
        UMGRetriever.from_vector_store(app_index)
