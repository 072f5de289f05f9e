"""A deleted document leaves no trace in the scores: after deletes, a query scores as over a clean build.

How common a name looks (the entity-hop walk's specificity, Bridge-RAG's entity IDF) is counted
over the live units only, so a writer that keeps adding and deleting never shifts the ranking
of what stays: 40 documents added and deleted leave the scores of a clean build of the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.entities import RuleBasedEntityExtractor
from core.store import ChunkStore
from core.strategies.bridge import BridgeRAG
from core.strategies.bubble import BubbleRAG
from core.strategies.umg import UMGRAG
from core.types import Document
from tests.core.conftest import unique_name
from tests.reliability.cases import spacy_triples, wiring_embedder

KEPT = [
    Document("Oskar Halden founded the Halden Institute in 1903. Agnes Moor directed it.", id="a"),
    Document("Pieter Ashby edited the Marrowick Courier with Oskar Halden.", id="c"),
    Document("Agnes Moor built the Greywater Bridge after the flood.", id="e"),
]
FILLER = [
    Document(f"Filler text number {i} about Tessel weather and Ilse Varga.", id=f"f{i}") for i in range(40)
]
QUERY = "Who directed the Halden Institute?"

STRATEGIES: dict[str, tuple[Any, dict[str, Any], float]] = {
    # Bridge-RAG's abstract forest is shaped by what it held: its scores stay within a hair
    "bridge": (BridgeRAG, {"entity_extractor": RuleBasedEntityExtractor()}, 0.01),
    "umg": (UMGRAG, {"entity_extractor": RuleBasedEntityExtractor()}, 1e-6),
    "bubble": (BubbleRAG, {}, 1e-6),
}


def _build(name: str, docs: list[Document], **kwargs: Any) -> Any:
    cls, settings, _ = STRATEGIES[name]
    if name == "bubble":
        settings = {"triple_extractor": spacy_triples()}
    return cls.from_documents(
        docs,
        embedder=wiring_embedder(),
        store=ChunkStore.ephemeral(unique_name(f"scores-{name}")),
        show_progress=False,
        **settings,
        **kwargs,
    )


def _scores(rag: Any) -> list[tuple[str, float]]:
    return [(r.id, r.score) for r in rag.retrieve(QUERY, k=3)]


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_deleted_documents_do_not_shift_the_scores_of_the_rest(name: str, tmp_path: Path) -> None:
    tolerance = STRATEGIES[name][2]
    clean = _scores(_build(name, KEPT))
    churned = _build(name, KEPT + FILLER, persist_directory=tmp_path)
    churned.delete_documents([d.id for d in FILLER])
    for scores in (
        _scores(churned),
        _scores(_reload(churned, tmp_path)),
    ):
        assert [i for i, _ in scores] == [i for i, _ in clean]
        assert all(abs(s - c) <= tolerance for (_, s), (_, c) in zip(scores, clean, strict=True)), (
            scores,
            clean,
        )
    churned.close()


def _reload(rag: Any, root: Path) -> Any:
    """The saved index, loaded over the same (in-memory) collection."""
    options: dict[str, Any] = {"embedder": wiring_embedder(), "store": rag.store}
    if rag.name != "bubble":
        options["entity_extractor"] = RuleBasedEntityExtractor()
    return type(rag).load(root / rag.name, **options)
