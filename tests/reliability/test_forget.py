"""An index that owns its Chroma forgets what it deletes: Chroma's own files included.

``bridge-rag index`` (embedded Chroma under ``IDX/chroma``) and a library build with
``persist_directory`` and no store open their own Chroma inside the directory. After
``bridge-rag index --update`` drops a deleted file (and an edited sentence), or after a
library ``delete_documents`` + ``save``, every byte of every file under the directory is
searched: 24-character stretches of the deleted text, its invented names in any case, a
metadata value only it carried, its document and chunk ids, and (library) the exact bytes of
the vectors Chroma was given: 0 hits. That covers Chroma's write-ahead log
(``embeddings_queue``), its tables, SQLite's free pages, the full-text index
(``embedding_fulltext_search*``) and the HNSW id map (``index_metadata.pickle``). The HNSW
vector file (``data_level0.bin``) keeps a unit-normalised copy of a deleted vector (marked
deleted, never returned, as documented): there the vectors are checked through Chroma's API
(their ids are gone). The index still
answers and reloads. Where the app owns the store, nothing of Chroma is compacted.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.store import ChunkStore
from core.strategies.lifecycle import IncompleteForgetWarning
from core.types import Document
from tests.core.conftest import unique_name
from tests.reliability.cases import StrategyCase, synthetic_documents, wiring_embedder
from tests.reliability.file_search import files_under, text_windows

SECRET_VALUE = "vault-secret-5d81ce07"
SECRET_TEXT = (
    "Zerquon Pellavast sealed the Drummerith compact with the Oskavine brotherhood in 1893. "
    "The compact gave the Velloquay copper mines to Pellavast for sixty years of rent. "
    "Later the Oskavine brotherhood buried the Drummerith ledger under the Zerquon tower."
)
#: The deleted text's invented names: a vocabulary, an entity list or a graph node would hold them.
NAMES = (b"zerquon", b"pellavast", b"drummerith", b"oskavine", b"velloquay")
EDITED_OLD = "Myrtobel Azzurine first lit the Quessendral lantern on the harbour wall in 1788."
EDITED_NEW = "The harbour lantern on the wall was first lit in 1788."


#: Where Chroma's HNSW index keeps its vectors: a deleted one stays there, unit-normalised and
#: marked deleted (documented; Chroma cannot compact it). Chroma also writes the file's unused
#: capacity and neighbour slots uncleared, so it holds stray bytes of the writing process's
#: memory: in a long-lived test worker, SQL text, ids and once a stretch of the deleted text
#: (documented in docs/reliability.md). So no needle is looked for there.
HNSW_VECTORS = "data_level0.bin"


def _leftovers(root: Path, needles: dict[str, set[bytes]]) -> dict[str, list[str]]:
    """``what -> [files]`` for every needle found in any file under ``root`` (names: any case).

    Every file is searched but the HNSW index's vector file (see :data:`HNSW_VECTORS`).
    """
    found: dict[str, list[str]] = {}
    for path in files_under(root):
        data = path.read_bytes()
        lower = data.lower()
        for what, items in needles.items():
            if path.name == HNSW_VECTORS:
                continue
            hay = lower if what == "names" else data
            if any(item in hay for item in items):
                found.setdefault(what, []).append(str(path.relative_to(root)))
    return found


def _docs_folder(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    (docs / "keep.md").write_text("# Arvel Dalmor\n\nArvel Dalmor founded the Quellmoor Guild in 1801.\n")
    (docs / "harbour.md").write_text(
        f"# The harbour\n\nThe Rastwick harbour traded salt and copper. {EDITED_OLD}\n"
    )
    row = {"id": "zerquon-ledger", "text": SECRET_TEXT, "title": "Ledger", "vault": SECRET_VALUE}
    (docs / "vault.jsonl").write_text(json.dumps(row) + "\n")
    return docs


def _open_chroma(index_dir: Path, rag: Any) -> ChunkStore:
    return ChunkStore.persistent(index_dir / "chroma", rag.store.name, create=False)


def test_an_update_leaves_nothing_of_a_removed_file_or_an_edited_sentence(
    case: StrategyCase, tmp_path: Path
) -> None:
    """``bridge-rag index --update``: Chroma's files hold nothing of what the update removed."""
    from tests.reliability.update_killer import run_index

    docs = _docs_folder(tmp_path)
    index = tmp_path / "index"

    def run(*more: str) -> None:
        done = run_index("none", docs, index, *more)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "IncompleteForgetWarning" not in done.stderr, done.stderr[-3000:]

    run("--strategy", case.name)
    before = case.load(index, embedder=wiring_embedder(), refresh_interval=None, **case.wiring_kwargs())
    secret_rows = [r for r, d in enumerate(before._table.doc_ids) if d == "zerquon-ledger"]
    assert secret_rows
    chunk_ids = {before._table.ids[r] for r in secret_rows}
    before.close()
    needles = {
        "text": text_windows(SECRET_TEXT),
        "edited": {w for w in text_windows(EDITED_OLD) if w not in EDITED_NEW.encode()},
        "names": {*NAMES, b"quessendral", b"azzurine"},
        "metadata": {SECRET_VALUE.encode()},
        "ids": {b"zerquon-ledger", *(i.encode() for i in chunk_ids)},
    }
    found = _leftovers(index, needles)
    assert set(found) == set(needles), found  # the search finds them, Chroma's file included
    assert all("chroma/chroma.sqlite3" in files for files in found.values()), found

    (docs / "vault.jsonl").unlink()
    (docs / "harbour.md").write_text(
        f"# The harbour\n\nThe Rastwick harbour traded salt and copper. {EDITED_NEW}\n"
    )
    run("--update")

    assert _leftovers(index, needles) == {}
    rag = case.load(index, embedder=wiring_embedder(), refresh_interval=None, **case.wiring_kwargs())
    assert "zerquon-ledger" not in case.live_documents(rag)
    assert case.live_documents(rag) >= {"keep.md", "harbour.md"}
    top = rag.retrieve("Who founded the Quellmoor Guild?", k=3)
    assert top
    assert any("Quellmoor" in r.text for r in top)
    lantern = rag.retrieve("When was the harbour lantern first lit?", k=5)
    assert any("harbour lantern on the wall" in r.text for r in lantern)
    for result in rag.retrieve("Zerquon Pellavast Drummerith compact", k=50):
        assert "Zerquon" not in result.text
        assert "Quessendral" not in result.text
    chroma = _open_chroma(index, rag)  # vectors cannot be grepped: Chroma itself holds no such id
    try:
        assert chroma.existing(sorted(chunk_ids)) == []
        assert chroma.count() == int(rag._table.alive.sum())
    finally:
        chroma.close()
        rag.close()


def test_a_library_delete_and_save_leaves_nothing_in_the_persist_directory(
    case: StrategyCase, wiring_build: Callable[..., Any], tmp_path: Path
) -> None:
    """``delete_documents`` + ``save`` on a ``persist_directory`` build: 0 hits under the directory."""
    rag = wiring_build(8, persist_directory=tmp_path)
    assert rag.store.index_owned
    rag.add_documents([Document(SECRET_TEXT, id="secret-doc", metadata={"vault": SECRET_VALUE})])
    rows = [r for r, d in enumerate(rag._table.doc_ids) if d == "secret-doc" and rag._table.alive[r]]
    assert rows
    chunk_ids = [rag._table.ids[r] for r in rows]
    stored = rag.store.get(chunk_ids)  # the vectors exactly as Chroma was given them
    assert stored.embeddings is not None
    needles = {
        "text": text_windows(SECRET_TEXT),
        "names": set(NAMES),
        "metadata": {SECRET_VALUE.encode()},
        "ids": {b"secret-doc", *(i.encode() for i in chunk_ids)},
        "vectors": {np.asarray(v, dtype=np.float32).tobytes() for v in stored.embeddings},
    }
    found = _leftovers(tmp_path, needles)
    assert set(found) == set(needles), found
    assert all("chroma/chroma.sqlite3" in files for files in found.values()), found

    with warnings.catch_warnings():
        warnings.simplefilter("error", IncompleteForgetWarning)
        assert rag.delete_documents(["secret-doc"]) == len(rows)
        rag.save(tmp_path)

    assert _leftovers(tmp_path, needles) == {}
    assert rag.store.existing(chunk_ids) == []
    assert rag.store.count() == int(rag._table.alive.sum())
    assert all("Zerquon" not in r.text for r in rag.retrieve("Zerquon Pellavast Drummerith", k=50))
    assert rag.retrieve("Who founded the Quellmoor Guild?", k=3)
    rag.close()
    reopened = case.load(tmp_path, embedder=rag.embedder, refresh_interval=None, **case.wiring_kwargs())
    assert "secret-doc" not in case.live_documents(reopened)
    assert len(case.live_documents(reopened)) == 8
    assert reopened.retrieve("Who founded the Quellmoor Guild?", k=3)
    reopened.add_documents([Document("Brisca Tarnholt mapped the Vantry coast in 1820.", id="late")])
    assert "late" in case.live_documents(reopened)  # Chroma still takes writes after the forget
    reopened.close()


def test_a_store_the_app_owns_is_left_as_it_is(
    case: StrategyCase, wiring_build: Callable[..., Any], tmp_path: Path
) -> None:
    """A store passed in is the app's: the index blanks its own files, Chroma's are not compacted."""
    store = ChunkStore.persistent(tmp_path / "app-chroma", unique_name(f"app-{case.name}"))
    assert not store.index_owned
    rag = wiring_build(6, store=store, persist_directory=tmp_path / "idx")
    rag.add_documents([Document(SECRET_TEXT, id="secret-doc", metadata={"vault": SECRET_VALUE})])
    rag.delete_documents(["secret-doc"])
    rag.save(tmp_path / "idx")
    needles = {"text": text_windows(SECRET_TEXT), "metadata": {SECRET_VALUE.encode()}}
    assert _leftovers(tmp_path / "idx", needles) == {}
    # Chroma's log still holds the added rows: what the docs say remains, and how to clear it.
    assert set(_leftovers(tmp_path / "app-chroma", needles)) == {"text", "metadata"}
    rag.close()
    store.forget_deleted()
    assert _leftovers(tmp_path / "app-chroma", needles) == {}
    store.close()


_REOPEN = """
import sys
import chromadb
from chromadb.config import Settings
client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
col = client.get_collection("killed")
assert col.count() == int(sys.argv[2]), col.count()
assert len(col.query(query_embeddings=[[0.5] * 8], n_results=3)["ids"][0]) == 3
col.add(ids=["after-kill"], embeddings=[[0.25] * 8], documents=["written after the kill"])
assert col.get(ids=["after-kill"])["documents"] == ["written after the kill"]
"""


def test_a_compaction_killed_at_any_point_leaves_chroma_whole(tmp_path: Path) -> None:
    """SIGKILL during the FTS merge or the vacuum: Chroma opens, answers and writes; SQLite is intact."""
    import shutil
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    from core.store import _COMPACT_SCRIPT

    source = tmp_path / "source"
    store = ChunkStore.persistent(source, "killed")
    n = 1500
    vectors = np.random.default_rng(0).random((n, 8), dtype=np.float32) + 0.01
    ids = [f"row-{i}" for i in range(n)]
    texts = [f"row {i} of the ledger, copper and salt traded at Rastwick in {1700 + i}" for i in range(n)]
    store.add(ids, texts, vectors, [{"i": i} for i in range(n)])
    store.delete(ids[:200])
    store._checkpoint()
    for delay in (0.0, 0.03, 0.06, 0.1, 0.2):
        target = tmp_path / f"killed-{delay}"
        shutil.copytree(source, target)
        child = subprocess.Popen(
            [sys.executable, "-c", _COMPACT_SCRIPT, str(target)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        reopened = subprocess.run(
            [sys.executable, "-c", _REOPEN, str(target), str(n - 200)], capture_output=True, text=True
        )
        assert reopened.returncode == 0, reopened.stderr[-2000:]
        db = sqlite3.connect(target / "chroma.sqlite3")
        try:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            db.close()
    store.close()


def test_forget_deleted_refuses_a_chroma_it_cannot_reach_on_disk() -> None:
    with pytest.raises(ValueError, match="embedded"):
        ChunkStore.ephemeral(unique_name("forget")).forget_deleted()


def test_a_failed_forget_warns_and_the_next_save_retries(
    wiring_build: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vacuum failing leaves a working index and Chroma, says so, and is retried by the next save."""
    rag = wiring_build(6, persist_directory=tmp_path)
    rag.add_documents([Document(SECRET_TEXT, id="secret-doc", metadata={"vault": SECRET_VALUE})])
    real = ChunkStore.forget_deleted
    calls: list[str] = []

    def failing(self: ChunkStore) -> None:
        calls.append("fail")
        raise RuntimeError("chroma vacuum failed: database is locked")

    monkeypatch.setattr(ChunkStore, "forget_deleted", failing)
    with pytest.warns(IncompleteForgetWarning, match="database is locked"):
        rag.delete_documents(["secret-doc"])
    assert calls == ["fail"]
    assert "secret-doc" not in set(rag._table.doc_rows)
    assert rag.retrieve("Who founded the Quellmoor Guild?", k=3)
    monkeypatch.setattr(ChunkStore, "forget_deleted", real)
    rag.save(tmp_path)  # retried
    assert _leftovers(tmp_path, {"text": text_windows(SECRET_TEXT)}) == {}
    rag.close()


def test_no_forget_without_a_delete(
    wiring_build: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adds and plain saves never pay for a vacuum."""
    rag = wiring_build(4, persist_directory=tmp_path)
    calls: list[int] = []
    monkeypatch.setattr(ChunkStore, "forget_deleted", lambda self: calls.append(1))
    rag.add_documents(synthetic_documents(2, prefix="more"))
    rag.save(tmp_path)
    assert calls == []
    rag.delete_documents(["more-0000"])
    rag.save(tmp_path)
    assert calls == [1]
    rag.close()
