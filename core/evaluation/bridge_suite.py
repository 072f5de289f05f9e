"""`bridge-rag bench`: dense retrieval and Bridge-RAG on one dataset, in one run.

Both read the same Chroma collection built with the same embedder; the figures printed side
by side (and as ratios against dense) come from the same process.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from core.embed import as_embedder
from core.evaluation import RunResult, load_dataset, markdown_table, run_strategy, summarize_runs
from core.store import ChunkStore
from core.strategies.baselines import DenseRetriever
from core.strategies.bridge import BridgeRAG
from core.types import Retrieved

__all__ = ["run_bridge_benchmark"]

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
    "p95_no_embed_ms",
    "build_s",
]


def _bridge_query(rag: BridgeRAG, k: int, depth: int, q: str) -> list[Retrieved]:
    return rag.retrieve(q, k=k, depth=depth)


def _bridge_query_vec(rag: BridgeRAG, k: int, depth: int, q: str, v: np.ndarray) -> list[Retrieved]:
    return rag.retrieve_by_vector(q, v, k, depth=depth)


def run_bridge_benchmark(
    dataset_dir: str,
    *,
    depths: Sequence[int] = (1, 2, 3),
    seed: int = 0,
    sample: int | None = None,
    embedder: Any = None,
    paper_variant: bool = True,
) -> dict[str, Any]:
    """Builds one index over the dataset and measures dense and Bridge-RAG on it.

    Args:
        dataset_dir: A folder with corpus.jsonl and questions.jsonl.
        depths: Bridge expansion depths to measure.
        seed: Shuffle seed for the corpus order (and the question sample).
        sample: Use only this many questions (a seeded sample); None = all.
        embedder: Embedder; default all-MiniLM-L6-v2.
        paper_variant: Also measure the paper's pure variant (no entity weight, no dense pool).

    Returns:
        ``{"rows": [...], "table": markdown, "build": {...}, "seed": seed, ...}``.
    """
    data = load_dataset(dataset_dir)
    questions = data.sample_questions(sample, seed)
    docs = data.documents(seed)
    emb = as_embedder(embedder)
    emb.embed_documents(["warm-up"])  # load lazily initialised kernels before timing anything
    with tempfile.TemporaryDirectory(prefix="bridge-bench-") as tmp:
        store = ChunkStore.persistent(f"{tmp}/chroma", "bench")
        t0 = time.perf_counter()
        rag = BridgeRAG.from_documents(docs, embedder=emb, store=store, show_progress=True)
        build_s = time.perf_counter() - t0
        texts = rag.store.get(include_embeddings=False).texts
        t0 = time.perf_counter()
        emb.embed_documents(texts)
        embed_once_s = time.perf_counter() - t0
        dense = DenseRetriever(store, emb)
        k_max = 10
        runs: list[RunResult] = []
        bar = tqdm(total=len(questions) * (1 + 2 * len(depths)), desc="queries", file=sys.stderr)
        runs.append(
            run_strategy(
                "dense",
                questions,
                lambda q: dense.retrieve(q, k=k_max),
                lambda q, v: dense.retrieve_by_vector(q, v, k_max),
                emb.embed_query,
                build_seconds=embed_once_s + rag.report.seconds.get("store", 0.0),
                progress=bar.update,
            )
        )
        base_config = rag.config
        for d in depths:
            runs.append(
                run_strategy(
                    f"bridge d={d}",
                    questions,
                    functools.partial(_bridge_query, rag, k_max, d),
                    functools.partial(_bridge_query_vec, rag, k_max, d),
                    emb.embed_query,
                    build_seconds=build_s,
                    progress=bar.update,
                )
            )
        if paper_variant:
            # The paper's Algorithm 1 alone: candidates only from the entity-matched abstracts
            # and the tree, ranked by cosine (no entity evidence, no second hop, no dense pool).
            rag.config = dataclasses.replace(
                base_config, entity_weight=0.0, bridge_weight=0.0, tree_weight=0.0, dense_pool=0
            )
            for d in depths:
                runs.append(
                    run_strategy(
                        f"bridge, paper variant d={d}",
                        questions,
                        functools.partial(_bridge_query, rag, k_max, d),
                        functools.partial(_bridge_query_vec, rag, k_max, d),
                        emb.embed_query,
                        build_seconds=build_s,
                        progress=bar.update,
                    )
                )
            rag.config = base_config
        bar.close()
        rows = summarize_runs(questions, runs, ks=(2, 5, 10))
        dense_row = rows[0]
        for r in rows[1:]:
            r["recall@5 vs dense"] = r["recall@5"] - dense_row["recall@5"]
            r["p50 / dense p50"] = r["p50_ms"] / dense_row["p50_ms"]
        return {
            "dataset": data.name,
            "questions": len(questions),
            "passages": len(data.passages),
            "seed": seed,
            "embedder": emb.name,
            "rows": rows,
            "build": {
                "bridge_build_s": build_s,
                "embed_corpus_once_s": embed_once_s,
                "build_over_embed": build_s / embed_once_s,
                "steps_s": dict(rag.report.seconds),
                "counts": dict(rag.report.counts),
            },
            "table": markdown_table(rows, [*COLUMNS, "recall@5 vs dense", "p50 / dense p50"]),
        }
