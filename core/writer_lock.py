"""One writer per index directory: a lock file naming its owner, with stale-lock detection.

Any number of processes may load and query an index directory; only one may change it
(build into it, add, delete, save). The first change a strategy makes to a directory takes
``DIR/WRITER.lock``, created atomically (``O_CREAT | O_EXCL``), holding the owner's pid,
host, process start time and a random token; the strategy keeps it until it is closed,
garbage-collected or its process exits. A second writer (another process, or another
strategy object in the same process) gets :class:`IndexLockedError` naming the owner
*before* it touches Chroma or the index files, so the index is never half-written by two.

A lock left by a process that died (killed, crashed) is recognised: same host, and the pid
is gone or now belongs to a process that started at another time. Such a lock is replaced.
A lock from another host cannot be checked from here; the error says how to remove it
once that writer is known to be gone.

A writer that dies between creating the file and writing its record leaves it empty (or,
on a crash mid-write, garbled). Such a lock cannot name its owner, so its age decides: younger
than :data:`UNREADABLE_GRACE` seconds (by the file's modification time) it may be a writer
creating it this instant and counts as held; older, it is stale and replaced. A lock file this
process may not read at all (another user's) is never broken.

Replacing a stale lock is race-free: the file is first renamed to a unique name (exactly one
process wins the rename), then checked to be the very file judged stale; a lock taken by a
new writer in between is put back.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "LOCK_NAME",
    "UNREADABLE_GRACE",
    "CatchUpError",
    "IndexLockedError",
    "WriterLock",
    "holds_lock",
    "lock_owner",
    "owner_gone",
    "owner_known_running",
    "owner_record",
    "release_locks_of",
]

#: The lock file's name inside an index directory.
LOCK_NAME = "WRITER.lock"

#: Seconds an empty or unreadable lock file counts as held (a writer may be between creating
#: it and writing its record); older, it was left by a writer that crashed there and is stale.
UNREADABLE_GRACE = 10.0

_HELD: dict[Path, WriterLock] = {}
_HELD_LOCK = threading.Lock()


class IndexLockedError(RuntimeError):
    """Another writer holds the index directory's lock."""


class CatchUpError(RuntimeError):
    """A writer could not load what another worker saved since: it changes and saves nothing.

    Raised where :class:`IndexLockedError` is (a change or a save of an index directory), so
    one ``except`` handles both ways a writer is kept from writing.
    """


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (Linux ``/proc``; None elsewhere or when gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _alive(pid: int, started: str | None) -> bool:
    """Whether the process that wrote a lock (pid + start time) still runs on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    if started is not None:
        now = _start_time(pid)
        if now is not None and now != started:
            return False  # the pid was reused by a newer process
    return True


def owner_record() -> dict[str, Any]:
    """This process as the owner of a lock: its pid, host and start time (None off Linux)."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": _start_time(os.getpid())}


def owner_gone(owner: Mapping[str, Any]) -> bool:
    """Whether the process an :func:`owner_record` names is known to be gone.

    It is when it ran on this host and its pid is free, or now belongs to a process that
    started at another time. An owner on another host (or a record without a pid) is never
    known to be gone from here.
    """
    if owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    started = owner.get("started")
    return not _alive(pid, started if isinstance(started, str) else None)


def owner_known_running(owner: Mapping[str, Any]) -> bool:
    """Whether the process an :func:`owner_record` names is known to still run.

    Only on this host, and only with its start time: without one, a pid taken over by a
    newer process cannot be told apart, so neither this nor :func:`owner_gone` holds.
    """
    pid, started = owner.get("pid"), owner.get("started")
    if owner.get("host") != socket.gethostname() or not isinstance(pid, int) or not isinstance(started, str):
        return False
    return _alive(pid, started)


def _parse(raw: bytes) -> dict[str, Any] | None:
    """The owner record in a lock file's bytes; None when empty or not a JSON object."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    return data if isinstance(data, dict) else None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return _parse(path.read_bytes())
    except OSError:
        return None


def lock_owner(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The owner recorded in a directory's lock file (None when unlocked or unreadable)."""
    return _read(Path(directory) / LOCK_NAME)


class WriterLock:
    """The writer lock of one index directory, held by this process for one owner object.

    Use :meth:`acquire`; the lock is released by :meth:`release`, when the owner is
    garbage-collected, or at interpreter exit.
    """

    def __init__(self, directory: Path, token: str) -> None:
        self.directory = directory
        self.path = directory / LOCK_NAME
        self.token = token
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._owner: weakref.ref[Any] | None = None

    @classmethod
    def acquire(cls, directory: str | os.PathLike[str], owner: object) -> WriterLock:
        """Takes the lock of ``directory`` for ``owner`` (a strategy), or returns the one it holds.

        Args:
            directory: The index directory (created when missing).
            owner: The object that writes; the lock lives as long as it does.

        Returns:
            The held lock.

        Raises:
            IndexLockedError: Another live writer holds it (its pid and host are named).
        """
        root = Path(directory).resolve()
        with _HELD_LOCK:
            held = _HELD.get(root)
            if held is not None:
                if held._owned_by(owner):
                    return held
                raise IndexLockedError(
                    f"the index directory {str(root)!r} already has a writer in this process (another "
                    "strategy object); write through that object, or close() it first"
                )
            root.mkdir(parents=True, exist_ok=True)
            token = secrets.token_hex(8)
            lock = cls(root, token)
            lock._create()
            lock._finalizer = weakref.finalize(owner, _release, root, token)
            lock._owner = weakref.ref(owner)
            _HELD[root] = lock
            return lock

    def _owned_by(self, owner: object) -> bool:
        return self._owner is not None and self._owner() is owner

    def _create(self) -> None:
        record = {
            **owner_record(),
            "token": self.token,
            "since": datetime.now(UTC).replace(microsecond=0).isoformat(),
        }
        payload = json.dumps(record).encode("utf-8")
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if not self._clear_stale():
                    raise IndexLockedError(_held_message(self.directory)) from None
                continue
            try:
                os.write(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            return
        raise IndexLockedError(_held_message(self.directory))

    def _clear_stale(self) -> bool:
        """Removes the lock file when its writer is gone; True when it was removed (or vanished).

        A readable lock is stale when its writer ran on this host and is gone; an empty or
        unreadable one when it is older than :data:`UNREADABLE_GRACE`.
        """
        try:
            judged = self.path.stat()
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return True
        except OSError:
            return False  # not ours to read (another user's writer): never broken from here
        owner = _parse(raw)
        if owner is None:
            if time.time() - judged.st_mtime < UNREADABLE_GRACE:
                return False  # a writer may be between creating the file and writing its record
            return self._displace(lambda moved: _same_file(moved.stat(), judged) and _read(moved) is None)
        if not owner_gone(owner):
            return False
        return self._displace(lambda moved: _read(moved) == owner)

    def _displace(self, still_stale: Callable[[Path], bool]) -> bool:
        """Removes the lock file judged stale, unless another writer took the lock meanwhile.

        The file is renamed to a unique name first: of several processes clearing the same
        stale lock, one wins the rename and the others find it gone and retry. The renamed
        file is then checked with ``still_stale``; if it is not the file that was judged (the
        stale lock was cleared and a new writer created its own between the judging and the
        rename), it is put back.

        Returns:
            True when the lock file was removed (or had vanished): creating it may be retried.
        """
        stale = self.path.with_name(f"{LOCK_NAME}.stale-{secrets.token_hex(4)}")
        try:
            os.replace(self.path, stale)  # one process wins the rename; the others retry
        except FileNotFoundError:
            return True
        try:
            gone = still_stale(stale)
        except OSError:
            gone = False
        if not gone:
            # Another writer re-took the lock between our judging and our rename: give it back.
            with contextlib.suppress(OSError):
                os.replace(stale, self.path)
            return False
        stale.unlink(missing_ok=True)
        return True

    def release(self) -> None:
        """Releases the lock (only if this process still holds it with this token)."""
        if self._finalizer is not None:
            self._finalizer.detach()
        _release(self.directory, self.token)


def holds_lock(owner: object, directory: str | os.PathLike[str]) -> bool:
    """Whether ``owner`` holds the writer lock of ``directory`` in this process."""
    held = _HELD.get(Path(directory).resolve())
    return held is not None and held._owned_by(owner)


def check_no_writer(directory: str | os.PathLike[str]) -> None:
    """Refuses, without taking anything, when a live writer holds the lock of ``directory``.

    For work that must not start while another writer runs (a rebuild that replaces data the
    writer uses); the lock itself is taken later, by :meth:`WriterLock.acquire`.

    Raises:
        IndexLockedError: A live writer holds it (its pid and host are named).
    """
    root = Path(directory).resolve()
    owner = lock_owner(root)
    if owner is not None and not owner_gone(owner):
        raise IndexLockedError(_locked_message(root, owner))


def release_locks_of(owner: object) -> int:
    """Releases every writer lock ``owner`` holds in this process; returns how many."""
    with _HELD_LOCK:
        mine = [lock for lock in _HELD.values() if lock._owned_by(owner)]
    for lock in mine:
        lock.release()
    return len(mine)


def _release(directory: Path, token: str) -> None:
    with _HELD_LOCK:
        held = _HELD.get(directory)
        if held is not None and held.token == token:
            del _HELD[directory]
    owner = lock_owner(directory)
    if owner is not None and owner.get("token") == token and owner.get("pid") == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            (directory / LOCK_NAME).unlink()


def _same_file(now: os.stat_result, judged: os.stat_result) -> bool:
    """Whether a stat describes the same, unchanged file as an earlier one."""
    return (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) == (
        judged.st_dev,
        judged.st_ino,
        judged.st_size,
        judged.st_mtime_ns,
    )


def _held_message(directory: Path) -> str:
    """Why the lock of ``directory`` cannot be taken, read from its lock file now."""
    path = directory / LOCK_NAME
    try:
        judged = path.stat()
        raw = path.read_bytes()
    except FileNotFoundError:
        return (
            f"the writer lock of the index directory {str(directory)!r} kept changing hands while "
            "this writer tried to take it; retry"
        )
    except OSError as err:
        return (
            f"the index directory {str(directory)!r} has a writer lock {str(path)!r} this process "
            f"cannot read ({err}); it may belong to a writer run by another user: wait for it, or "
            "delete the file once no writer is running"
        )
    owner = _parse(raw)
    if owner is None:
        age = max(0.0, time.time() - judged.st_mtime)
        return (
            f"the index directory {str(directory)!r} has an empty or unreadable writer lock "
            f"{str(path)!r}, {age:.1f} s old: a writer may be creating it this instant. Retry in "
            f"a few seconds; a lock still empty or unreadable after {UNREADABLE_GRACE:g} s was "
            "left by a writer that crashed and is replaced"
        )
    return _locked_message(directory, owner)


def _locked_message(directory: Path, owner: dict[str, Any]) -> str:
    who = f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')!r}"
    since = f" since {owner['since']}" if owner.get("since") else ""
    return (
        f"the index directory {str(directory)!r} is being written by {who}{since}; one writer per "
        "index directory: send changes through that process, or wait until it closes. If that "
        f"writer is gone (it ran on another host), delete {str(directory / LOCK_NAME)!r}"
    )


@atexit.register
def _release_all() -> None:  # pragma: no cover - runs at interpreter exit
    for root, lock in list(_HELD.items()):
        _release(root, lock.token)
