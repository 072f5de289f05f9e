"""One writer per index directory: two writers get a clear error, a dead writer's lock is stale.

Wiring tests (fake embedder, rule-based extraction) over every strategy of
:data:`tests.reliability.cases.STRATEGIES`: two strategy objects in one process, two
processes adding at the same moment, a writer killed with SIGKILL while it holds the lock,
and a lock left by another host. After each, the index loads intact and holds exactly the
documents the winning writer added.

Then the lock file alone: an empty or garbled lock (a writer that crashed between creating it
and writing its record) is held within :data:`core.writer_lock.UNREADABLE_GRACE` and stale after
it, several processes clearing the same stale lock leave exactly one winner, and a lock re-taken
by a new writer while it was being cleared is put back.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import core.writer_lock
from core.types import Document
from core.writer_lock import LOCK_NAME, IndexLockedError, WriterLock, lock_owner, owner_record
from tests.reliability.cases import STRATEGIES, StrategyCase, synthetic_documents, wiring_embedder


class _Owner:
    """A stand-in writer (anything that can be weakly referenced)."""


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=STRATEGIES, ids=str)
def case(request: pytest.FixtureRequest) -> StrategyCase:
    param: StrategyCase = request.param
    return param


def _built(case: StrategyCase, tmp_path: Path) -> Path:
    """An index under ``tmp_path / "idx"`` (its embedded Chroma beside it), lock released."""
    built = case.build(
        synthetic_documents(6),
        embedder=wiring_embedder(),
        persist_directory=tmp_path / "idx",
        **case.wiring_kwargs(),
    )
    assert (tmp_path / "idx" / case.name / LOCK_NAME).exists()  # the builder is the writer
    built.close()
    assert not (tmp_path / "idx" / case.name / LOCK_NAME).exists()
    return tmp_path / "idx"


def _load(case: StrategyCase, path: Path) -> Any:
    return case.load(path, embedder=wiring_embedder(), **case.wiring_kwargs())


def _doc(doc_id: str) -> Document:
    return Document(f"{doc_id} founded the Ortolan Guild in Brackwater in 1830.", id=doc_id)


def test_two_writers_in_one_process(case: StrategyCase, tmp_path: Path) -> None:
    path = _built(case, tmp_path)
    first, second = _load(case, path), _load(case, path)
    first.add_documents([_doc("first")])
    with pytest.raises(IndexLockedError, match=rf"pid {os.getpid()}|already has a writer"):
        second.add_documents([_doc("second")])
    with pytest.raises(IndexLockedError):
        second.delete_documents([next(iter(case.live_documents(second)))])
    first.add_documents([_doc("first-again")])  # the holder keeps writing
    first.close()
    second.add_documents([_doc("second")])  # released: the other may write now
    second.close()
    reloaded = _load(case, path)
    assert {"first", "first-again", "second"} <= case.live_documents(reloaded)
    assert reloaded.retrieve("Who founded the Ortolan Guild?", k=3)


def test_readers_never_take_the_lock(case: StrategyCase, tmp_path: Path) -> None:
    path = _built(case, tmp_path)
    writer = _load(case, path)
    writer.add_documents([_doc("w")])
    reader = _load(case, path)  # loading and querying need no lock
    assert reader.retrieve("Who founded the Ortolan Guild?", k=2)
    assert lock_owner(path / case.name)["pid"] == os.getpid()  # type: ignore[index]
    writer.close()


def _spawn(case: StrategyCase, path: Path, doc_id: str, go: Path, hold: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.lock_writer", case.name, str(path), doc_id, str(go), hold],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _wait_for(proc: subprocess.Popen[str], word: str, timeout: float = 120.0) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(word):
            return
        if not line and proc.poll() is not None:
            raise AssertionError(
                f"writer exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            )
    raise AssertionError(f"writer did not print {word!r} in time")


def test_two_processes_adding_at_once(case: StrategyCase, tmp_path: Path) -> None:
    path = _built(case, tmp_path)
    go = tmp_path / "go"
    procs = {d: _spawn(case, path, d, go, "1.5") for d in ("alpha", "beta")}
    for proc in procs.values():
        _wait_for(proc, "loaded")
    go.touch()
    outcomes = {d: (p.wait(timeout=120), p.communicate()[0]) for d, p in procs.items()}
    codes = sorted(code for code, _ in outcomes.values())
    assert codes == [0, 3], outcomes
    winner = next(d for d, (code, _) in outcomes.items() if code == 0)
    loser = next(d for d in outcomes if d != winner)
    assert "pid" in outcomes[loser][1]
    assert "one writer per index directory" in outcomes[loser][1]
    reloaded = _load(case, path)
    live = case.live_documents(reloaded)
    assert winner in live
    assert loser not in live
    assert not reloaded.store.get(where={"doc_id": loser}, include_embeddings=False).ids  # Chroma untouched
    assert not (path / case.name / LOCK_NAME).exists()  # the winner released it on exit


def test_a_killed_writers_lock_is_stale(case: StrategyCase, tmp_path: Path) -> None:
    path = _built(case, tmp_path)
    go = tmp_path / "go"
    go.touch()
    proc = _spawn(case, path, "doomed", go, "inf")
    _wait_for(proc, "added")
    owner = lock_owner(path / case.name)
    assert owner is not None
    assert owner["pid"] == proc.pid
    assert owner["host"] == socket.gethostname()
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)  # reaps it and closes its pipes
    assert (path / case.name / LOCK_NAME).exists()  # left behind by the dead writer
    survivor = _load(case, path)
    assert "doomed" in case.live_documents(survivor)  # what it saved before dying is intact
    survivor.add_documents([_doc("survivor")])  # the stale lock is recognised and replaced
    assert lock_owner(path / case.name)["pid"] == os.getpid()  # type: ignore[index]
    survivor.close()
    assert {"doomed", "survivor"} <= case.live_documents(_load(case, path))


def test_a_lock_from_another_host_is_never_broken(tmp_path: Path) -> None:
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": 1, "host": "elsewhere.example", "token": "x"}))
    owner = _Owner()
    with pytest.raises(IndexLockedError, match=r"elsewhere\.example.*delete"):
        WriterLock.acquire(tmp_path, owner)
    (tmp_path / LOCK_NAME).unlink()
    lock = WriterLock.acquire(tmp_path, owner)
    assert WriterLock.acquire(tmp_path, owner) is lock  # the holder gets its own lock back
    del owner  # garbage-collected owner: the lock goes with it
    import gc

    gc.collect()
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_reused_pid_is_stale(tmp_path: Path) -> None:
    """A lock whose pid now belongs to another process (different start time) is stale."""
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": "1", "token": "old"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(record))
    owner = _Owner()
    lock = WriterLock.acquire(tmp_path, owner)
    assert lock_owner(tmp_path)["token"] == lock.token  # type: ignore[index]
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


# ---------------------------------------------------------------- empty or garbled lock files

GARBLED = b'\x00\xff{"pid": 12'  # a crash mid-write: neither UTF-8 nor JSON


def _aged(path: Path, seconds: float) -> None:
    """Sets a file's modification time ``seconds`` into the past."""
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.mark.parametrize("content", [b"", GARBLED, b"[1, 2]"], ids=["empty", "garbled", "not-an-object"])
def test_an_unreadable_lock_within_the_grace_is_held(tmp_path: Path, content: bytes) -> None:
    (tmp_path / LOCK_NAME).write_bytes(content)  # a writer may be about to write its record
    with pytest.raises(IndexLockedError, match=r"empty or unreadable writer lock.*creating it.*Retry"):
        WriterLock.acquire(tmp_path, _Owner())
    assert (tmp_path / LOCK_NAME).read_bytes() == content  # left alone


@pytest.mark.parametrize("content", [b"", GARBLED, b"[1, 2]"], ids=["empty", "garbled", "not-an-object"])
def test_an_unreadable_lock_past_the_grace_is_stale(tmp_path: Path, content: bytes) -> None:
    (tmp_path / LOCK_NAME).write_bytes(content)
    _aged(tmp_path / LOCK_NAME, core.writer_lock.UNREADABLE_GRACE + 5)
    owner = _Owner()
    lock = WriterLock.acquire(tmp_path, owner)
    record = lock_owner(tmp_path)
    assert record is not None
    assert (record["token"], record["pid"]) == (lock.token, os.getpid())
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]  # no renamed leftovers
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_the_grace_period_is_read_when_the_lock_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / LOCK_NAME).write_bytes(b"")
    _aged(tmp_path / LOCK_NAME, 60)
    monkeypatch.setattr(core.writer_lock, "UNREADABLE_GRACE", 3600.0)
    with pytest.raises(IndexLockedError, match=r"60\.\d s old.*after 3600 s"):
        WriterLock.acquire(tmp_path, _Owner())
    monkeypatch.setattr(core.writer_lock, "UNREADABLE_GRACE", 0.2)
    (tmp_path / LOCK_NAME).write_bytes(b"")  # fresh again
    with pytest.raises(IndexLockedError, match="empty or unreadable"):
        WriterLock.acquire(tmp_path, _Owner())
    time.sleep(0.3)
    owner = _Owner()
    lock = WriterLock.acquire(tmp_path, owner)
    assert lock_owner(tmp_path)["token"] == lock.token  # type: ignore[index]
    lock.release()


def test_a_lock_this_process_cannot_read_is_never_broken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock of another user's writer (permission denied) is held however old it is."""
    path = tmp_path / LOCK_NAME
    path.write_bytes(b"")
    _aged(path, 3600)
    real = Path.read_bytes

    def denied(self: Path) -> bytes:
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(IndexLockedError, match=r"cannot read.*another user.*delete the file"):
        WriterLock.acquire(tmp_path, _Owner())
    monkeypatch.undo()
    assert path.exists()


def _swapping_replace(monkeypatch: pytest.MonkeyPatch, lock: Path, newcomer: bytes) -> list[bytes]:
    """Makes the next rename of ``lock`` find a new writer's lock (``newcomer``) in its place.

    That is what happens when another process cleared the same stale lock and a new writer
    created its own between this process judging the old one and renaming it away.
    """
    real = os.replace
    swapped: list[bytes] = []

    def replace(src: Any, dst: Any) -> None:
        if Path(src) == lock and not swapped:
            lock.unlink()
            lock.write_bytes(newcomer)
            swapped.append(newcomer)
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    return swapped


def test_a_lock_retaken_while_a_stale_one_is_cleared_is_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = tmp_path / LOCK_NAME
    lock.write_bytes(b"")
    _aged(lock, 3600)
    newcomer = json.dumps({**owner_record(), "token": "newcomer"}).encode()
    swapped = _swapping_replace(monkeypatch, lock, newcomer)
    with pytest.raises(IndexLockedError, match=rf"pid {os.getpid()}"):
        WriterLock.acquire(tmp_path, _Owner())
    monkeypatch.undo()
    assert swapped  # the swap did happen
    assert lock.read_bytes() == newcomer  # the new writer's lock is back in place
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]


def test_a_new_writers_empty_lock_is_not_taken_for_a_dead_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead writer's lock replaced by one being created (still empty) is put back, not deleted."""
    lock = tmp_path / LOCK_NAME
    dead = {"pid": os.getpid(), "host": socket.gethostname(), "started": "1", "token": "old"}  # pid reused
    lock.write_text(json.dumps(dead))
    swapped = _swapping_replace(monkeypatch, lock, b"")
    with pytest.raises(IndexLockedError, match="empty or unreadable"):
        WriterLock.acquire(tmp_path, _Owner())
    monkeypatch.undo()
    assert swapped
    assert lock.read_bytes() == b""  # still there, still the newcomer's
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]


def _racer(directory: Path, go: Path, stop: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.lock_racer", str(directory), str(go), str(stop)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _first_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=30)
        raise AssertionError(f"taker exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
    return line.strip()


@pytest.mark.parametrize("content", [b"", GARBLED], ids=["empty", "garbled"])
def test_processes_racing_on_a_stale_unreadable_lock_leave_one_winner(tmp_path: Path, content: bytes) -> None:
    for round_ in range(3):
        directory = tmp_path / f"idx{round_}"
        directory.mkdir()
        (directory / LOCK_NAME).write_bytes(content)
        _aged(directory / LOCK_NAME, core.writer_lock.UNREADABLE_GRACE + 5)
        go, stop = tmp_path / f"go{round_}", tmp_path / f"stop{round_}"
        procs = [_racer(directory, go, stop) for _ in range(4)]
        try:
            assert all(_first_line(p) == "ready" for p in procs)
            go.touch()
            outcomes = [_first_line(p) for p in procs]
            winners = [p for p, line in zip(procs, outcomes, strict=True) if line == "won"]
            assert len(winners) == 1, outcomes
            assert all(line.startswith("locked: ") for line in outcomes if line != "won"), outcomes
            assert lock_owner(directory)["pid"] == winners[0].pid  # type: ignore[index]
            assert sorted(p.name for p in directory.iterdir()) == [LOCK_NAME]  # no renamed leftovers
        finally:
            stop.touch()
            for proc in procs:
                proc.communicate(timeout=60)
        assert sorted(proc.returncode for proc in procs) == [0, 3, 3, 3]
        assert not (directory / LOCK_NAME).exists()  # the winner released it on exit
