"""The uncertainty fusion's settings, swept on every dev set at once beside LangChain's ensemble.

Run with ``python -m core.evaluation.fusion_sweep [--data ../shared/data]``. For each dataset
the two retrievers of the ``langchain-ensemble`` peer (LangChain's ``BM25Retriever`` and a
``langchain_chroma`` retriever, ``n`` each, on the benchmark's shared collection) answer every
question once, with each retriever returning 5 results and again 10 (``bridge-rag bench``
asks every row for 10 and reads R@5 off them); their scored lists are then fused with each
swept scaling (``rank``, at each swept rank constant ``c``, and ``minmax``) and temperature
(the fusion is cheap, the retrieval is not), and ``EnsembleRetriever`` answers the same
questions. A row fuses the same lists by
rank with every confidence equal, so what the entropy weighting adds is read off. It prints
R@k per dataset and the mean of the datasets for each setting, so one setting is chosen for
all of them together. Quality only: latency is measured by ``bridge-rag bench``.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.confidence_fusion import DEFAULT_RANK_CONSTANT, Scaling
from core.embed import as_embedder
from core.evaluation.corpus import BenchContext
from core.evaluation.embedding_cache import EmbeddingCache
from core.evaluation.metrics import load_dataset, passage_recall
from core.evaluation.peers import langchain_bm25_and_chroma

__all__ = ["main", "sweep_dataset"]

_DATASETS = ("hotpotqa", "musique", "2wiki")
_TEMPERATURES = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
#: The rank constant ``c`` of the ``rank`` scaling (``EnsembleRetriever``'s default is 60).
_RANK_CONSTANTS = (0.0, 1.0, 2.0, 5.0, 10.0, 60.0)
_SCALINGS: tuple[Scaling, ...] = ("rank", "minmax")
#: Results each retriever returns: LangChain's ``k`` of 5, and 10 (what ``bridge-rag bench`` asks for).
_LIST_LENGTHS = (5, 10)
#: The ``rank`` fusion without the entropy weighting: what the confidence adds is the difference.
_EQUAL = f"rank c={DEFAULT_RANK_CONSTANT:g}, equal confidences"


def _doc_ids(docs: Sequence[Any]) -> list[str]:
    return [str(d.metadata.get("doc_id") or (d.id or "").split("::")[0]) for d in docs]


def _setting(scaling: Scaling, c: float, temperature: float) -> str:
    rank_constant = f" c={c:g}" if scaling == "rank" else ""
    return f"{scaling}{rank_constant} T={temperature:g}"


def sweep_dataset(
    directory: Path,
    temperatures: Sequence[float],
    k: int,
    scalings: Sequence[Scaling] = _SCALINGS,
    list_lengths: Sequence[int] = _LIST_LENGTHS,
    rank_constants: Sequence[float] = _RANK_CONSTANTS,
) -> dict[tuple[int, str], float]:
    """R@k of ``EnsembleRetriever`` and of the fusion at each setting on one dataset.

    Returns:
        Recall by ``(list length, setting)``; the setting ``"ensemble"`` is LangChain's.
    """
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_core.runnables import ensure_config

    from langchain_bridge.fusion import UncertaintyFusionRetriever

    data = load_dataset(directory)
    recall: dict[tuple[int, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="fusion-sweep-") as tmp:
        ctx = BenchContext.create(
            data.documents(seed=0), EmbeddingCache(as_embedder(None)), Path(tmp), k=k, show_progress=False
        )
        for n in list_lengths:
            retrievers = langchain_bm25_and_chroma(dataclasses.replace(ctx, k=n))
            ensemble = EnsembleRetriever(retrievers=retrievers, weights=[0.5, 0.5])
            fusions = {
                _setting(sc, c, t): UncertaintyFusionRetriever(
                    retrievers=retrievers, temperature=t, scaling=sc, c=c
                )
                for sc in scalings
                for c in (rank_constants if sc == "rank" else (0.0,))
                for t in temperatures
            }
            any_fusion = next(iter(fusions.values()))
            # The same lists without their scores: every list gets the same confidence.
            equal = UncertaintyFusionRetriever(retrievers=retrievers, scaling="rank")
            totals = {"ensemble": 0.0, _EQUAL: 0.0, **dict.fromkeys(fusions, 0.0)}
            for q in data.questions:
                lists = [any_fusion._scored(r, q.question, ensure_config()) for r in retrievers]
                totals["ensemble"] += passage_recall(q, _doc_ids(ensemble.invoke(q.question)[:k]))
                scoreless = [(docs, None) for docs, _ in lists]
                totals[_EQUAL] += passage_recall(q, _doc_ids(equal._fuse(scoreless)[:k]))
                for setting, fusion in fusions.items():
                    totals[setting] += passage_recall(q, _doc_ids(fusion._fuse(lists)[:k]))
            recall.update({(n, name): total / len(data.questions) for name, total in totals.items()})
    return recall


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: sweeps, prints the tables, returns 0."""
    parser = argparse.ArgumentParser(prog="python -m core.evaluation.fusion_sweep", description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="the datasets' folder")
    parser.add_argument("--k", type=int, default=5, help="recall cut (default 5)")
    parser.add_argument("--datasets", default=",".join(_DATASETS), help="comma-separated dataset folders")
    args = parser.parse_args(argv)
    datasets = args.datasets.split(",")
    rows = {name: sweep_dataset(args.data / name, _TEMPERATURES, args.k) for name in datasets}
    keys = list(next(iter(rows.values())))
    print(
        f"R@{args.k}; fusion over BM25Retriever + Chroma retriever (n results each); "
        f"swept: n x scaling (rank: x c in {', '.join(f'{c:g}' for c in _RANK_CONSTANTS)}) x "
        f"temperature ({', '.join(f'{t:g}' for t in _TEMPERATURES)})"
    )
    print(
        "| n | setting | " + " | ".join(datasets) + " | mean | mean - ensemble | worst dataset - ensemble |"
    )
    print("|---:|---|" + "---:|" * (len(datasets) + 3))
    gains: dict[str, list[float]] = {}
    for n, setting in keys:
        cells = [rows[d][n, setting] for d in datasets]
        deltas = [rows[d][n, setting] - rows[d][n, "ensemble"] for d in datasets]
        gains.setdefault(setting, []).append(sum(deltas) / len(deltas))
        print(
            f"| {n} | {setting} | "
            + " | ".join(f"{c:.3f}" for c in cells)
            + f" | {sum(cells) / len(cells):.3f} | {sum(deltas) / len(deltas):+.3f} | {min(deltas):+.3f} |"
        )
    print("\nmean - ensemble, averaged over n = " + ", ".join(str(n) for n in _LIST_LENGTHS))
    for setting, values in gains.items():
        print(f"- {setting}: {sum(values) / len(values):+.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
