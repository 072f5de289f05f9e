"""`bridge-rag bench DATASET --suite bubble`: BubbleRAG beside dense and Bridge-RAG, in one run.

All three read the same Chroma collection: BubbleRAG chunks and embeds the corpus into it,
Bridge-RAG is built over the stored chunks and vectors (``BridgeRAG.from_store``), and dense
retrieval queries it directly. With ``grow_with`` (a folder with a ``corpus.jsonl``, e.g.
``../shared/data/2wiki``) a second BubbleRAG index over the corpus plus those passages checks
localisation: the same questions' median latency on the grown graph against the small one.
"""

from __future__ import annotations

import functools
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from core.embed import Embedder, as_embedder
from core.evaluation import Dataset, RunResult, load_dataset, markdown_table, run_strategy, summarize_runs
from core.store import ChunkStore
from core.strategies.baselines import DenseRetriever
from core.strategies.bridge import BridgeRAG
from core.strategies.bubble import BubbleRAG
from core.types import Document, Retrieved

__all__ = ["run_bubble_benchmark"]

COLUMNS = [
    "strategy",
    "recall@2",
    "recall@5",
    "recall@10",
    "answer_recall@5",
    "context_words@5",
    "p50_ms",
    "p95_ms",
    "p50_no_embed_ms",
    "build_s",
]
K_MAX = 10


def _retrieve(rag: Any, q: str) -> list[Retrieved]:
    out: list[Retrieved] = rag.retrieve(q, k=K_MAX)
    return out


def _retrieve_vec(rag: Any, q: str, v: np.ndarray) -> list[Retrieved]:
    out: list[Retrieved] = rag.retrieve_by_vector(q, v, K_MAX)
    return out


def _bridge_vec(rag: BridgeRAG, q: str, v: np.ndarray) -> list[Retrieved]:
    return rag.retrieve_by_vector(q, v, K_MAX, depth=rag.config.depth)


def _extra_documents(folder: str, seed: int, known: set[str]) -> list[Document]:
    """The passages of another corpus (``corpus.jsonl`` only), shuffled, minus ids already indexed."""
    import json

    path = Path(folder) / "corpus.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; --grow needs a folder with a corpus.jsonl")
    passages = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                row = json.loads(line)
                if not all(isinstance(row.get(f), str) for f in ("id", "title", "text")):
                    raise ValueError(f"{path}:{lineno}: needs string fields id, title and text")
                if row["id"] not in known:
                    passages.append({"id": row["id"], "title": row["title"], "text": row["text"]})
    return Dataset(name=Path(folder).name, passages=passages, questions=[]).documents(seed)


def run_bubble_benchmark(
    dataset_dir: str,
    *,
    seed: int = 0,
    sample: int | None = None,
    embedder: Any = None,
    grow_with: str | None = None,
) -> dict[str, Any]:
    """Builds BubbleRAG (and Bridge-RAG over the same chunks) and measures them beside dense.

    Args:
        dataset_dir: A folder with corpus.jsonl and questions.jsonl.
        seed: Corpus shuffle seed (and question sample seed).
        sample: Use a seeded sample of this many questions.
        embedder: Embedder; default all-MiniLM-L6-v2.
        grow_with: Optional folder whose corpus.jsonl is added for the localisation check.

    Returns:
        ``{"rows", "table", "build", "graph", "localisation"?, ...}``.
    """
    data = load_dataset(dataset_dir)
    questions = data.sample_questions(sample, seed)
    docs = data.documents(seed)
    emb = as_embedder(embedder)
    emb.embed_documents(["warm-up"])
    with tempfile.TemporaryDirectory(prefix="bubble-bench-") as tmp:
        store = ChunkStore.persistent(f"{tmp}/chroma", "bench")
        t0 = time.perf_counter()
        bubble = BubbleRAG.from_documents(docs, embedder=emb, store=store, show_progress=True)
        build_s = time.perf_counter() - t0
        texts = store.get(include_embeddings=False).texts
        t0 = time.perf_counter()
        emb.embed_documents(texts)
        embed_once_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        bridge = BridgeRAG.from_store(store, embedder=emb, show_progress=True)
        bridge_build_s = time.perf_counter() - t0 + embed_once_s  # it reuses the stored vectors
        dense = DenseRetriever(store, emb)
        bar = tqdm(total=len(questions) * 3, desc="queries", file=sys.stderr)
        runs: list[RunResult] = [
            run_strategy(
                "dense",
                questions,
                functools.partial(_retrieve, dense),
                functools.partial(_retrieve_vec, dense),
                emb.embed_query,
                build_seconds=embed_once_s,
                progress=bar.update,
            ),
            run_strategy(
                "bridge",
                questions,
                functools.partial(_retrieve, bridge),
                functools.partial(_bridge_vec, bridge),
                emb.embed_query,
                build_seconds=bridge_build_s,
                progress=bar.update,
            ),
            run_strategy(
                "bubble (no LLM)",
                questions,
                functools.partial(_retrieve, bubble),
                functools.partial(_retrieve_vec, bubble),
                emb.embed_query,
                build_seconds=build_s,
                progress=bar.update,
            ),
        ]
        bar.close()
        rows = summarize_runs(questions, runs, ks=(2, 5, 10))
        dense_row = rows[0]
        for r in rows:
            r["recall@5 - dense"] = r["recall@5"] - dense_row["recall@5"]
            r["p50 / dense p50"] = r["p50_ms"] / dense_row["p50_ms"]
        result: dict[str, Any] = {
            "dataset": data.name,
            "questions": len(questions),
            "passages": len(data.passages),
            "seed": seed,
            "embedder": emb.name,
            "rows": rows,
            "build": {
                "bubble_build_s": build_s,
                "embed_corpus_once_s": embed_once_s,
                "build_over_embed": build_s / embed_once_s,
                "steps_s": dict(bubble.report.seconds),
            },
            "graph": _graph_figures(bubble),
            "table": markdown_table(rows, [*COLUMNS, "recall@5 - dense", "p50 / dense p50"]),
        }
        if grow_with is not None:
            small_p50 = next(r["p50_ms"] for r in rows if r["strategy"].startswith("bubble"))
            result["localisation"] = _localisation(
                docs, grow_with, seed, emb, questions, small_p50, bubble.kg.num_nodes, f"{tmp}/grown"
            )
        return result


def _graph_figures(rag: BubbleRAG) -> dict[str, Any]:
    kg = rag.kg
    kinds = Counter(k for k, alive in zip(kg.edge_kind, kg.edge_alive, strict=True) if alive)
    return {
        "chunks": rag.num_chunks,
        "nodes": kg.num_nodes,
        "edges": kg.num_edges,
        "edges_by_kind": dict(kinds),
        "memory_mb": kg.memory_bytes() / 2**20,
    }


def _localisation(
    docs: list[Document],
    grow_with: str,
    seed: int,
    emb: Embedder,
    questions: list[Any],
    small_p50: float,
    small_nodes: int,
    where: str,
) -> dict[str, Any]:
    """Median latency of the same questions on the corpus grown with another corpus's passages."""
    extra = _extra_documents(grow_with, seed, {d.id for d in docs if d.id is not None})
    grown_docs = docs + extra
    random.Random(seed).shuffle(grown_docs)
    store = ChunkStore.persistent(where, "grown")
    t0 = time.perf_counter()
    grown = BubbleRAG.from_documents(grown_docs, embedder=emb, store=store, show_progress=True)
    build_s = time.perf_counter() - t0
    bar = tqdm(total=len(questions), desc="queries (grown graph)", file=sys.stderr)
    run = run_strategy(
        "bubble (grown)",
        questions,
        functools.partial(_retrieve, grown),
        functools.partial(_retrieve_vec, grown),
        emb.embed_query,
        build_seconds=build_s,
        progress=bar.update,
    )
    bar.close()
    row = summarize_runs(questions, [run], ks=(5,))[0]
    return {
        "added_passages": len(extra),
        "small_nodes": small_nodes,
        "grown_nodes": grown.kg.num_nodes,
        "growth": grown.kg.num_nodes / max(small_nodes, 1),
        "small_p50_ms": small_p50,
        "grown_p50_ms": row["p50_ms"],
        "p50_ratio": row["p50_ms"] / small_p50,
        "grown_recall@5": row["recall@5"],
        "grown_build_s": build_s,
        "graph": _graph_figures(grown),
    }
