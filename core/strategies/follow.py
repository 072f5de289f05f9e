"""Readers that follow the one writer: a loaded index switches to each new generation.

An index opened with ``load(path)`` records the generation it read. At most every
``refresh_interval`` seconds a query reads the directory's ``CURRENT`` pointer (one small
file); when it names a newer generation, a background thread loads it beside the one in
use (nothing re-embedded; the same store, embedder and models) and then switches: queries
in flight finish on the generation they started on, new queries wait the few microseconds
of the switch and run on the new one. A failed or partial load (a save being pruned, a
collection the writer is changing) keeps the old generation, logs why on the
``bridge_rag.refresh`` logger, and is retried later (backing off, up to a minute, while it
keeps failing). :meth:`Follows.refresh`
does the same at once, in the caller's thread.

A writer (the object holding the directory's writer lock) never reloads its own saves; an
object that becomes a writer first catches up with what another writer saved.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

from core.persist import current_generation
from core.writer_lock import CatchUpError, IndexLockedError, WriterLock, holds_lock, release_locks_of

__all__ = ["DEFAULT_REFRESH_INTERVAL", "Follower", "Follows", "check_refresh_interval", "follows_writer"]

#: Seconds between two checks of ``CURRENT`` by a loaded index (None or 0: see ``load``).
DEFAULT_REFRESH_INTERVAL = 1.0
_LOCK_POLL_SECONDS = 0.05  # between two tries of a writer lock another writer holds

logger = logging.getLogger("bridge_rag.refresh")

F = TypeVar("F", bound=Callable[..., Any])
_OWN = ("_follower", "_query_gate", "_write_mutex")  # what a switch keeps: follower, gate, mutex
_MAX_BACKOFF_S = 60.0  # longest wait before retrying a generation that failed to load


def check_refresh_interval(value: object) -> float | None:
    """Validates a ``refresh_interval`` (seconds; None turns automatic refresh off).

    Raises:
        TypeError: Not a number.
        ValueError: Negative or not finite.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"refresh_interval must be a number of seconds or None, got {type(value).__name__}")
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"refresh_interval must be >= 0 seconds (None: no automatic refresh), got {value}")
    return float(value)


class _Gate:
    """Queries pass freely; a switch waits for the queries in flight and holds new ones back."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._switching = False
        self._local = threading.local()

    @contextmanager
    def query(self) -> Iterator[None]:
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            with self._cond:
                while self._switching:
                    self._cond.wait()
                self._active += 1
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            if depth == 0:
                with self._cond:
                    self._active -= 1
                    if self._active == 0:
                        self._cond.notify_all()

    def switch(self, apply: Callable[[], None]) -> None:
        with self.exclusive():
            apply()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Holds new queries back, waits for those in flight, and runs the block alone.

        Take it before any lock a query may also take (a strategy's ``_lock``), never inside one.

        Raises:
            RuntimeError: Called from inside a query of the same object (it would wait forever).
        """
        if getattr(self._local, "depth", 0):
            raise RuntimeError("an index cannot be changed from inside one of its own queries")
        with self._cond:
            while self._switching:  # one change at a time
                self._cond.wait()
            self._switching = True
            while self._active:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._switching = False
                self._cond.notify_all()


class Follower:
    """Follows one index directory on behalf of one loaded strategy.

    Args:
        owner: The strategy (held weakly).
        directory: Its index directory (where ``CURRENT`` lives).
        interval: Seconds between automatic checks; None: only :meth:`refresh`.
        reload: Given the owner, loads the directory's current generation as a new strategy
            object (with the owner's store, embedder and models).
    """

    def __init__(
        self, owner: Any, directory: Path, interval: float | None, reload: Callable[[Any], Any]
    ) -> None:
        self.directory = directory
        self.interval = interval
        self.gate: _Gate = owner._gate()
        self.last_error: BaseException | None = None
        self.switches = 0
        self.loaded_for: str | None = None  # what CURRENT named at the last load
        self.failures = 0  # consecutive failed loads: the next automatic try backs off
        self._owner = weakref.ref(owner)
        self._reload = reload
        self._loading = threading.Lock()
        self._next_check = time.monotonic() + (interval or 0.0)

    def check(self) -> None:
        """Called before a query: at most once per interval, look at ``CURRENT``."""
        if self.interval is None:
            return
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + self.interval
        owner = self._owner()
        if owner is None or not self._newer(owner, current_generation(self.directory)):
            return
        if holds_lock(owner, self.directory) or self._loading.locked():
            return
        threading.Thread(target=self.refresh, name="bridge-rag-refresh", daemon=True).start()

    def _newer(self, owner: Any, current: str | None) -> bool:
        """Whether ``CURRENT`` names a generation the owner has not loaded yet.

        A ``CURRENT`` naming a missing generation loads the newest complete one instead (crash
        recovery): once loaded, it is not loaded again while that generation is missing.
        """
        if current is None or current == getattr(owner, "_generation", None):
            return False
        return current != self.loaded_for or (self.directory / current).is_dir()

    def refresh(self, *, force: bool = False) -> bool:
        """Loads and switches to the directory's current generation when it is newer.

        Args:
            force: Also when the owner holds the writer lock (a new writer catching up).

        Returns:
            True when the owner switched to another generation.
        """
        with self._loading:
            owner = self._owner()
            if owner is None:
                return False
            current = current_generation(self.directory)
            if not self._newer(owner, current):
                return False
            if not force and holds_lock(owner, self.directory):
                return False
            try:
                fresh = self._reload(owner)
            except Exception as exc:  # keep serving the old generation; retried later
                self.last_error = exc
                self.failures += 1
                backoff = min(_MAX_BACKOFF_S, (self.interval or 0.0) * 2.0**self.failures)
                self._next_check = max(self._next_check, time.monotonic() + backoff)
                logger.warning(
                    "bridge-rag: could not load generation %s of %s (%s: %s); still serving %s",
                    current,
                    self.directory,
                    type(exc).__name__,
                    exc,
                    getattr(owner, "_generation", None),
                )
                return False
            if getattr(fresh, "_generation", None) == getattr(owner, "_generation", None):
                self.loaded_for = current  # CURRENT names a missing generation: the same one loads
                return False
            kept = (*_OWN, *getattr(owner, "kept_on_switch", ()))
            state = {key: value for key, value in vars(fresh).items() if key not in kept}
            self.gate.switch(lambda: vars(owner).update(state))
            self.last_error, self.loaded_for = None, current
            self.failures = 0
            self.switches += 1
            logger.info("bridge-rag: %s now serves %s", self.directory, getattr(owner, "_generation", None))
            return True

    def catch_up(self) -> None:
        """Loads the directory's newer generation before its owner, now the writer, changes it.

        Raises:
            CatchUpError: The newer generation could not be loaded: writing now would drop it.
        """
        before = self.last_error
        self.refresh(force=True)
        cause = self.last_error
        if cause is None or cause is before:  # loaded, or nothing newer to load
            return
        raise CatchUpError(
            f"{self.directory} holds generation {current_generation(self.directory)}, saved by another "
            f"worker, which this object could not load ({type(cause).__name__}: {cause}); writing now "
            "would drop it, so nothing was changed. Fix the cause and retry, or load the index anew"
        ) from cause


class Follows:
    """Mixin of the strategies: their index directory's writer lock and live refresh.

    ``close()`` and the lock taken before a change, ``refresh()`` and the automatic
    refresh of a loaded index; the strategy sets ``persist_path``.
    """

    persist_path: Path | None
    #: Attributes a switch to another generation keeps (what no saved file holds).
    kept_on_switch: tuple[str, ...] = ()
    _follower: Follower | None = None
    _generation: str | None = None

    def _follow(
        self, directory: Path, generation: str, interval: float | None, reload: Callable[[Any], Any]
    ) -> None:
        """Records that this object serves ``generation`` of ``directory`` and starts following it.

        Called by ``load``; ``reload(self)`` loads the directory anew.
        """
        directory = Path(directory).absolute()  # a later chdir moves no autosave
        self.persist_path = directory
        self._generation = generation
        self._follower = Follower(self, directory, check_refresh_interval(interval), reload)

    @property
    def refresh_interval(self) -> float | None:
        """Seconds between automatic checks for a new generation (None: off or not loaded)."""
        return self._follower.interval if self._follower is not None else None

    @property
    def generation(self) -> str | None:
        """The index generation this object serves (``"gen-000004"``; None: never saved or loaded)."""
        return self._generation

    def _gate(self) -> _Gate:
        """The gate between this object's queries and its changes (made on first use)."""
        gate: _Gate | None = self.__dict__.get("_query_gate")
        if gate is None:  # first use: setdefault is atomic, so racing threads share one gate
            gate = self.__dict__.setdefault("_query_gate", _Gate())
        return gate

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Runs a change of the in-memory index alone: queries in flight finish first, new ones wait.

        A query therefore never sees half of a change (rows appended to one array but not yet
        to another). Keep the block short: compute what is added (chunks, embeddings,
        entities) before it, and only swap it in inside it.
        """
        with self._gate().exclusive():
            yield

    def refresh(self) -> bool:
        """Switches to the newest saved generation of the index directory, if there is one.

        Returns:
            True when a newer generation was loaded and is now served; False when there is
            none, the object was not loaded from a directory, it is the directory's writer,
            or the load failed (logged; the old generation is kept).
        """
        follower = self._follower
        return follower.refresh() if follower is not None else False

    def close(self) -> None:
        """Releases this object's writer lock on its index directory (if it holds one).

        A writer keeps the lock from its first change until it is closed, garbage-collected
        or its process exits; readers never take it.
        """
        release_locks_of(self)

    def _hold_writer_lock(self, wait: float = 0.0) -> None:
        """Takes (or keeps) the writer lock of the index directory before any change.

        A reader becoming the writer first loads what another writer saved since it loaded.

        Args:
            wait: Seconds to keep trying while another writer holds the lock (0: fail at once).

        Raises:
            core.writer_lock.IndexLockedError: Another writer holds it (still, after ``wait``).
        """
        if self.persist_path is None:
            return
        deadline = time.monotonic() + wait
        held = holds_lock(self, self.persist_path)
        while True:
            try:
                lock = WriterLock.acquire(self.persist_path, self)
                break
            except IndexLockedError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(_LOCK_POLL_SECONDS)
        self._catch_up(lock, held)

    def _catch_up(self, lock: WriterLock, held: bool) -> None:
        """Loads what another worker saved since; on failure lets go of a lock just taken.

        Raises:
            CatchUpError: The newer generation could not be loaded.
        """
        follower = self._follower
        if follower is None or follower.directory.resolve() != lock.directory:
            return
        try:
            follower.catch_up()
        except BaseException:
            if not held:
                lock.release()
            raise

    def _holds_writer_lock(self) -> bool:
        """Whether this object holds the writer lock of its index directory."""
        return self.persist_path is not None and holds_lock(self, self.persist_path)


def follows_writer(method: F) -> F:
    """Decorates a query method: check for a new generation, then run inside the gate.

    The gate lets queries run side by side and keeps them apart from a change of the index
    (:meth:`Follows._changing`) and from a switch to a new generation.
    """

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        follower = self.__dict__.get("_follower")
        if follower is not None:
            follower.check()
        with self._gate().query():
            return method(self, *args, **kwargs)

    return cast(F, wrapper)
