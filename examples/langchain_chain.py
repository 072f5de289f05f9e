"""A LangChain RAG chain with Bridge-RAG as its retriever, over the bundled demo corpus.

    python examples/langchain_chain.py
    python examples/langchain_chain.py --question "Who designed the Greywater Bridge?" --k 3
    python examples/langchain_chain.py --model openai:gpt-4o-mini      # or BRIDGE_RAG_CHAT_MODEL=...

The index is built in memory with the default embedder (all-MiniLM-L6-v2, offline). With no
``--model`` (and no ``BRIDGE_RAG_CHAT_MODEL``) the chat model is LangChain's
``FakeListChatModel``, so the script runs offline and the "answer" is a placeholder; with one,
``langchain.chat_models.init_chat_model`` builds the real model (its provider package and API key
must be installed and set).
"""

from __future__ import annotations

import argparse
import os
import textwrap
from collections.abc import Sequence

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from core.data import load_demo_corpus, load_demo_questions
from langchain_bridge import BridgeRetriever

MODEL_ENV = "BRIDGE_RAG_CHAT_MODEL"
OFFLINE_ANSWER = (
    "[offline placeholder from FakeListChatModel] Pass --model provider:model "
    f"(or set {MODEL_ENV}) to have a real chat model answer from the context above."
)

PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "Answer the question from the context only. The context comes from several documents; "
            "combine them when the question needs more than one. If the answer is not in the "
            "context, say so.\n\nContext:\n{context}",
        ),
        ("human", "{question}"),
    ]
)


def format_docs(docs: Sequence[Document]) -> str:
    """Each chunk with the document it came from, for the prompt."""
    return "\n\n".join(
        f"[{d.metadata.get('title', d.metadata.get('doc_id'))}]\n{d.page_content}" for d in docs
    )


def chat_model(spec: str | None) -> BaseChatModel:
    """The real chat model named by ``spec`` (``provider:model``), or an offline stand-in."""
    if not spec:
        return FakeListChatModel(responses=[OFFLINE_ANSWER])
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise SystemExit(f"--model needs the langchain package and the provider's package ({exc})") from exc
    return init_chat_model(spec)


def print_context(docs: Sequence[Document]) -> None:
    """The retrieved chunks with their provenance: how Bridge-RAG found each one."""
    print("Retrieved context (with provenance):")
    for rank, d in enumerate(docs, start=1):
        meta = d.metadata
        entities = ", ".join(meta["matched_entities"]) or "-"
        how = (
            f"dense fallback ({meta['fallback']})"
            if meta.get("fallback")
            else f"matched entities: {entities}"
        )
        path = f"abstract {meta['abstract_id']} at level {meta['abstract_level']}, depth {meta['depth']}"
        print(f"  {rank}. {meta['doc_id']}  (chunk {d.id}, score {meta['score']:.3f})")
        print(f"     {how}; {path}")
        print(f"     {textwrap.shorten(' '.join(d.page_content.split()), width=120, placeholder=' ...')}")


def main(argv: Sequence[str] | None = None) -> None:
    default_question = load_demo_questions()[0]["question"]
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--question", default=default_question, help="the question to answer")
    parser.add_argument("--k", type=int, default=4, help="chunks to retrieve")
    parser.add_argument(
        "--model",
        default=os.environ.get(MODEL_ENV),
        help=f"chat model as provider:model for init_chat_model (default: ${MODEL_ENV}, else offline)",
    )
    args = parser.parse_args(argv)

    documents = [
        Document(page_content=d.text, id=d.id, metadata=dict(d.metadata)) for d in load_demo_corpus()
    ]
    print(f"Indexing {len(documents)} demo documents with Bridge-RAG ...")
    retriever = BridgeRetriever.from_documents(documents, k=args.k)

    llm = chat_model(args.model)
    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | PROMPT
        | llm
        | StrOutputParser()
    )

    print(f"Chat model: {type(llm).__name__}")
    print(f"Question: {args.question}")
    print_context(retriever.invoke(args.question))
    print(f"Answer: {chain.invoke(args.question)}")


if __name__ == "__main__":
    main()
