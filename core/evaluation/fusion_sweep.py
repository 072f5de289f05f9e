"""The uncertainty fusion's settings, swept on every dev set at once beside LangChain's ensemble.

Run with ``python -m core.evaluation.fusion_sweep [--data ../shared/data]``. For each dataset
the two retrievers of the ``langchain-ensemble`` peer (LangChain's ``BM25Retriever`` and a
``langchain_chroma`` retriever, ``k`` each, on the benchmark's shared collection) answer every
question once; their scored lists are then fused with each swept temperature (the fusion is
cheap, the retrieval is not), and ``EnsembleRetriever`` answers the same questions. It prints
R@k per dataset and the mean of the datasets for each setting, so one setting is chosen for
all of them together. Quality only: latency is measured by ``bridge-rag bench``.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.embed import as_embedder
from core.evaluation.corpus import BenchContext
from core.evaluation.embedding_cache import EmbeddingCache
from core.evaluation.metrics import load_dataset, passage_recall
from core.evaluation.peers import langchain_bm25_and_chroma

__all__ = ["main", "sweep_dataset"]

_DATASETS = ("hotpotqa", "musique", "2wiki")
_TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)


def _doc_ids(docs: Sequence[Any]) -> list[str]:
    return [str(d.metadata.get("doc_id") or (d.id or "").split("::")[0]) for d in docs]


def sweep_dataset(directory: Path, temperatures: Sequence[float], k: int) -> dict[str, float]:
    """R@k of ``EnsembleRetriever`` and of the fusion at each temperature on one dataset."""
    from langchain_classic.retrievers import EnsembleRetriever

    from langchain_bridge.fusion import UncertaintyFusionRetriever

    data = load_dataset(directory)
    with tempfile.TemporaryDirectory(prefix="fusion-sweep-") as tmp:
        ctx = BenchContext.create(
            data.documents(seed=0), EmbeddingCache(as_embedder(None)), Path(tmp), k=k, show_progress=False
        )
        retrievers = langchain_bm25_and_chroma(ctx)
        ensemble = EnsembleRetriever(retrievers=retrievers, weights=[0.5, 0.5])
        fusions = {t: UncertaintyFusionRetriever(retrievers=retrievers, temperature=t) for t in temperatures}
        any_fusion = next(iter(fusions.values()))
        recall: dict[str, float] = {"ensemble": 0.0, **{f"T={t:g}": 0.0 for t in temperatures}}
        for q in data.questions:
            lists = [any_fusion._scored(r, q.question, None) for r in retrievers]
            recall["ensemble"] += passage_recall(q, _doc_ids(ensemble.invoke(q.question)[:k]))
            for t, fusion in fusions.items():
                recall[f"T={t:g}"] += passage_recall(q, _doc_ids(fusion._fuse(lists)[:k]))
    return {name: total / len(data.questions) for name, total in recall.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: sweeps, prints one table, returns 0."""
    parser = argparse.ArgumentParser(prog="python -m core.evaluation.fusion_sweep", description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="the datasets' folder")
    parser.add_argument("--k", type=int, default=5, help="results per question and recall cut (default 5)")
    args = parser.parse_args(argv)
    rows = {name: sweep_dataset(args.data / name, _TEMPERATURES, args.k) for name in _DATASETS}
    settings = list(next(iter(rows.values())))
    print(f"R@{args.k}; fusion over BM25Retriever + Chroma retriever (k={args.k} each); swept: temperature")
    print("| setting | " + " | ".join(_DATASETS) + " | mean | mean - ensemble |")
    print("|---|" + "---:|" * (len(_DATASETS) + 2))
    base = sum(rows[d]["ensemble"] for d in _DATASETS) / len(_DATASETS)
    for s in settings:
        mean = sum(rows[d][s] for d in _DATASETS) / len(_DATASETS)
        cells = " | ".join(f"{rows[d][s]:.3f}" for d in _DATASETS)
        print(f"| {s} | {cells} | {mean:.3f} | {mean - base:+.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
