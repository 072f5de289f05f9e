"""`bridge-rag bench DATASET --suite bridge`: dense retrieval and Bridge-RAG at several depths.

A configuration of the one runner (:mod:`core.evaluation.runner`): dense retrieval and one
Bridge-RAG build over the run's shared Chroma collection (``BridgeRAG.from_store``: the same
chunks and vectors), queried at each depth, and the paper's pure variant at each depth (the
same build with its config changed, no build of its own). Printed beside the metrics:
recall@5 against dense and the p50 latency over dense's.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.evaluation.suite import SUITE_COLUMNS, Suite, Variant, Versus

__all__ = ["PAPER_VARIANT", "bridge_suite"]

#: The paper's Algorithm 1 alone: candidates only from the entity-matched abstracts and the
#: tree, ranked by cosine (no entity evidence, no second hop, no dense pool).
PAPER_VARIANT = {
    "entity_weight": 0.0,
    "bridge_weight": 0.0,
    "tree_weight": 0.0,
    "dense_pool": 0,
    "link_hops": 0,
}


def bridge_suite(depths: Sequence[int] = (1, 2, 3), *, paper_variant: bool = True) -> Suite:
    """The suite: dense, then Bridge-RAG piece by piece (the ablation), on one build.

    Rows, each adding one piece: the paper's Algorithm 1 (filter only at depth 0, then the
    forest at each depth), the entity evidence and second filter hop (no walk), the
    entity-hop walk at 1..4 hops, and the default; beside them the default without the dense
    prior (no dense pool) and at depth 0 (no forest).
    """
    rows = [Variant("dense")]
    if paper_variant:
        rows += [
            Variant("bridge", "paper: filter only (d=0)", options={"depth": 0}, config=PAPER_VARIANT),
            *(
                Variant("bridge", f"paper: + forest d={d}", options={"depth": d}, config=PAPER_VARIANT)
                for d in depths
            ),
        ]
    rows.append(Variant("bridge", "+ entity evidence, second filter hop (no walk)", config={"link_hops": 0}))
    rows += [Variant("bridge", f"+ entity-hop walk, {h} hop(s)", config={"link_hops": h}) for h in (1, 2, 3)]
    rows += [
        Variant("bridge", "bridge (default)"),
        Variant("bridge", "default without the dense prior", config={"dense_pool": 0}),
        *(Variant("bridge", f"default at d={d}", options={"depth": d}) for d in (0, *depths)),
    ]
    return Suite(
        "bridge",
        tuple(rows),
        columns=(*SUITE_COLUMNS[:-1], "p95_no_embed_ms", SUITE_COLUMNS[-1]),
        versus=(
            Versus("recall@5 vs dense", "recall@5", "dense", include_reference=False),
            Versus("words@5 / dense", "context_words@5", "dense", ratio=True, include_reference=False),
            Versus("p50 / dense p50", "p50_ms", "dense", ratio=True, include_reference=False),
        ),
    )
