"""A LlamaIndex query engine with Bridge-RAG as its retriever, over the bundled demo corpus.

    python examples/llama_index_query_engine.py
    python examples/llama_index_query_engine.py --question "Who designed the Greywater Bridge?" --top-k 3
    python examples/llama_index_query_engine.py --persist-dir ./bridge_index  # keep it, reopen it next run

The index lives in an embedded Chroma (in memory, or under ``--persist-dir``) with the default
embedder (all-MiniLM-L6-v2, offline). The LLM is LlamaIndex's ``MockLLM``, which needs no key and
answers with the prompt it was given, so you can see exactly what a real LLM would read; pass any
LlamaIndex LLM as ``llm=`` to ``RetrieverQueryEngine.from_args`` instead.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from pathlib import Path

from llama_index.core import Document
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore

from core.data import load_demo_corpus, load_demo_questions
from llama_index_bridge import BridgeRetriever


def build_or_load(persist_dir: Path | None, top_k: int) -> BridgeRetriever:
    """Reopens the index saved under ``persist_dir``, or indexes the demo corpus."""
    if persist_dir is not None and (persist_dir / "bridge").is_dir():
        print(f"Loading the Bridge-RAG index saved in {persist_dir} ...")
        return BridgeRetriever.from_defaults(persist_dir=persist_dir, similarity_top_k=top_k)
    documents = [Document(text=d.text, id_=d.id, metadata=dict(d.metadata)) for d in load_demo_corpus()]
    print(f"Indexing {len(documents)} demo documents with Bridge-RAG ...")
    return BridgeRetriever.from_defaults(documents=documents, persist_dir=persist_dir, similarity_top_k=top_k)


def print_sources(nodes: Sequence[NodeWithScore]) -> None:
    """The source nodes with their provenance: how Bridge-RAG found each one."""
    print("Source nodes (with provenance):")
    for rank, n in enumerate(nodes, start=1):
        meta = n.node.metadata
        entities = ", ".join(meta.get("matched_entities") or []) or "-"
        print(f"  {rank}. {n.node.ref_doc_id}  (node {n.node.node_id}, score {n.score or 0.0:.3f})")
        print(
            f"     matched entities: {entities}; abstract {meta.get('abstract_id')} "
            f"at level {meta.get('abstract_level')}, depth {meta.get('depth')}"
        )
        text = " ".join(n.node.get_content().split())
        print(f"     {textwrap.shorten(text, width=120, placeholder=' ...')}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--question", default=load_demo_questions()[4]["question"], help="the question")
    parser.add_argument("--top-k", type=int, default=4, help="nodes to retrieve")
    parser.add_argument("--persist-dir", type=Path, default=None, help="keep (or reopen) the index here")
    args = parser.parse_args(argv)

    retriever = build_or_load(args.persist_dir, args.top_k)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())

    print(f"Question: {args.question}")
    response = engine.query(args.question)
    print_sources(response.source_nodes)
    print("Response (MockLLM repeats the prompt it was given):")
    print(textwrap.indent(textwrap.shorten(str(response), width=600, placeholder=" ..."), "  "))


if __name__ == "__main__":
    main()
