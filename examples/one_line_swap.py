"""The one-line swap: an existing langchain-chroma app moves to Bridge-RAG.

    python examples/one_line_swap.py
    python examples/one_line_swap.py --question "Who was mayor of Marrowick during the 1911 flood?"

The "existing app" indexes the bundled demo corpus in a ``langchain_chroma.Chroma`` store and
retrieves with ``vectorstore.as_retriever()``. Switching to Bridge-RAG changes one line::

    retriever = vectorstore.as_retriever(search_kwargs={"k": 4})        # before
    retriever = BridgeRetriever.from_vectorstore(vectorstore, k=4)      # after

Bridge-RAG reads the chunks and vectors already in the store (nothing is re-embedded), builds its
entity filter and abstract forest over them, and embeds queries with the store's own embedding
function. Both retrievers' results are printed for a multi-hop demo question, with the documents
the question needs marked.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from typing import Any

import chromadb
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever

from core.data import load_demo_corpus, load_demo_questions
from core.embed import SentenceTransformerEmbedder
from langchain_bridge import BridgeRetriever


class MiniLMEmbeddings(Embeddings):
    """LangChain embeddings over all-MiniLM-L6-v2, offline (a stand-in for HuggingFaceEmbeddings)."""

    def __init__(self) -> None:
        self.model = SentenceTransformerEmbedder()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embeds texts for the store."""
        return [[float(x) for x in row] for row in self.model.embed_documents(texts)]

    def embed_query(self, text: str) -> list[float]:
        """Embeds a query."""
        return [float(x) for x in self.model.embed_query(text)]


def existing_app() -> Chroma:
    """What the app already had: the corpus in a langchain-chroma store."""
    vectorstore = Chroma(
        collection_name="existing_app",
        embedding_function=MiniLMEmbeddings(),
        client=chromadb.EphemeralClient(),
    )
    corpus = load_demo_corpus()
    vectorstore.add_documents(
        [Document(page_content=d.text, metadata={"source": d.id}) for d in corpus],
        ids=[str(d.id) for d in corpus],
    )
    return vectorstore


def show(title: str, docs: Sequence[Document], needed: set[str]) -> None:
    found = {d.id for d in docs} & needed
    print(f"{title}: {len(found)} of the {len(needed)} documents the question needs")
    for rank, d in enumerate(docs, start=1):
        mark = "*" if d.id in needed else " "
        how = ""
        if "matched_entities" in d.metadata:
            entities = ", ".join(d.metadata["matched_entities"]) or "-"
            how = f"  [entities: {entities}; depth {d.metadata['depth']}]"
        print(f"  {mark} {rank}. {d.id}{how}")
        print(f"       {textwrap.shorten(' '.join(d.page_content.split()), width=110, placeholder=' ...')}")


def main(argv: Sequence[str] | None = None) -> None:
    questions: list[dict[str, Any]] = load_demo_questions()
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--question", default=questions[0]["question"], help="the question")
    parser.add_argument("--k", type=int, default=4, help="documents to retrieve")
    args = parser.parse_args(argv)
    needed = next((set(q["supporting_ids"]) for q in questions if q["question"] == args.question), set())

    vectorstore = existing_app()
    print(f"Question: {args.question}")
    if needed:
        print(f"Documents it needs (marked *): {', '.join(sorted(needed))}")
    print()

    # Before: the app's dense retriever.
    retriever: BaseRetriever = vectorstore.as_retriever(search_kwargs={"k": args.k})
    show("vectorstore.as_retriever()", retriever.invoke(args.question), needed)
    print()

    # After: the one-line swap.
    retriever = BridgeRetriever.from_vectorstore(vectorstore, k=args.k)
    show("BridgeRetriever.from_vectorstore(vectorstore)", retriever.invoke(args.question), needed)


if __name__ == "__main__":
    main()
