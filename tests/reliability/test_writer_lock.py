"""One writer per index directory: two writers get a clear error, a dead writer's lock is stale.

Wiring tests (fake embedder, rule-based extraction) over every strategy of
:data:`tests.reliability.cases.STRATEGIES`: two strategy objects in one process, two
processes adding at the same moment, a writer killed with SIGKILL while it holds the lock,
and a lock left by another host. After each, the index loads intact and holds exactly the
documents the winning writer added.
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

from core.types import Document
from core.writer_lock import LOCK_NAME, IndexLockedError, WriterLock, lock_owner
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
