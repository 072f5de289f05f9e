"""Builds into a sibling collection at once: UMG-RAG's windows beside an app's collection.

``UMGRAG.from_store(store)`` builds its sentence windows into ``<name>_umg`` of the same Chroma,
replacing what an earlier build left. Two builds at once (two threads with clients of their
own over one persistent directory, or over one in-memory Chroma) must not delete each other's
rows: the one that comes second is refused with a clear error while the first runs, the first
keeps its claim alive by heartbeat however long it takes, a build that lost its claim stops with
a clear error, and a rebuild after a finished (or failed) build replaces the windows as before.
The fake bag-of-words embedder and ``link_hops=0`` keep these wiring tests free of models.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("chromadb")

import core.store
from core.store import SIBLING_TAG, BuildInProgressError, ChunkStore
from core.strategies.umg import UMGRAG
from core.types import Document
from tests.core.conftest import hash_embedder, unique_name

FIRST = "first-build"  # the name of the thread whose build the gate holds
NAMES = ["Arvel", "Brisca", "Corwen", "Dalmor", "Evanth", "Fennick"]
PLACES = ["Quellmoor", "Rastwick", "Solbury", "Tarnholt"]


def _documents(n: int = 6) -> list[Document]:
    return [
        Document(
            f"{NAMES[i % 6]} founded the {PLACES[i % 4]} Guild in {1800 + i}. "
            f"The guild traded salt and copper for {i + 2} years. "
            f"Later {NAMES[i % 6]} wrote a chronicle that is kept in the archive.",
            id=f"doc-{i}",
        )
        for i in range(n)
    ]


def _seed(store: ChunkStore) -> ChunkStore:
    """Fills an app's collection with one chunk per document, as an app's own pipeline would."""
    docs = _documents()
    texts = [d.text for d in docs]
    ids = [str(d.id) for d in docs]
    store.add(ids, texts, hash_embedder().embed_documents(texts), [{"doc_id": i} for i in ids])
    return store


def _build(store: ChunkStore, **kwargs: Any) -> UMGRAG:
    return UMGRAG.from_store(store, embedder=hash_embedder(), show_progress=False, link_hops=0, **kwargs)


def _metadata(store: ChunkStore, name: str) -> dict[str, Any]:
    return dict(store.client.get_collection(name).metadata or {})


class _Gate:
    """Holds the build of the thread named :data:`FIRST` right after it wrote its windows."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.written = threading.Event()
        self.release = threading.Event()
        real = ChunkStore.add

        def add(store: ChunkStore, *args: Any, **kwargs: Any) -> None:
            real(store, *args, **kwargs)
            if threading.current_thread().name == FIRST and not self.written.is_set():
                self.written.set()
                assert self.release.wait(60), "the test never released the first build"

        monkeypatch.setattr(ChunkStore, "add", add)


class _Background:
    """Runs a build in a thread named :data:`FIRST`; :meth:`result` joins it."""

    def __init__(self, build: Callable[[], UMGRAG]) -> None:
        self._out: list[UMGRAG] = []
        self._err: list[BaseException] = []

        def run() -> None:
            try:
                self._out.append(build())
            except BaseException as exc:  # reported by result()
                self._err.append(exc)

        self._thread = threading.Thread(target=run, name=FIRST, daemon=True)
        self._thread.start()

    def result(self) -> UMGRAG:
        self._thread.join(60)
        assert not self._thread.is_alive(), "the first build did not finish"
        if self._err:
            raise self._err[0]
        return self._out[0]


@pytest.fixture
def quick_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim unheard from for 0.6 s is abandoned; a running build beats every 0.05 s."""
    monkeypatch.setattr(core.store, "BUILD_CLAIM_TIMEOUT", 0.6)
    monkeypatch.setattr(core.store, "BUILD_HEARTBEAT", 0.05)


def test_a_second_build_while_the_first_runs_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _seed(ChunkStore.persistent(tmp_path, "app"))
    gate = _Gate(monkeypatch)
    first = _Background(lambda: _build(ChunkStore.persistent(tmp_path, "app", create=False)))
    assert gate.written.wait(60)
    units = app.client.get_collection("app_umg")
    written = units.count()
    assert written > 0
    assert _metadata(app, "app_umg")["bridge_rag_build_state"] == "building"

    second = ChunkStore.persistent(tmp_path, "app", create=False)  # a client of its own
    with pytest.raises(
        BuildInProgressError,
        match=r"another build of the collection 'app_umg' \(pid \d+ on host .*, started at .*\) is "
        r"in progress; wait for it to finish and retry, or .*pass units_store=",
    ):
        _build(second)
    now = app.client.get_collection("app_umg")
    assert (now.id, now.count()) == (units.id, written)  # the first build's rows are whole

    # The way out the message names: a collection of one's own, built meanwhile.
    own = ChunkStore.persistent(tmp_path, "mine")
    assert _build(second, units_store=own).store.count() == written

    gate.release.set()
    built = first.result()
    assert built.store.collection.id == units.id
    assert built.store.count() == written
    assert _metadata(app, "app_umg")["bridge_rag_build_state"] == "complete"
    assert built.retrieve("Who founded the Quellmoor Guild?", k=2)

    # An app rebuilds at every start: a finished build's windows are replaced.
    again = _build(second)
    assert again.store.collection.id != units.id
    assert again.store.count() == written
    assert _metadata(app, "app_umg")["bridge_rag_build_state"] == "complete"
    assert sorted(c.name for c in app.client.list_collections()) == ["app", "app_umg", "mine"]


@pytest.mark.usefixtures("quick_claims")
def test_a_long_build_keeps_its_claim_by_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    name = unique_name("app")
    app = _seed(ChunkStore.ephemeral(name))  # in-memory clients of one process share their data
    gate = _Gate(monkeypatch)
    first = _Background(lambda: _build(ChunkStore.ephemeral(name)))
    assert gate.written.wait(60)
    beat = _metadata(app, f"{name}_umg")["bridge_rag_build_beat"]
    time.sleep(1.5)  # far past the timeout: only the heartbeat keeps the claim
    assert _metadata(app, f"{name}_umg")["bridge_rag_build_beat"] > beat
    with pytest.raises(BuildInProgressError, match="is in progress"):
        _build(ChunkStore.ephemeral(name))
    gate.release.set()
    assert first.result().store.count() > 0
    assert _metadata(app, f"{name}_umg")["bridge_rag_build_state"] == "complete"


def _finish(store: ChunkStore, ids: list[str]) -> None:
    """Ends a build into ``store``: writes ``ids`` (if any) under its claim, then settles it."""
    with store.build_claim():
        if ids:
            store.add(
                ids, [f"unit {i}" for i in ids], np.ones((len(ids), 4), dtype=np.float32), [{}] * len(ids)
            )


@pytest.mark.usefixtures("quick_claims")
@pytest.mark.parametrize("late_write", [True, False], ids=["writing", "finishing"])
def test_a_build_that_lost_its_claim_stops_with_a_clear_error(late_write: bool) -> None:
    app = _seed(ChunkStore.ephemeral(unique_name("app")))
    sibling = f"{app.name}_umg"
    stalled = app.sibling(sibling, replace=True)  # claimed, but its builder never beats
    with pytest.raises(BuildInProgressError, match="is in progress"):
        app.sibling(sibling, replace=True)
    time.sleep(0.8)
    taker = app.sibling(sibling, replace=True)  # the stalled claim is taken for abandoned
    assert taker.collection.id != stalled.collection.id
    with pytest.raises(
        BuildInProgressError, match=r"lost its claim: another build replaced the collection.*now built by pid"
    ):
        _finish(stalled, ["late"] if late_write else [])  # its writes go to its own, deleted collection
    _finish(taker, ["mine"])
    assert taker.get(include_embeddings=False).ids == ["mine"]  # nothing of the stalled build
    assert _metadata(app, sibling)["bridge_rag_build_state"] == "complete"


def test_a_failed_build_can_be_retried_at_once() -> None:
    app = ChunkStore.ephemeral(unique_name("app"))
    sibling = f"{app.name}_umg"
    units = app.sibling(sibling, replace=True)
    with pytest.raises(RuntimeError, match="embedder exploded") as info, units.build_claim():
        raise RuntimeError("embedder exploded")
    assert info.type is RuntimeError  # the build's own error, not a claim error
    assert _metadata(app, sibling)["bridge_rag_build_state"] == "failed"
    retry = app.sibling(sibling, replace=True)
    assert retry.collection.id != units.collection.id


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=30)
    return proc.pid


@pytest.mark.usefixtures("quick_claims")
def test_claims_of_dead_builders_and_other_hosts() -> None:
    app = ChunkStore.ephemeral(unique_name("app"))
    sibling = f"{app.name}_umg"
    units = app.sibling(sibling, replace=True)
    claim = _metadata(app, sibling)
    assert claim[SIBLING_TAG] == app.name

    # Crashed on this host: replaced at once, without waiting for the timeout.
    units.collection.modify(metadata={**claim, "bridge_rag_build_pid": _dead_pid()})
    units = app.sibling(sibling, replace=True)

    # Another host cannot be checked from here: its claim holds until it goes unheard.
    claim = _metadata(app, sibling)
    elsewhere = {**claim, "bridge_rag_build_host": "elsewhere.example", "bridge_rag_build_pid": 1}
    units.collection.modify(metadata=elsewhere)
    with pytest.raises(BuildInProgressError, match=r"pid 1 on host 'elsewhere\.example'"):
        app.sibling(sibling, replace=True)
    units.collection.modify(metadata={**elsewhere, "bridge_rag_build_beat": time.time() - 5})
    replaced = app.sibling(sibling, replace=True)
    assert _metadata(app, sibling)["bridge_rag_build_host"] == socket.gethostname()
    assert replaced.collection.id != units.collection.id


def test_a_sibling_without_a_claim_is_replaced_as_before() -> None:
    """A collection from ``replace=False`` (or an older bridge-rag) carries no claim."""
    app = ChunkStore.ephemeral(unique_name("app"))
    old = app.sibling(f"{app.name}_umg")
    old.add(["u"], ["unit"], np.ones((1, 3), dtype=np.float32), [{}])
    new = app.sibling(f"{app.name}_umg", replace=True)
    assert new.count() == 0
    with new.build_claim():
        pass
    with old.build_claim():  # no claim: nothing to settle
        pass


def _replace_at_once(
    store: ChunkStore,
    barrier: threading.Barrier,
    won: list[ChunkStore],
    refused: list[BaseException],
    failed: list[BaseException],
) -> None:
    """Replaces the sibling ``app_umg`` as soon as every thread is ready; files the outcome."""
    barrier.wait(30)
    try:
        won.append(store.sibling("app_umg", replace=True))
    except BuildInProgressError as exc:
        refused.append(exc)
    except BaseException as exc:  # anything else fails the test
        failed.append(exc)


def test_simultaneous_replaces_leave_exactly_one_build(tmp_path: Path) -> None:
    app = _seed(ChunkStore.persistent(tmp_path, "app"))
    with app.sibling("app_umg", replace=True).build_claim():
        pass
    for _ in range(3):
        stores = [ChunkStore.persistent(tmp_path, "app", create=False) for _ in range(6)]
        barrier = threading.Barrier(len(stores))
        won: list[ChunkStore] = []
        refused: list[BaseException] = []
        failed: list[BaseException] = []
        threads = [
            threading.Thread(target=_replace_at_once, args=(s, barrier, won, refused, failed)) for s in stores
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not failed, failed
        assert len(won) == 1, (len(won), refused)
        assert len(refused) == len(stores) - 1
        current = app.client.get_collection("app_umg")
        assert current.id == won[0].collection.id
        assert current.metadata["bridge_rag_build"] == won[0].collection.metadata["bridge_rag_build"]
        with won[0].build_claim():
            won[0].add(["w"], ["the winner's row"], np.ones((1, 4), dtype=np.float32), [{}])
        assert sorted(c.name for c in app.client.list_collections()) == ["app", "app_umg"]


def test_a_rebuild_into_its_persist_directory_is_a_new_generation(tmp_path: Path) -> None:
    """An app that rebuilds at every start keeps its index; a directory that is an index is refused first."""
    store = _seed(ChunkStore.persistent(tmp_path / "chroma", unique_name("app")))
    first = _build(store, persist_directory=tmp_path / "index")
    generation = first.generation
    first.close()
    again = _build(store, persist_directory=tmp_path / "index")  # a new generation of the same index
    assert again.generation != generation
    again.close()
    loaded = UMGRAG.load(tmp_path / "index", embedder=hash_embedder(), refresh_interval=None)
    assert loaded.num_units == again.num_units
    side = store.sibling(f"{store.name}_umg")
    assert side.count() == again.num_units
    loaded.save(tmp_path / "saved")  # a directory that is itself an index
    with pytest.raises(FileExistsError, match="is itself a saved umg index"):
        _build(store, persist_directory=tmp_path / "saved")
    assert side.count() == again.num_units, "the side collection was replaced before the refusal"


def test_a_rebuild_while_a_writer_holds_the_index_touches_nothing(tmp_path: Path) -> None:
    """A live writer's side collection is not replaced by a rebuild that its lock then refuses."""
    from core.writer_lock import IndexLockedError

    store = _seed(ChunkStore.persistent(tmp_path / "chroma", unique_name("app")))
    writer = _build(store, persist_directory=tmp_path / "index")  # keeps its writer lock
    side = store.sibling(f"{store.name}_umg")
    rows = side.count()
    with pytest.raises(IndexLockedError, match="is being written by"):
        _build(store, persist_directory=tmp_path / "index")
    assert side.count() == rows
    writer.add_documents([Document("Galen Orm founded the Vesk Guild in 1850.", id="doc-late")])
    assert side.count() > rows


def test_a_reader_follows_a_rebuild_that_replaced_the_side_collection(tmp_path: Path) -> None:
    """A reader that opened the side collection opens the rebuilt one at its next switch."""
    store = _seed(ChunkStore.persistent(tmp_path / "chroma", unique_name("app")))
    _build(store, persist_directory=tmp_path / "index").close()
    reader = UMGRAG.load(tmp_path / "index", embedder=hash_embedder(), refresh_interval=None)
    extra = "Galen Orm founded the Vesk Guild in 1850."
    store.add(["late-1"], [extra], hash_embedder().embed_documents([extra]), [{"doc_id": "late-1"}])
    assert tuple(reader.sync()) == (1, 0, 0)  # the reader now holds the side collection open
    reader.close()  # lets the writer lock go, as a worker that synced does
    _build(store, persist_directory=tmp_path / "index").close()  # replaces the side collection
    assert reader.refresh()
    more = "Hesper Lune keeps the Vesk Guild archive."
    store.add(["late-2"], [more], hash_embedder().embed_documents([more]), [{"doc_id": "late-2"}])
    assert tuple(reader.sync()) == (1, 0, 0)
    assert any(r.metadata.get("doc_id") == "late-2" for r in reader.retrieve("Hesper Lune archive", k=20))


def test_a_build_into_a_directory_saves_once_with_what_it_follows(tmp_path: Path) -> None:
    """One save: no generation on disk lacks the collection the index follows (a crash could load it)."""
    from core.persist import load_index

    store = _seed(ChunkStore.persistent(tmp_path / "chroma", unique_name("app")))
    _build(store, persist_directory=tmp_path / "index").close()
    folder = tmp_path / "index" / UMGRAG.name
    generations = sorted(p.name for p in folder.iterdir() if p.name.startswith("gen-"))
    assert len(generations) == 1
    meta, files = load_index(folder, kind=UMGRAG.name, version=UMGRAG.index_version)
    assert meta["from_store"] is True
    assert "source_documents.json" in files
    with pytest.raises(TypeError, match="collection_name"):
        _build(store, collection_name="elsewhere")  # not a setting of a build from a store


def test_an_interrupt_after_the_side_collection_is_replaced_leaves_no_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C between the side collection's replacement and the build: a retry builds at once."""
    store = _seed(ChunkStore.persistent(tmp_path / "chroma", unique_name("app")))
    real = UMGRAG._construct.__func__  # type: ignore[attr-defined]

    def interrupted(cls: type[UMGRAG], *args: Any, **kwargs: Any) -> UMGRAG:
        raise KeyboardInterrupt("Ctrl-C while the strategy is made")

    monkeypatch.setattr(UMGRAG, "_construct", classmethod(interrupted))
    with pytest.raises(KeyboardInterrupt):
        _build(store)
    monkeypatch.setattr(UMGRAG, "_construct", classmethod(real))
    assert _build(store).num_units > 0  # no "another build is in progress" for its claim's timeout
