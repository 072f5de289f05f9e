"""Keep your retriever, add the method: the composable pieces over an existing langchain-chroma app.

    python examples/composable_pieces.py

The "existing app" (as in ``one_line_swap.py``) has the bundled demo corpus in a
``langchain_chroma.Chroma`` store and a ``BM25Retriever``. Without replacing either:

* ``UncertaintyFusionRetriever`` fuses them where ``EnsembleRetriever`` would, each list
  weighted per query by the entropy of its scores;
* ``EntityHopCompressor`` in a ``ContextualCompressionRetriever`` adds Bridge-RAG's entity-hop
  walk after the vector store's retriever, over an index built from the same documents.

Each retriever's results are printed for a multi-hop demo question, the documents the question
needs marked.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_classic.retrievers import ContextualCompressionRetriever, EnsembleRetriever
from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

sys.path.insert(0, str(Path(__file__).resolve().parent))
from one_line_swap import existing_app, show  # the same existing app

from core.data import load_demo_questions
from langchain_bridge import EntityHopCompressor, UncertaintyFusionRetriever


def main(argv: Sequence[str] | None = None) -> None:
    questions: list[dict[str, Any]] = load_demo_questions()
    question = questions[0]["question"]
    needed = set(questions[0]["supporting_ids"])
    vectorstore = existing_app()
    stored = vectorstore.get()
    docs = [
        Document(page_content=text, metadata=meta, id=doc_id)
        for doc_id, text, meta in zip(stored["ids"], stored["documents"], stored["metadatas"], strict=True)
    ]
    bm25 = BM25Retriever.from_documents(docs, k=4)
    dense = vectorstore.as_retriever(search_kwargs={"k": 4})
    print(f"Question: {question}")
    print(f"Documents it needs (marked *): {', '.join(sorted(needed))}")
    print()
    retrievers: list[tuple[str, BaseRetriever]] = [
        ("EnsembleRetriever([bm25, dense])", EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5])),
        (
            "UncertaintyFusionRetriever([bm25, dense])",
            UncertaintyFusionRetriever(retrievers=[bm25, dense], k=4),
        ),
        (
            "ContextualCompressionRetriever(dense, EntityHopCompressor)",
            ContextualCompressionRetriever(
                base_compressor=EntityHopCompressor.from_documents(
                    docs, embedding=vectorstore.embeddings, k=4
                ),
                base_retriever=vectorstore.as_retriever(search_kwargs={"k": 8}),
            ),
        ),
    ]
    for title, retriever in retrievers:
        found = retriever.invoke(question)[:4]
        # Reached chunks carry the index's chunk id ("doc::0"); name them by their document.
        show(title, [Document(d.page_content, metadata=d.metadata, id=_doc_id(d)) for d in found], needed)
        print()


def _doc_id(doc: Document) -> str:
    return str(doc.metadata.get("doc_id") or doc.metadata.get("source") or doc.id)


if __name__ == "__main__":
    main()
