"""`bridge-rag bench DATASET --suite umg`: UMG-RAG, UMGP-RAG and their baselines, one UMG build.

A configuration of the one runner (:mod:`core.evaluation.runner`). Every row reads the same
UMG index (sentence windows at every granularity, their embeddings in one Chroma
collection); the baselines query it on 8-sentence units: BM25 alone, dense alone, SPLADE
alone (with ``splade=True``), and hybrid reciprocal-rank fusion of dense and BM25 (k = 60).
A baseline's build is the steps of the UMG build it needs. Printed beside the metrics:
answer recall@5, context words@5 and p50 latency against hybrid RRF.
"""

from __future__ import annotations

from typing import Any

from core.evaluation.registry import Query, Vector
from core.evaluation.suite import Suite, Variant, Versus
from core.types import Retrieved

__all__ = ["umg_suite"]


def _expert(expert: str, granularity: int) -> Query:
    """One UMG expert alone at one granularity (dense needs the query vector; BM25 and SPLADE do not)."""

    def by_vector(index: Any, question: str, vector: Vector, k: int, /, **_: Any) -> list[Retrieved]:
        results: list[Retrieved] = index.retrieve_expert(
            question, vector, k, expert=expert, granularity=granularity
        )
        return results

    def text(index: Any, question: str, k: int, /, **_: Any) -> list[Retrieved]:
        results: list[Retrieved] = index.retrieve_expert(
            question, None, k, expert=expert, granularity=granularity
        )
        return results

    return Query(by_vector=by_vector) if expert == "dense" else Query(text=text)


def _rrf(granularity: int) -> Query:
    """Hybrid RRF of UMG's dense and BM25 experts at one granularity."""

    def by_vector(index: Any, question: str, vector: Vector, k: int, /, **_: Any) -> list[Retrieved]:
        results: list[Retrieved] = index.retrieve_rrf(question, vector, k, granularity=granularity)
        return results

    return Query(by_vector=by_vector)


def umg_suite(*, splade: bool = False, granularity: int = 8) -> Suite:
    """The suite: BM25, dense (and SPLADE) alone, hybrid RRF, UMG and UMGP, on one UMG build."""
    g = granularity
    rrf = f"hybrid RRF dense+bm25 (g={g}, k=60)"
    dense_steps = ("units", "embed", "store")
    rows = [
        Variant("umg", f"bm25 (g={g})", query=_expert("bm25", g), build_steps=("units", "sparse")),
        Variant("umg", f"dense (g={g})", query=_expert("dense", g), build_steps=dense_steps),
    ]
    if splade:
        rows.append(
            Variant("umg", f"splade (g={g})", query=_expert("splade", g), build_steps=("units", "splade"))
        )
    rows += [
        Variant("umg", rrf, query=_rrf(g), build_steps=(*dense_steps, "sparse")),
        Variant("umg", "umg without the bridging expert", config={"link_hops": 0}),
        Variant("umg"),
        Variant("umgp", "umgp without the bridging expert", config={"link_hops": 0}),
        Variant("umgp"),
    ]
    return Suite(
        "umg",
        tuple(rows),
        versus=(
            Versus("R@5 - RRF", "recall@5", rrf),
            Versus("AR@5 - RRF", "answer_recall@5", rrf),
            Versus("words@5 / RRF", "context_words@5", rrf, ratio=True),
            Versus("p50 / RRF p50", "p50_ms", rrf, ratio=True),
        ),
        settings={"umg": {"splade": True}} if splade else {},
    )
