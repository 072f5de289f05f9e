"""An interrupted ``bridge-rag index --update`` is repaired by the next one; a killed first build is named.

For every strategy, an index of a small folder is built; then the folder changes (a file
edited, one removed, one added) and ``--update`` runs in a process that SIGKILLs itself at
each stage in turn (:mod:`tests.reliability.update_killer`: after the journal, after the
Chroma delete, after the saved delete, after the Chroma add, after the saved add, before
the final record). The next plain ``--update`` must succeed and leave the same index as a
clean build of the changed folder: the same live chunk ids and texts in the index and in
its Chroma collection.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.update_killer import STAGES, run_index

STRATEGIES = ("bridge", "umg", "bubble")
FILES = {
    "a.md": "# Arvel Dalmor\n\nArvel Dalmor founded the Quellmoor Guild in 1801. The guild traded salt.\n",
    "b.md": "# Brisca Evanth\n\nBrisca Evanth built the Tarnholt bridge. She married Corwen Fennick.\n",
    "c.txt": "Corwen Fennick wrote a chronicle of Solbury that is kept in the Rastwick archive.\n",
    "d.md": "# Galder Hestry\n\nGalder Hestry mapped the Umberlee coast and the Vantry islands in 1840.\n",
}
CHANGES = {
    "b.md": "# Brisca Evanth\n\nBrisca Evanth rebuilt the Tarnholt bridge after the flood of 1822.\n",
    "c.txt": None,
    "e.md": "# Dalmor Arvelson\n\nDalmor Arvelson, the son of Arvel Dalmor, led the Quellmoor Guild.\n",
}


def _write(folder: Path, files: dict[str, str | None]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        if text is None:
            (folder / name).unlink()
        else:
            (folder / name).write_text(text, encoding="utf-8")


def _contents(index: Path) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """The live (id, text) rows of the saved index, and those of its Chroma collection."""
    from core.app.indexing import load_index_dir
    from core.app.sources import read_sources
    from tests.reliability.cases import wiring_embedder
    from tests.reliability.update_killer import offline_models

    with offline_models():
        rag: Any = load_index_dir(index, read_sources(index))
    try:
        table = rag._table
        rows = {(table.ids[r], table.texts[r]) for r in range(len(table)) if table.alive[r]}
        stored = rag.store.get(include_embeddings=False)
        chroma = set(zip(stored.ids, (t or "" for t in stored.texts), strict=True))
        assert rag.embedder.name == wiring_embedder().name
        return rows, chroma
    finally:
        rag.close()
        rag.store.close()


def _build(folder: Path, name: str) -> None:
    """``bridge-rag index folder/docs --index folder/index --strategy name``, which must succeed."""
    done = run_index("none", folder / "docs", folder / "index", "--strategy", name)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module", params=STRATEGIES)
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Any]:
    """``(strategy, base)``: the folder and its index before the change, and a clean build after."""
    name: str = request.param
    base = tmp_path_factory.mktemp(f"kill-{name}")
    _write(base / "docs", FILES)
    _build(base, name)
    clean = base / "clean"
    shutil.copytree(base / "docs", clean / "docs")
    _write(clean / "docs", CHANGES)
    _build(clean, name)
    return name, base, _contents(clean / "index")


@pytest.mark.parametrize("stage", STAGES)
def test_the_next_update_repairs_a_sigkill(built: tuple[str, Path, Any], stage: str, tmp_path: Path) -> None:
    name, base, expected = built
    shutil.copytree(base / "docs", tmp_path / "docs")
    shutil.copytree(base / "index", tmp_path / "index")
    _write(tmp_path / "docs", CHANGES)
    killed = run_index(stage, tmp_path / "docs", tmp_path / "index", "--update")
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr[-2000:])
    repaired = run_index("none", tmp_path / "docs", tmp_path / "index", "--update")
    assert repaired.returncode == 0, repaired.stderr[-2000:]
    rows, chroma = _contents(tmp_path / "index")
    assert rows == expected[0]
    assert chroma == expected[1]
    assert rows == chroma or name == "umg"  # UMG's windows are the rows of its own collection


@pytest.mark.parametrize("stage", ["journal", "chroma-add", "record"])
def test_a_sigkilled_first_build_is_named_or_repaired(
    built: tuple[str, Path, Any], stage: str, tmp_path: Path
) -> None:
    """Killed before its save: every command says to remove it; killed after: ``--update`` completes it."""
    name, base, _ = built
    shutil.copytree(base / "docs", tmp_path / "docs")
    killed = run_index(stage, tmp_path / "docs", tmp_path / "index", "--strategy", name)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr[-2000:])
    if stage != "record":
        for more in ((), ("--update",)):
            again = run_index("none", tmp_path / "docs", tmp_path / "index", *more)
            assert again.returncode == 2, again.stderr[-2000:]
            assert "holds a first build that did not finish (interrupted); remove" in again.stderr
        shutil.rmtree(tmp_path / "index")  # as the message says
        _build(tmp_path, name)
    else:
        repaired = run_index("none", tmp_path / "docs", tmp_path / "index", "--update")
        assert repaired.returncode == 0, repaired.stderr[-2000:]
    assert _contents(tmp_path / "index") == _contents(base / "index")
