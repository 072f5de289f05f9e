"""Readers follow the one writer: new generations are picked up within the refresh interval.

Every strategy of :data:`tests.reliability.cases.STRATEGIES` (fake embedder: wiring tests):
a reader loaded from the index directory notices the writer's saves by itself, switches
without failing a query, keeps its generation when a load fails, and several reader
processes stop returning a deleted document within the interval (plus the load).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from core.store import ChunkStore
from core.types import Document
from tests.reliability.cases import STRATEGIES, StrategyCase, synthetic_documents, wiring_embedder

ROOT = Path(__file__).resolve().parents[2]
QUERY = "Who founded the guild in the harbour town?"
#: Time a reader may need to load a new generation of these small indexes, beyond the interval.
LOAD_ALLOWANCE_S = 3.0


@pytest.fixture(params=STRATEGIES, ids=str)
def case(request: pytest.FixtureRequest) -> StrategyCase:
    param: StrategyCase = request.param
    return param


def _writer(case: StrategyCase, tmp_path: Path, n: int = 6) -> tuple[Any, Path, list[Document]]:
    docs = synthetic_documents(n)
    writer = case.build(
        docs, embedder=wiring_embedder(), persist_directory=tmp_path / "idx", **case.wiring_kwargs()
    )
    return writer, tmp_path / "idx", docs


def _reader(case: StrategyCase, path: Path, interval: float | None) -> Any:
    return case.load(path, embedder=wiring_embedder(), refresh_interval=interval, **case.wiring_kwargs())


def _docs_of(strategy: Any) -> set[str]:
    return {str(r.metadata.get("doc_id")) for r in strategy.retrieve(QUERY, k=200)}


def test_a_reader_follows_deletes_and_additions_by_itself(case: StrategyCase, tmp_path: Path) -> None:
    writer, path, docs = _writer(case, tmp_path)
    reader = _reader(case, path, 0.2)
    assert reader.refresh_interval == 0.2
    first = reader.generation
    assert first is not None
    gone = str(docs[0].id)
    assert gone in _docs_of(reader)
    writer.delete_documents([gone])
    saved = time.monotonic()
    while gone in _docs_of(reader):
        assert time.monotonic() - saved < 0.2 + LOAD_ALLOWANCE_S, "the reader kept the deleted document"
        time.sleep(0.02)
    assert reader.generation != first
    writer.add_documents([Document("Ilse Marrow founded the guild in the harbour town of Vell.", id="fresh")])
    saved = time.monotonic()
    while "fresh" not in _docs_of(reader):
        assert time.monotonic() - saved < 0.2 + LOAD_ALLOWANCE_S, "the reader never saw the new document"
        time.sleep(0.02)
    assert reader.generation == writer.generation
    assert reader.refresh() is False  # nothing newer
    writer.close()


def test_without_an_interval_only_refresh_switches(case: StrategyCase, tmp_path: Path) -> None:
    writer, path, docs = _writer(case, tmp_path)
    reader = _reader(case, path, None)
    assert reader.refresh_interval is None
    writer.delete_documents([str(docs[1].id)])
    time.sleep(0.3)
    assert str(docs[1].id) in _docs_of(reader)  # still the generation it loaded
    assert reader.refresh() is True
    assert str(docs[1].id) not in _docs_of(reader)
    assert writer.refresh() is False  # a writer never reloads its own saves
    writer.close()


def test_a_failed_load_keeps_the_old_generation(
    case: StrategyCase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer, path, docs = _writer(case, tmp_path)
    reader = _reader(case, path, None)
    before = _docs_of(reader)
    writer.delete_documents([str(docs[2].id)])
    follower = reader._follower

    def broken(owner: Any) -> Any:
        raise ValueError("the index files are malformed (simulated); rebuild it")

    real, follower._reload = follower._reload, broken
    with caplog.at_level(logging.WARNING, logger="bridge_rag.refresh"):
        assert reader.refresh() is False
    assert "still serving" in caplog.text
    assert isinstance(follower.last_error, ValueError)
    assert _docs_of(reader) == before  # the old generation answers, unchanged
    follower._reload = real
    assert reader.refresh() is True
    assert str(docs[2].id) not in _docs_of(reader)
    writer.close()


def test_no_query_fails_while_generations_switch(case: StrategyCase, tmp_path: Path) -> None:
    writer, path, docs = _writer(case, tmp_path, n=8)
    reader = _reader(case, path, 0.0)  # checks before every query: the most switches
    errors: list[BaseException] = []
    stop = threading.Event()
    seen: list[set[str]] = []

    def hammer() -> None:
        while not stop.is_set():
            try:
                seen.append(_docs_of(reader))
            except BaseException as exc:  # pragma: no cover - the assertion below reports it
                errors.append(exc)

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i, doc in enumerate(docs[:5]):
            writer.delete_documents([str(doc.id)])
            writer.add_documents([Document(f"Guild member {i} founded a harbour town.", id=f"new-{i}")])
            time.sleep(0.05)
        deadline = time.monotonic() + LOAD_ALLOWANCE_S
        while reader.generation != writer.generation and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[:3]
    assert reader._follower.switches >= 1
    assert reader.generation == writer.generation
    assert _docs_of(reader) == _docs_of(writer)
    writer.close()


def test_reader_processes_drop_a_deleted_document_within_the_interval(
    case: StrategyCase, tmp_path: Path
) -> None:
    writer, path, docs = _writer(case, tmp_path)
    interval = 0.5
    readers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.reliability.follow_reader",
                case.name,
                str(path),
                str(interval),
                "6",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for _ in range(3)
    ]
    for proc in readers:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    time.sleep(1.0)
    gone = str(docs[0].id)
    started = time.time()  # a reader may see the delete from here: the save comes before the call returns
    writer.delete_documents([gone])
    saved = time.time()
    outputs = [proc.communicate(timeout=120)[0] for proc in readers]
    writer.close()
    for out in outputs:
        records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        assert records, out
        assert not [r for r in records if "error" in r], out
        before = [r for r in records if r["t"] < started]
        assert before
        assert all(gone in r["docs"] for r in before)
        late = [
            r["t"] - saved
            for r in records
            if r["t"] > saved + interval + LOAD_ALLOWANCE_S and gone in r["docs"]
        ]
        assert not late, f"a reader returned the deleted document {max(late):.2f} s after the save"
        assert any(gone not in r["docs"] for r in records if r["t"] > saved)


def test_the_builder_catches_up_before_it_writes_or_saves_again(case: StrategyCase, tmp_path: Path) -> None:
    """The builder lets go; another worker writes; the builder's next save or write keeps that."""
    builder, path, _ = _writer(case, tmp_path)
    builder.close()
    other = _reader(case, path, None)
    other.add_documents([Document("Ilse Marrow founded the guild in the harbour town of Vell.", id="other")])
    other.close()
    builder.save(path / case.name)  # an explicit save over the directory it built
    builder.add_documents([Document("Borin Quell charted the harbour of Vell.", id="mine")])
    builder.close()
    assert {"other", "mine"} <= _docs_of(_reader(case, path, None))


def test_a_save_elsewhere_is_a_copy_and_a_save_to_the_persist_directory_is_the_index(
    case: StrategyCase, tmp_path: Path
) -> None:
    """A backup leaves a worker on its own index; ``save(persist_dir)`` means ``persist_dir/<name>``."""
    builder, path, _ = _writer(case, tmp_path)
    own = path / case.name
    reader = _reader(case, path, 0.0)
    reader.save(tmp_path / "reader-backup")
    builder.save(tmp_path / "builder-backup")
    assert (reader.persist_path, builder.persist_path) == (own, own)
    assert not list(tmp_path.glob("*-backup/WRITER.lock"))  # a copy keeps no lock
    assert reader.refresh_interval == 0.0
    builder.add_documents([Document("Ilse Marrow founded the guild in Vell.", id="other")])
    builder.close()
    saved = time.monotonic()
    while "other" not in _docs_of(reader):  # it still follows its own index, not the backup
        assert time.monotonic() - saved < LOAD_ALLOWANCE_S, "the reader stopped following its index"
        time.sleep(0.02)
    assert "other" not in _docs_of(_reader(case, tmp_path / "builder-backup", None))
    reader.add_documents([Document("Borin Quell charted the harbour of Vell.", id="mine")])
    reader.close()
    builder.save(path)  # the persist directory, as LlamaIndex's persist(persist_dir) passes it
    builder.close()
    assert not (path / "CURRENT").exists()  # no second index beside the one loads read
    assert {"other", "mine"} <= _docs_of(_reader(case, path, None))


def test_a_writer_that_cannot_catch_up_writes_nothing(case: StrategyCase, tmp_path: Path) -> None:
    """A worker whose load of another's newer generation fails neither changes nor saves over it."""
    from core.writer_lock import CatchUpError

    writer, path, docs = _writer(case, tmp_path)
    worker = _reader(case, path, None)
    writer.delete_documents([str(docs[2].id)])
    writer.close()
    newer = (path / case.name / "CURRENT").read_text().strip()
    follower = worker._follower

    def broken(owner: Any) -> Any:
        raise ValueError("the index files are malformed (simulated); rebuild it")

    real, follower._reload = follower._reload, broken
    with pytest.raises(CatchUpError, match=f"{newer}.*could not load.*simulated"):
        worker.add_documents([Document("Borin Quell charted the harbour of Vell.", id="mine")])
    with pytest.raises(CatchUpError, match="nothing was changed"):
        worker.save(path)
    assert (path / case.name / "CURRENT").read_text().strip() == newer
    assert not (path / case.name / "WRITER.lock").exists()  # the lock it took is let go
    follower._reload = real
    worker.add_documents([Document("Borin Quell charted the harbour of Vell.", id="mine")])
    worker.close()
    assert _docs_of(_reader(case, path, None)) == {*(str(d.id) for d in docs), "mine"} - {str(docs[2].id)}


def test_a_change_saves_into_its_own_directory_whatever_folders_appear_in_it(
    case: StrategyCase, tmp_path: Path
) -> None:
    builder, path, _ = _writer(case, tmp_path)
    own = path / case.name
    (own / case.name).mkdir()  # a folder named like the strategy, inside its own directory
    before = (own / "CURRENT").read_text().strip()
    builder.add_documents([Document("Borin Quell charted the harbour of Vell.", id="mine")])
    builder.close()
    assert builder.persist_path == own
    assert (own / "CURRENT").read_text().strip() != before
    assert not (own / case.name / "CURRENT").exists()
    assert "mine" in _docs_of(_reader(case, path, None))


@pytest.mark.filterwarnings("ignore:CURRENT in .* names gen-000009, which is missing:RuntimeWarning")
def test_current_naming_a_missing_generation_is_recovered_and_written_over(
    case: StrategyCase, tmp_path: Path
) -> None:
    """A load falls back to the newest complete generation; the next write is no false alarm."""
    writer, path, _ = _writer(case, tmp_path)
    writer.close()
    own = path / case.name
    (own / "CURRENT").write_text("gen-000009\n")  # a hand-edited or half-copied directory
    worker = _reader(case, path, None)
    assert worker.refresh() is False  # nothing newer than what the load fell back to
    worker.add_documents([Document("Borin Quell charted the harbour of Vell.", id="mine")])
    worker.close()
    assert (own / "CURRENT").read_text().strip() == worker.generation
    assert "mine" in _docs_of(_reader(case, path, None))
    other = _reader(case, path, None)  # another worker writes until that name is real
    while (own / "CURRENT").read_text().strip() != "gen-000009":
        name = str(other.generation)
        other.add_documents([Document(f"Ilse Marrow sailed to Vell in {name}.", id=name)])
    other.close()
    assert worker.refresh() is True  # a real generation of that name is loaded
    worker.add_documents([Document("Arvel Dalmor sailed from Vell.", id="again")])
    worker.close()
    assert {"mine", "again", "gen-000008"} <= _docs_of(_reader(case, path, None))


def test_a_damaged_index_in_a_persist_directory_says_what_is_wrong(
    case: StrategyCase, tmp_path: Path
) -> None:
    from core.persist import CorruptIndexError

    writer, path, docs = _writer(case, tmp_path)
    writer.delete_documents([str(docs[0].id)])  # a save after a delete keeps one generation
    writer.close()
    own = path / case.name
    manifest = own / (own / "CURRENT").read_text().strip() / "manifest.json"
    manifest.write_bytes(manifest.read_bytes()[:11])
    with pytest.raises(CorruptIndexError, match=r"manifest\.json is truncated"):
        _reader(case, path, None)


def test_a_relative_directory_stays_put_when_the_process_changes_directory(
    case: StrategyCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    builder = case.build(
        synthetic_documents(4), embedder=wiring_embedder(), persist_directory="idx", **case.wiring_kwargs()
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    builder.add_documents([Document("Borin Quell charted the harbour of Vell.", id="mine")])
    builder.close()
    assert not (tmp_path / "elsewhere" / "idx").exists()
    assert "mine" in _docs_of(_reader(case, tmp_path / "idx", None))


@pytest.mark.filterwarnings("ignore::core.strategies.lifecycle.InMemoryStoreWarning")
def test_a_save_never_writes_over_another_kind_of_index(case: StrategyCase, tmp_path: Path) -> None:
    """One persist directory holds several strategies' indexes; a save or load picks its own kind."""
    writer, path, _ = _writer(case, tmp_path)
    writer.close()
    other = next(c for c in STRATEGIES if c.name != case.name)
    foreign = other.build(synthetic_documents(3), embedder=wiring_embedder(), **other.wiring_kwargs())
    mine = case.build(synthetic_documents(3), embedder=wiring_embedder(), **case.wiring_kwargs())
    foreign.save(path)  # path holds no other.name index: saved in path itself
    foreign.save(tmp_path / "solo")
    assert (path / "CURRENT").is_file()
    loaded = _reader(case, path, None)
    assert loaded.persist_path == path / case.name  # its own kind, not the index in path
    with pytest.raises(ValueError, match=f"holds a {other.name} index; save this {case.name} index"):
        mine.save(tmp_path / "solo")
    assert mine.persist_path is None
    assert not (tmp_path / "solo" / case.name).exists()


@pytest.mark.filterwarnings("ignore::core.strategies.lifecycle.InMemoryStoreWarning")
def test_a_failed_first_save_keeps_no_lock(
    case: StrategyCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.strategies import lifecycle

    rag = case.build(synthetic_documents(3), embedder=wiring_embedder(), **case.wiring_kwargs())

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(lifecycle, "save_index", full)
        with pytest.raises(OSError, match="No space"):
            rag.save(tmp_path / "a")
    assert rag.persist_path is None
    assert not (tmp_path / "a" / "WRITER.lock").exists()
    rag.save(tmp_path / "a")
    assert rag.persist_path == tmp_path / "a"


@pytest.mark.filterwarnings("ignore::core.strategies.lifecycle.InMemoryStoreWarning")
def test_a_new_build_never_hides_inside_a_saved_index(case: StrategyCase, tmp_path: Path) -> None:
    """A persist directory that is itself an index is refused: a build there would never be loaded."""
    other = next(c for c in STRATEGIES if c.name != case.name)
    for kind, directory in ((case, tmp_path / "mine"), (other, tmp_path / "other")):
        kind.build(synthetic_documents(3), embedder=wiring_embedder(), **kind.wiring_kwargs()).save(directory)
    before = {p: sorted(x.name for x in p.iterdir()) for p in (tmp_path / "mine", tmp_path / "other")}
    with pytest.raises(FileExistsError, match=f"is itself a saved {case.name} index"):
        case.build(
            synthetic_documents(5),
            embedder=wiring_embedder(),
            persist_directory=tmp_path / "mine",
            **case.wiring_kwargs(),
        )
    with pytest.raises(FileExistsError, match=f"is itself a saved {other.name} index"):
        case.build(
            synthetic_documents(5),
            embedder=wiring_embedder(),
            persist_directory=tmp_path / "other",
            store=ChunkStore.ephemeral(f"given-{case.name}"),
            **case.wiring_kwargs(),
        )
    assert {p: sorted(x.name for x in p.iterdir()) for p in before} == before  # nothing written


@pytest.mark.filterwarnings("ignore::core.strategies.lifecycle.InMemoryStoreWarning")
def test_a_load_names_the_kind_a_strategy_folder_holds(case: StrategyCase, tmp_path: Path) -> None:
    """``P/<name>`` holding another strategy's index is named as such, not reported as no index."""
    other = next(c for c in STRATEGIES if c.name != case.name)
    foreign = other.build(synthetic_documents(3), embedder=wiring_embedder(), **other.wiring_kwargs())
    foreign.save(tmp_path / "P" / case.name)
    with pytest.raises(ValueError, match=f"holds a {other.name} index, not a {case.name} one"):
        _reader(case, tmp_path / "P", None)


def _reader_one_generation_behind(
    case: StrategyCase, tmp_path: Path
) -> tuple[Any, list[Document], list[Document]]:
    """A reader, then a writer's save it has not switched to: ``(reader, its documents, the added ones)``."""
    writer, path, docs = _writer(case, tmp_path)
    reader = _reader(case, path, None)
    late = synthetic_documents(2, prefix="late")
    writer.add_documents(late)
    return reader, docs, late


def test_a_copy_saved_while_the_object_switches_holds_one_generation(
    case: StrategyCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A switch to a newer generation waits for a copy's snapshot, as it waits for a query."""
    reader, docs, late = _reader_one_generation_behind(case, tmp_path)
    real = type(reader)._index_files
    switched: list[bool] = []

    def index_files(self: Any) -> dict[str, bytes]:
        if self is reader and not switched:  # mid-snapshot: the table is read, the rest not yet
            refresh = threading.Thread(target=lambda: switched.append(reader.refresh()))
            refresh.start()
            refresh.join(0.5)
        return real(self)

    monkeypatch.setattr(type(reader), "_index_files", index_files)
    reader.save(tmp_path / "copy")
    monkeypatch.undo()
    deadline = time.monotonic() + 10
    while not switched and time.monotonic() < deadline:
        time.sleep(0.01)
    assert switched == [True], "the switch ran after the snapshot"
    copy = _reader(case, tmp_path / "copy", None)  # its files agree with each other
    assert _docs_of(copy) == {str(d.id) for d in docs}  # the generation the copy began with
    assert _docs_of(reader) == {str(d.id) for d in [*docs, *late]}


def test_a_copys_write_holds_back_no_switch(
    case: StrategyCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the snapshot holds a switch back: while the copy is written, the object switches and serves."""
    from core.strategies import lifecycle

    reader, docs, late = _reader_one_generation_behind(case, tmp_path)
    real, writing, release = lifecycle.save_index, threading.Event(), threading.Event()

    def slow_save(directory: Path, *args: Any, **kwargs: Any) -> Any:
        if Path(directory).name == "copy":
            writing.set()
            assert release.wait(30), "the test never released the copy's write"
        return real(directory, *args, **kwargs)

    monkeypatch.setattr(lifecycle, "save_index", slow_save)
    copier = threading.Thread(target=reader.save, args=(tmp_path / "copy",))
    copier.start()
    try:
        assert writing.wait(30)
        switched: list[bool] = []
        refresh = threading.Thread(target=lambda: switched.append(reader.refresh()))
        refresh.start()
        refresh.join(10)
        assert switched == [True], "the switch waited for the copy's write"
        assert _docs_of(reader) == {str(d.id) for d in [*docs, *late]}
    finally:
        release.set()
        copier.join(30)
    monkeypatch.undo()
    assert _docs_of(_reader(case, tmp_path / "copy", None)) == {str(d.id) for d in docs}


def test_a_rebuild_over_another_collection_is_refused(case: StrategyCase, tmp_path: Path) -> None:
    """A load of the directory would open the collection its index records, not the new one."""
    writer, path, _ = _writer(case, tmp_path)
    writer.close()
    other = ChunkStore.persistent(tmp_path / "elsewhere", f"app-{case.name}")
    with pytest.raises(ValueError, match="would be loaded with the old one"):
        case.build(
            synthetic_documents(4, prefix="new"),
            embedder=wiring_embedder(),
            store=other,
            persist_directory=path,
            **case.wiring_kwargs(),
        )
    assert other.count() == 0
    assert len(_docs_of(_reader(case, path, None))) == 6


def test_a_reader_follows_a_save_made_through_a_wrapped_collection(
    case: StrategyCase, tmp_path: Path
) -> None:
    """A worker that passed the collection itself (LangChain ``load(store=Chroma)``) saves no findable
    location; a reader that found its store through the manifest keeps its own."""
    app = ChunkStore.persistent(tmp_path / "appdb", f"app-{case.name}")
    docs = synthetic_documents(4)
    kwargs = case.wiring_kwargs()
    case.build(
        docs, embedder=wiring_embedder(), store=app, persist_directory=tmp_path / "idx", **kwargs
    ).close()
    reader = _reader(case, tmp_path / "idx", None)
    other = case.load(
        tmp_path / "idx", embedder=wiring_embedder(), store=ChunkStore(app.collection), **kwargs
    )
    late = synthetic_documents(1, prefix="late")
    other.add_documents(late)
    other.close()
    assert reader.refresh()
    more = synthetic_documents(1, prefix="more")
    reader.add_documents(more)
    assert _docs_of(reader) == {str(d.id) for d in [*docs, *late, *more]}


def test_a_rebuild_after_the_folder_moved_is_checked_against_the_moved_collection(
    case: StrategyCase, tmp_path: Path
) -> None:
    """The collection compared is the one a load would open (``moved/chroma``), not the recorded path."""
    writer, path, _ = _writer(case, tmp_path)
    name = writer.store.name
    writer.close()
    moved = tmp_path / "moved"
    path.rename(moved)
    fresh = synthetic_documents(2, prefix="new")
    store = ChunkStore.persistent(moved / "chroma", name)
    rebuilt = case.build(
        fresh, embedder=wiring_embedder(), store=store, persist_directory=moved, **case.wiring_kwargs()
    )
    rebuilt.close()
    assert {str(d.id) for d in fresh} <= _docs_of(_reader(case, moved, None))
