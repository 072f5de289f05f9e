"""`bridge-rag demo`: Bridge-RAG over the bundled demo corpus, end to end, offline."""

from __future__ import annotations

import os
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from core.data import load_demo_corpus, load_demo_questions
from core.embed import SentenceTransformerEmbedder
from core.strategies.bridge import BridgeRAG

__all__ = ["run_demo"]


def _show_result(rank: int, r_text: str, meta: dict[str, Any]) -> None:
    entities = ", ".join(str(e) for e in meta.get("matched_entities") or []) or "-"
    path = (
        f"entities [{entities}] -> abstract {meta.get('abstract_id')} (level {meta.get('abstract_level')}, "
        f"depth {meta.get('depth')}, via {meta.get('found_by')})"
    )
    if meta.get("fallback"):
        path += f" [fallback: {meta.get('fallback')}]"
    snippet = textwrap.shorten(" ".join(r_text.split()), width=150, placeholder=" ...")
    print(f"  {rank}. score {float(meta.get('score', 0.0)):.3f}  {_label(meta)}")
    print(f"     {path}")
    print(f"     {snippet}")


def _label(meta: dict[str, Any]) -> str:
    return str(meta.get("title") or meta.get("doc_id") or "?")


def run_demo(persist_directory: str | os.PathLike[str] | None = None, *, k: int = 3, depth: int = 2) -> None:
    """Builds the demo index and prints retrieval paths and timings for the demo questions.

    Args:
        persist_directory: Keep the index here; default a temporary directory.
        k: Chunks per question.
        depth: Expansion depth.
    """
    docs = load_demo_corpus()
    questions = load_demo_questions()
    with tempfile.TemporaryDirectory(prefix="bridge-demo-") as tmp:
        root = Path(persist_directory) if persist_directory is not None else Path(tmp)
        print(
            f"Building a Bridge-RAG index over {len(docs)} demo documents in an embedded Chroma at {root} ..."
        )
        t0 = time.perf_counter()
        embedder = SentenceTransformerEmbedder()
        loading = time.perf_counter() - t0
        rag = BridgeRAG.from_documents(docs, embedder=embedder, persist_directory=root, show_progress=True)
        total = time.perf_counter() - t0
        steps = rag.report.total_seconds
        print(
            f"built in {total:.1f} s: {loading:.1f} s loading the embedding model, {steps:.1f} s in the "
            f"build steps below, {max(total - loading - steps, 0.0):.1f} s loading spaCy and opening Chroma"
        )
        print(rag.report)
        rag.retrieve("warm-up query about Marrowick", k=1)  # first-call model initialisation
        missed: list[tuple[str, str, list[str]]] = []
        times = []
        for q in questions:
            t0 = time.perf_counter()
            results = rag.retrieve(q["question"], k=k, depth=depth)
            ms = (time.perf_counter() - t0) * 1000
            times.append(ms)
            gold = set(q.get("supporting_ids", []))
            hit = sorted(gold & {str(r.metadata.get("doc_id")) for r in results})
            if not any(q["answer"].lower() in r.text.lower() for r in results):
                missed.append((q["question"], q["answer"], [_label(r.metadata) for r in results]))
            print(f"\nQ: {q['question']}  ({ms:.1f} ms)")
            print(
                f"   expected answer: {q['answer']}; supporting documents retrieved: {len(hit)}/{len(gold)}"
            )
            for i, r in enumerate(results, start=1):
                _show_result(i, r.text, r.metadata)
        times.sort()
        print(
            f"\n{len(questions)} questions: answer in the top {k} for {len(questions) - len(missed)}; "
            f"median query time {times[len(times) // 2]:.1f} ms (query embedding included)"
        )
        for question, answer, returned in missed:
            instead = "; ".join(returned) or "nothing"
            print(f"missed: {question!r} (answer {answer!r}); returned instead: {instead}")
        if persist_directory is not None:
            print(f"index saved in {root}; reopen it with BridgeRAG.load({str(root)!r})")
