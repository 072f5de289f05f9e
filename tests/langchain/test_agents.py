"""Every retriever as an agent's tool: create_retriever_tool inside a LangChain agent (LangGraph).

The chat model is scripted (a fake that asks for the tool, then answers), including a
malformed tool call; the retrievers, the index and the embedder are real.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_community.retrievers import BM25Retriever
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import create_retriever_tool
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_bridge import (
    BridgeRetriever,
    BubbleRetriever,
    EntityHopCompressor,
    UMGRetriever,
    UncertaintyFusionRetriever,
)

CORPUS = [
    Document("The Marrowick observatory was founded by Ilse Varga in 1901.", id="obs"),
    Document("Ilse Varga was an astronomer born in Corvane.", id="varga"),
    Document("The River Tessel flows through Corvane to the sea.", id="tessel"),
    Document("A bakery in Marrowick sells rye bread every morning.", id="bakery"),
]
QUESTION = "Who founded the Marrowick observatory?"


class ScriptedChat(GenericFakeChatModel):
    """Answers from a script; tools are accepted and ignored (the script names them)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:
        return self


def _script(*tool_args: dict[str, Any]) -> ScriptedChat:
    calls = [
        AIMessage("", tool_calls=[{"name": "search_corpus", "args": a, "id": f"call-{i}"}])
        for i, a in enumerate(tool_args)
    ]
    return ScriptedChat(messages=iter([*calls, AIMessage("Ilse Varga founded it.")]))


def _name() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


def _retrievers(embeddings: Any) -> dict[str, Callable[[], BaseRetriever]]:
    memory = InMemoryVectorStore.from_documents(CORPUS, embeddings)
    return {
        "bridge": lambda: BridgeRetriever.from_documents(
            CORPUS, embedding=embeddings, collection_name=_name(), k=2, show_progress=False
        ),
        "umg": lambda: UMGRetriever.from_documents(
            CORPUS, embedding=embeddings, collection_name=_name(), k=2, show_progress=False
        ),
        "bubble": lambda: BubbleRetriever.from_documents(
            CORPUS, embedding=embeddings, collection_name=_name(), k=2, show_progress=False
        ),
        "uncertainty-fusion": lambda: UncertaintyFusionRetriever(
            retrievers=[
                BM25Retriever.from_documents(CORPUS, k=2),
                memory.as_retriever(search_kwargs={"k": 2}),
            ]
        ),
        "entity-hop": lambda: ContextualCompressionRetriever(
            base_compressor=EntityHopCompressor.from_documents(CORPUS, embedding=embeddings, k=2),
            base_retriever=memory.as_retriever(search_kwargs={"k": 1}),
        ),
    }


class Recorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[list[Document]] = []

    def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
        self.started.append(query)

    def on_retriever_end(self, documents: Sequence[Document], **kwargs: Any) -> None:
        self.ended.append(list(documents))


@pytest.mark.parametrize("name", ["bridge", "umg", "bubble", "uncertainty-fusion", "entity-hop"])
def test_a_prebuilt_agent_calls_the_retriever_tool(name: str, lc_embeddings: Any) -> None:
    retriever = _retrievers(lc_embeddings)[name]()
    tool = create_retriever_tool(retriever, "search_corpus", "Search the corpus for facts.")
    agent = create_agent(_script({"query": QUESTION}), [tool])
    recorder = Recorder()
    state = agent.invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [recorder]})
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1
    assert "Marrowick observatory was founded by Ilse Varga" in str(tool_messages[0].content)
    assert state["messages"][-1].content == "Ilse Varga founded it."
    # The tracing callbacks carry the retriever run and our documents.
    assert QUESTION in recorder.started
    assert any("Ilse Varga" in d.page_content for docs in recorder.ended for d in docs)


def test_a_malformed_tool_call_is_reported_to_the_model_not_raised(lc_embeddings: Any) -> None:
    retriever = _retrievers(lc_embeddings)["bridge"]()
    tool = create_retriever_tool(retriever, "search_corpus", "Search the corpus for facts.")
    agent = create_agent(_script({"wrong_argument": 3}, {"query": QUESTION}), [tool])
    state = agent.invoke({"messages": [("user", QUESTION)]})
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert tool_messages[0].status == "error"
    assert "query" in str(tool_messages[0].content)
    assert "Ilse Varga" in str(tool_messages[1].content)
    assert state["messages"][-1].content == "Ilse Varga founded it."
