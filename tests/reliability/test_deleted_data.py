"""A delete deletes: after the next save, no file of the index holds the deleted document.

Every strategy indexes a small corpus plus one document with a distinctive text, a secret
metadata value and vectors of its own, saves, deletes it and saves again. Then every byte of
every file under the index directory is searched for: any 24-character stretch of the
deleted text, its invented names in any case (entity lists, vocabularies, graph nodes), the
metadata value, the chunk ids, and the exact bytes of each deleted chunk's (or window's)
embedding. The same holds when the delete comes from
``bridge-rag index --update`` after the file was removed. Summaries that covered the
deleted document (Bridge's abstracts, every level) are rewritten from what is left.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from core.types import Document
from tests.reliability.cases import StrategyCase, synthetic_documents
from tests.reliability.file_search import files_under, text_windows

SECRET_VALUE = "tenant-secret-7f3a9c"
SECRET_TEXT = (
    "Quorvaline Draxmuir signed the Hollowfen accord with the Ystrelle syndicate in 1907. "
    "The accord ceded the Marsquill salt flats to Draxmuir for forty years of tithes. "
    "Later the Ystrelle syndicate hid the ledger of the Hollowfen accord under the Quorvaline mill."
)


#: The deleted text's invented names: an entity list, a vocabulary or a graph node would hold them.
NAMES = (b"quorvaline", b"draxmuir", b"hollowfen", b"ystrelle", b"marsquill")


def _leftovers(root: Path, needles: dict[str, set[bytes]]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in files_under(root):
        data = path.read_bytes()
        for what, items in needles.items():
            hay = data.lower() if what == "names" else data
            if any(item in hay for item in items):
                found.setdefault(what, []).append(str(path.relative_to(root)))
    return found


def _secret_rows(rag: Any) -> list[int]:
    return [r for r, d in enumerate(rag._table.doc_ids) if d == "secret-doc" and rag._table.alive[r]]


def test_nothing_of_a_deleted_document_is_left_in_the_index_directory(
    case: StrategyCase, wiring_build: Callable[..., Any], tmp_path: Path
) -> None:
    rag = wiring_build(12, persist_directory=tmp_path)
    rag.add_documents([Document(SECRET_TEXT, id="secret-doc", metadata={"vault": SECRET_VALUE})])
    rows = _secret_rows(rag)
    assert rows
    needles = {
        "text": text_windows(SECRET_TEXT),
        "metadata": {SECRET_VALUE.encode()},
        "ids": {b'"secret-doc"', *(f'"{rag._table.ids[r]}"'.encode() for r in rows)},  # a name is data too
        "vectors": {np.asarray(rag._table.matrix[r], dtype=np.float32).tobytes() for r in rows},
        "names": set(NAMES),
    }
    index_dir = tmp_path / case.name
    before = _leftovers(index_dir, needles)
    assert set(before) == {"text", "metadata", "ids", "vectors", "names"}, before  # the search finds them
    assert rag.delete_documents(["secret-doc"]) == len(rows)
    assert _leftovers(index_dir, needles) == {}
    reopened = case.load(tmp_path, embedder=rag.embedder, **case.wiring_kwargs())
    assert "secret-doc" not in case.live_documents(reopened)
    assert reopened.retrieve("Who signed the Hollowfen accord?", k=5)
    assert all("Hollowfen" not in r.text for r in reopened.retrieve("Hollowfen accord Draxmuir", k=50))


def test_bridge_abstracts_of_every_level_forget_a_deleted_document() -> None:
    from core.entities import RuleBasedEntityExtractor
    from core.store import ChunkStore
    from core.strategies.bridge import BridgeRAG
    from tests.core.conftest import unique_name
    from tests.reliability.cases import wiring_embedder

    secret = Document(SECRET_TEXT, id="secret-doc", metadata={"vault": SECRET_VALUE})
    rag = BridgeRAG.from_documents(
        [*synthetic_documents(3), secret],
        embedder=wiring_embedder(),
        store=ChunkStore.ephemeral(unique_name("purge")),
        entity_extractor=RuleBasedEntityExtractor(),
        show_progress=False,
    )

    def mentions() -> dict[int, int]:
        out = {}
        for a in range(len(rag._abs_level)):
            info = rag.abstract(a)
            named = [info["summary"], *info["entities"]]
            if any("draxmuir" in x.lower() or "hollowfen" in x.lower() for x in named):
                out[a] = info["level"]
        return out

    levels = set(mentions().values())
    assert {0, 1} <= levels  # the document's abstract and its parent name it
    rag.delete_documents(["secret-doc"])
    assert mentions() == {}
    assert rag.retrieve("Who founded the Quellmoor Guild?", k=3)


def test_a_file_removed_before_update_leaves_nothing_in_the_index(case: StrategyCase, tmp_path: Path) -> None:
    """``bridge-rag index --update`` after a file is removed: the same search finds nothing."""
    from tests.reliability.update_killer import run_index

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "keep.md").write_text("# Arvel Dalmor\n\nArvel Dalmor founded the Quellmoor Guild in 1801.\n")
    (docs / "secret.md").write_text(SECRET_TEXT + "\n")
    index = tmp_path / "index"

    def run(*more: str) -> None:
        done = run_index("none", docs, index, *more)
        assert done.returncode == 0, done.stderr[-2000:]

    run("--strategy", case.name)
    needles = {"text": text_windows(SECRET_TEXT), "names": set(NAMES)}
    saved = index / case.name
    assert set(_leftovers(saved, needles)) == {"text", "names"}
    (docs / "secret.md").unlink()
    run("--update")
    assert _leftovers(saved, needles) == {}
