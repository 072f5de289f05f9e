"""`bridge-rag bench DATASET --suite bubble`: BubbleRAG beside dense and Bridge-RAG, in one run.

A configuration of the one runner (:mod:`core.evaluation.runner`): dense retrieval and
Bridge-RAG read the run's shared Chroma collection (``BridgeRAG.from_store``), BubbleRAG
builds its graph and its own collection from the same documents through the same embedding
cache (the same chunking, so its chunks are the shared ones). Printed beside the metrics:
recall@5 against dense and the p50 latency over dense's; the graph's size is read off the
built index. With ``grow_with`` (a folder with a ``corpus.jsonl``, e.g.
``../shared/data/2wiki``) a second BubbleRAG index over the corpus plus those passages checks
localisation: the same questions' median latency on the grown graph against the small one.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.evaluation.metrics import Dataset, latency_summary, load_passages, summarize_runs
from core.evaluation.suite import Suite, Variant, Versus

if TYPE_CHECKING:
    from core.evaluation.runner import Session

__all__ = ["BUBBLE_ROW", "bubble_suite", "graph_figures"]

#: BubbleRAG's row (no LLM: triples by spaCy, no query expansion).
BUBBLE_ROW = "bubble (no LLM)"


def graph_figures(rag: Any) -> dict[str, Any]:
    """The size of a BubbleRAG index's graph: chunks, nodes, live edges by kind, memory."""
    kg = rag.kg
    kinds = Counter(k for k, alive in zip(kg.edge_kind, kg.edge_alive, strict=True) if alive)
    return {
        "chunks": rag.num_chunks,
        "nodes": kg.num_nodes,
        "edges": kg.num_edges,
        "edges_by_kind": dict(kinds),
        "memory_mb": kg.memory_bytes() / 2**20,
    }


def _graph(rag: Any) -> dict[str, Any]:
    return {"graph": graph_figures(rag)}


def _localisation(grow_with: str) -> Callable[[Session], dict[str, Any]]:
    """The localisation check: BubbleRAG rebuilt over the corpus plus ``grow_with``'s passages.

    The folder's ``corpus.jsonl`` is read (and checked) now, before the run; the grown index is
    built in the same session (same Chroma, same embedding cache) after the suite's rows.
    """
    path = Path(grow_with) / "corpus.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; --grow needs a folder with a corpus.jsonl")
    passages = load_passages(path)

    def measure(session: Session) -> dict[str, Any]:
        docs = session.ctx.documents
        known = {d.id for d in docs}
        extra = Dataset(Path(grow_with).name, [p for p in passages if p["id"] not in known], []).documents(
            session.seed
        )
        grown_docs = docs + extra
        random.Random(session.seed).shuffle(grown_docs)
        grown_ctx = dataclasses.replace(session.ctx, documents=grown_docs)
        small = session.row(BUBBLE_ROW)
        (grown,) = session.measure(
            [Variant("bubble", "bubble (grown)")], grown_ctx, desc="queries (grown graph)"
        )
        row = summarize_runs(session.questions, [grown.run], ks=(5,))[0]
        small_p50 = latency_summary(small.run)["p50_ms"]
        small_nodes = int(small.build.inspected["graph"]["nodes"])
        graph = grown.build.inspected["graph"]
        return {
            "localisation": {
                "added_passages": len(extra),
                "small_nodes": small_nodes,
                "grown_nodes": graph["nodes"],
                "growth": graph["nodes"] / max(small_nodes, 1),
                "small_p50_ms": small_p50,
                "grown_p50_ms": row["p50_ms"],
                "p50_ratio": row["p50_ms"] / small_p50,
                "grown_recall@5": row["recall@5"],
                "grown_build_s": grown.alone_seconds,
                "graph": graph,
            }
        }

    return measure


#: BubbleRAG's chunks ranked by the evidence graphs alone: no dense pool, no entity-hop walk.
CEG_ONLY = {"dense_pool": 0, "link_hops": 0}


def bubble_suite(*, grow_with: str | None = None) -> Suite:
    """The suite: dense, Bridge-RAG and BubbleRAG, plus the localisation check with ``grow_with``.

    Raises:
        FileNotFoundError: ``grow_with`` has no ``corpus.jsonl``.
        ValueError: A malformed line in it.
    """
    return Suite(
        "bubble",
        (
            Variant("dense"),
            Variant("bridge"),
            Variant("bubble", "bubble: evidence graphs only (no walk, no dense pool)", config=CEG_ONLY),
            Variant(
                "bubble", "bubble: + dense pool of 20 (no walk)", config={"link_hops": 0, "dense_pool": 20}
            ),
            Variant("bubble", "bubble: + walk + dense pool of 20", config={"dense_pool": 20}),
            Variant("bubble", BUBBLE_ROW),
        ),
        versus=(
            Versus("recall@5 - dense", "recall@5", "dense"),
            Versus("words@5 / dense", "context_words@5", "dense", ratio=True),
            Versus("p50 / dense p50", "p50_ms", "dense", ratio=True),
        ),
        inspect={"bubble": _graph},
        extend=None if grow_with is None else _localisation(grow_with),
    )
