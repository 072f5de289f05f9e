"""Every retriever as a LlamaIndex RetrieverTool, called the way an agent calls it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.tools import RetrieverTool, ToolMetadata
from llama_index.retrievers.bm25 import BM25Retriever

from llama_index_bridge import BridgeRetriever, BubbleRetriever, UMGRetriever, UncertaintyFusionRetriever

CORPUS = [
    Document(text="The Marrowick observatory was founded by Ilse Varga in 1901.", id_="obs"),
    Document(text="Ilse Varga was an astronomer born in Corvane.", id_="varga"),
    Document(text="The River Tessel flows through Corvane to the sea.", id_="tessel"),
    Document(text="A bakery in Marrowick sells rye bread every morning.", id_="bakery"),
]
QUESTION = "Who founded the Marrowick observatory?"


def _retriever(name: str, embed_model: Any) -> BaseRetriever:
    common = {"embed_model": embed_model, "similarity_top_k": 2, "show_progress": False}
    collection = f"agent-{uuid.uuid4().hex[:8]}"
    if name == "bridge":
        return BridgeRetriever.from_defaults(documents=CORPUS, collection_name=collection, **common)
    if name == "umg":
        return UMGRetriever.from_defaults(documents=CORPUS, collection_name=collection, **common)
    if name == "bubble":
        return BubbleRetriever.from_defaults(documents=CORPUS, collection_name=collection, **common)
    index = VectorStoreIndex.from_documents(CORPUS, embed_model=embed_model)
    bm25 = BM25Retriever.from_defaults(nodes=list(index.docstore.docs.values()), similarity_top_k=2)
    return UncertaintyFusionRetriever([bm25, index.as_retriever(similarity_top_k=2)])


@pytest.mark.parametrize("name", ["bridge", "umg", "bubble", "uncertainty-fusion"])
def test_retriever_tool_answers_sync_and_async(name: str, li_embed_model: Any) -> None:
    tool = RetrieverTool(
        retriever=_retriever(name, li_embed_model),
        metadata=ToolMetadata(name="search_corpus", description="Search the corpus for facts."),
    )
    output = tool.call(QUESTION)
    assert "founded by Ilse Varga" in str(output.content)
    assert output.raw_output
    async_output = asyncio.run(tool.acall(QUESTION))
    assert "founded by Ilse Varga" in str(async_output.content)
