"""``ChunkStore``: the project's one door to Chroma.

Chroma is the source of truth for chunk text, metadata and embeddings; every strategy reads
and writes chunks through this class, so validation (ids, embedding shapes, metadata types)
happens in one place and with messages that say what to fix.

Embeddings are always passed explicitly: collections are opened with
``embedding_function=None``, so Chroma's default embedding function (which downloads a
model) never runs. Clients are created with anonymized telemetry off.

Example:
    >>> store = ChunkStore.ephemeral("doc_example")  # doctest: +SKIP
    >>> store.add(["a"], ["hello"], np.ones((1, 4), np.float32), [{"doc_id": "d"}])  # doctest: +SKIP
    >>> store.query(np.ones(4, np.float32), k=1)  # doctest: +SKIP
    [('a', 1.0, 'hello', {'doc_id': 'd'})]
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from core.writer_lock import owner_gone, owner_record

__all__ = [
    "BUILD_CLAIM_TIMEOUT",
    "BUILD_HEARTBEAT",
    "DEFAULT_HNSW",
    "FORGET_MARKER_PREFIX",
    "SIBLING_TAG",
    "BuildInProgressError",
    "ChunkStore",
    "StoredChunks",
    "sanitize_metadata",
    "sanitize_value",
]

#: HNSW settings for new collections. Cosine space, so ``1 - distance`` is the cosine
#: similarity. The large ``ef_construction`` / ``ef_search`` make the approximate search
#: practically exact at the corpus sizes this project targets, so the same query over the
#: same data returns the same neighbours from run to run (Chroma's defaults, 100 / 100 / 16,
#: can miss true neighbours and make benchmark numbers wobble).
DEFAULT_HNSW: Mapping[str, Any] = MappingProxyType(
    {"space": "cosine", "ef_construction": 200, "ef_search": 200, "max_neighbors": 32}
)

#: Batch size used when the client cannot tell its own maximum (a wrapped collection).
FALLBACK_BATCH_SIZE = 1000

_NAME_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SHOWN = 5  # how many offending ids an error message lists
_CHROMA_DB_FILE = "chroma.sqlite3"  # what an embedded Chroma keeps in its data directory

FloatMatrix = npt.NDArray[np.float32]


#: Collection metadata key marking a collection bridge-rag made beside another (its name).
SIBLING_TAG = "bridge_rag_sibling_of"

#: Seconds a build into a sibling collection (:meth:`ChunkStore.sibling` with ``replace=True``)
#: keeps its claim without a heartbeat. A build whose claim was not refreshed for longer is
#: taken for abandoned (its process crashed, or its host is gone) and may be replaced.
BUILD_CLAIM_TIMEOUT = 120.0

#: Seconds between the heartbeats that keep a running build's claim fresh
#: (:meth:`ChunkStore.build_claim`); well below :data:`BUILD_CLAIM_TIMEOUT`.
BUILD_HEARTBEAT = 15.0

# The build claim: collection metadata keys of a sibling collection being built.
_CLAIM_TOKEN = "bridge_rag_build"  # a random token naming one build
_CLAIM_STATE = "bridge_rag_build_state"  # "building", then "complete" or "failed"
_CLAIM_STARTED = "bridge_rag_build_started"  # when the build started (ISO 8601, UTC)
_CLAIM_BEAT = "bridge_rag_build_beat"  # when the builder was last heard from (seconds since the epoch)
_CLAIM_PID = "bridge_rag_build_pid"  # the builder's process ...
_CLAIM_HOST = "bridge_rag_build_host"  # ... its host ...
_CLAIM_PROC = "bridge_rag_build_proc"  # ... and its start time (absent off Linux)
_REPLACE_ATTEMPTS = 5  # tries when concurrent builds keep replacing a sibling under this one

#: Prefix of the ids :meth:`ChunkStore.forget_deleted` deletes to checkpoint Chroma's HNSW
#: index (ids no chunk has: the delete of a missing id is a no-op that Chroma still logs).
FORGET_MARKER_PREFIX = "bridge-rag-forget-"

#: Chroma's default ``hnsw:sync_threshold``: log records between two HNSW checkpoints.
_SYNC_THRESHOLD = 1000

# What ChunkStore.forget_deleted runs in a child process, with Chroma's data directory as its
# argument: SQLite's FTS5 "optimize" (the full-text index drops what deleted rows left in its
# segments), then Chroma's own `chroma vacuum` (prunes the log, runs SQLite's VACUUM), checked
# by the row Chroma adds to its maintenance_log when the vacuum completed (its CLI reports a
# failure on stderr, with exit status 0). A child process, because the `chroma` CLI may end
# its process, and because two copies of SQLite in one process (Python's and Chroma's) must
# not share a database file: POSIX locks are per process.
_COMPACT_SCRIPT = """
import sqlite3, sys
path = sys.argv[1]

def vacuums():
    db = sqlite3.connect(path + "/chroma.sqlite3", timeout=30.0, isolation_level=None)
    try:
        return db.execute("SELECT count(*) FROM maintenance_log WHERE operation = 'vacuum'").fetchone()[0]
    finally:
        db.close()

db = sqlite3.connect(path + "/chroma.sqlite3", timeout=30.0, isolation_level=None)
try:
    found = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'embedding_fulltext_search'"
    ).fetchone()
    if found:
        db.execute("INSERT INTO embedding_fulltext_search(embedding_fulltext_search) VALUES ('optimize')")
finally:
    db.close()
before = vacuums()
import chromadb_rust_bindings
chromadb_rust_bindings.cli(["chroma", "vacuum", "--path", path, "--force"])
sys.stdout.flush()
if vacuums() <= before:
    sys.exit("chroma vacuum did not complete")
"""


class BuildInProgressError(RuntimeError):
    """Another build is writing the sibling collection, or took it over from this build."""


@dataclass
class StoredChunks:
    """Chunks read back from the store.

    Attributes:
        ids: Chunk ids.
        texts: Chunk texts (``""`` where Chroma holds no document).
        metadatas: Metadata dicts (``{}`` where Chroma holds none).
        embeddings: ``float32`` C-contiguous ``(n, d)`` matrix, row ``i`` for ``ids[i]``; None
            when embeddings were not requested.
    """

    ids: list[str]
    texts: list[str]
    metadatas: list[dict[str, Any]]
    embeddings: FloatMatrix | None

    def __len__(self) -> int:
        return len(self.ids)


def _scalar(value: Any) -> tuple[bool, Any]:
    """Classifies one metadata value: ``(is_scalar, cleaned)``; ``cleaned`` None = drop it."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool | str):
        return True, value
    if isinstance(value, int):
        # Chroma stores integers as int64 and silently turns bigger ones into floats.
        return True, value if _INT64_MIN <= value <= _INT64_MAX else str(value)
    if isinstance(value, float):
        return True, value if math.isfinite(value) else None
    return False, None


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset | tuple | np.ndarray):
        return list(value)
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def _json_text(value: Any) -> str:
    """JSON text for containers; plain ``str`` for other objects (no extra quotes)."""
    if not isinstance(value, Mapping | list | tuple | set | frozenset):
        return str(value)
    try:
        return json.dumps(value, default=_json_default, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # odd dict keys, circular references
        return str(value)


def sanitize_value(value: Any) -> Any:
    """Returns the Chroma-safe form of one metadata value, or None to drop it.

    The rules are those of :func:`sanitize_metadata`; metadata filters read values through
    it, so a filter sees a value as Chroma stores it.
    """
    if value is None:
        return None
    is_scalar, cleaned = _scalar(value)
    if is_scalar:
        return cleaned
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple):
        items: list[Any] = []
        for item in value:
            if isinstance(item, np.generic):
                item = item.item()
            if isinstance(item, float) and not math.isfinite(item):
                continue
            if not isinstance(item, bool | str | int | float) or (
                isinstance(item, int) and not _INT64_MIN <= item <= _INT64_MAX
            ):
                return _json_text(value)  # None, nested containers, objects, huge ints
            items.append(item)
        if not items:
            return None  # Chroma rejects empty lists
        types = {type(item) for item in items}
        if types == {int, float}:
            return [float(item) for item in items]
        return items if len(types) == 1 else _json_text(value)
    return _json_text(value)


def _reserved_key(key: str) -> bool:
    # Chroma refuses "#" and "$" keys, and keeps "chroma:" ones out of what it returns.
    return not key or key[0] in "#$" or key.startswith("chroma:")


def sanitize_metadata(metadata: Mapping[Any, Any] | None) -> dict[str, Any]:
    """Turns arbitrary metadata into what Chroma accepts.

    Rules: ``str``, ``int``, ``float`` and ``bool`` values are kept (numpy scalars become
    Python ones; integers outside int64 become strings, since Chroma would round them to
    floats); None and NaN/inf floats are dropped; non-empty lists (or tuples, arrays) of one
    scalar type are kept (int/float mixes become floats, NaN/inf items are dropped, lists
    left empty are dropped); containers that do not fit (dicts, sets, mixed or nested lists)
    become JSON text (``json.dumps`` with ``str`` for unknown objects), and any other object
    becomes ``str(obj)``. Keys are coerced to ``str``; keys Chroma reserves (empty, starting
    with ``#`` or ``$``, or with ``chroma:``, which it stores but never returns) are dropped.
    When two keys coerce to the same string, the later one wins.

    Nothing is ever evaluated or unpickled: objects are only turned into text with ``str``.

    Args:
        metadata: A mapping (or None).

    Returns:
        A new dict; it may be empty (:meth:`ChunkStore.add` stores an empty dict as "no
        metadata", since Chroma rejects empty metadata dicts).
    """
    out: dict[str, Any] = {}
    for raw_key, value in (metadata or {}).items():
        key = str(raw_key)
        if _reserved_key(key):
            continue
        cleaned = sanitize_value(value)
        if cleaned is not None:
            out[key] = cleaned
    return out


def _check_collection_name(name: str) -> str:
    if not isinstance(name, str) or _NAME_RE.fullmatch(name) is None:
        raise ValueError(
            f"invalid Chroma collection name {name!r}: it must be 3-512 characters from "
            "[a-zA-Z0-9._-], starting and ending with a letter or digit"
        )
    return name


def _check_ids(ids: Sequence[str]) -> list[str]:
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of strings, not a single string")
    out = list(ids)
    for i in out:
        if not isinstance(i, str):
            raise TypeError(f"ids must be strings, got {type(i).__name__} ({i!r})")
        if not i:
            raise ValueError("ids must be non-empty strings")
    return out


def _shown(ids: Sequence[str]) -> str:
    more = f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
    return ", ".join(repr(i) for i in ids[:_SHOWN]) + more


def _check_embeddings(embeddings: Any, n: int) -> FloatMatrix:
    arr = np.asarray(embeddings)
    if arr.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D array (n, d), got shape {arr.shape}")
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"embeddings must hold real numbers, got dtype {arr.dtype}")
    if arr.shape[0] != n:
        raise ValueError(f"got {n} ids but {arr.shape[0]} embedding rows")
    if n and arr.shape[1] == 0:
        raise ValueError("embeddings must have at least one dimension")
    matrix = np.ascontiguousarray(arr, dtype=np.float32)
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise ValueError(f"embedding row {row} contains NaN or infinity")
    return matrix


def _batches(n: int, size: int) -> list[tuple[int, int]]:
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def _client_of(collection: Any) -> Any:
    """A Chroma client over the same data as a wrapped collection (same settings, tenant, database).

    In-process clients with the same settings share their system, and an HTTP client with the
    same settings talks to the same server. None when the collection does not say.
    """
    settings = _client_settings(collection)
    if settings is None:
        return None
    from chromadb.api.client import Client

    return Client(
        tenant=getattr(collection, "tenant", "default_tenant"),
        database=getattr(collection, "database", "default_database"),
        settings=settings,
    )


def _client_settings(collection: Any) -> Any:
    """The settings of the Chroma client behind a collection, or None when it does not say."""
    api = getattr(collection, "_client", None)
    return api.get_settings() if api is not None and hasattr(api, "get_settings") else None


def _find_collection(client: Any, name: str) -> Any:
    """The collection ``name`` of ``client`` (its current state), or None when there is none."""
    from chromadb.errors import NotFoundError

    try:
        return client.get_collection(name, embedding_function=None)
    except NotFoundError:
        return None


def _new_claim(sibling_of: str) -> dict[str, Any]:
    """The metadata of a sibling collection created for a build of this process."""
    owner = owner_record()
    claim = {
        SIBLING_TAG: sibling_of,
        _CLAIM_TOKEN: secrets.token_hex(8),
        _CLAIM_STATE: "building",
        _CLAIM_STARTED: datetime.now(UTC).replace(microsecond=0).isoformat(),
        _CLAIM_BEAT: time.time(),
        _CLAIM_PID: owner["pid"],
        _CLAIM_HOST: owner["host"],
    }
    if owner["started"] is not None:
        claim[_CLAIM_PROC] = owner["started"]
    return claim


def _build_in_progress(metadata: Mapping[str, Any] | None) -> str | None:
    """Who is building into a collection, by its metadata; None when no build is in progress.

    None when the collection carries no claim (an older bridge-rag made it, or a build
    without ``replace``), its build is complete or failed, or its builder is gone: it ran on
    this host and its process is gone, or it has not beaten for :data:`BUILD_CLAIM_TIMEOUT`
    seconds (the hosts' clocks are assumed to agree to well within that).
    """
    claim = metadata or {}
    if claim.get(_CLAIM_STATE) != "building":
        return None
    pid, host = claim.get(_CLAIM_PID), claim.get(_CLAIM_HOST)
    if owner_gone({"pid": pid, "host": host, "started": claim.get(_CLAIM_PROC)}):
        return None
    beat = claim.get(_CLAIM_BEAT)
    if isinstance(beat, bool) or not isinstance(beat, int | float):
        return None  # not a claim this module wrote
    silent = time.time() - float(beat)
    if silent > BUILD_CLAIM_TIMEOUT:
        return None
    return (
        f"pid {pid} on host {host!r}, started at {claim.get(_CLAIM_STARTED, '?')}, "
        f"last heard from {max(silent, 0.0):.0f} s ago"
    )


def _in_progress_message(name: str, building: str) -> str:
    return (
        f"another build of the collection {name!r} ({building}) is in progress; wait for it to "
        "finish and retry, or build into a collection of your own (UMGRAG.from_store: pass "
        f"units_store=...). A build unheard from for {BUILD_CLAIM_TIMEOUT:g} s is taken for "
        "abandoned and replaced"
    )


class ChunkStore:
    """Chunks, their metadata and embeddings in one Chroma collection.

    Build one with :meth:`persistent` (embedded, on disk), :meth:`http` (a Chroma server),
    :meth:`ephemeral` (in memory, for tests), or wrap a collection you already have with
    ``ChunkStore(collection)``.

    Similarities are ``1 - distance``, which is the cosine similarity for collections in
    cosine space (the default here). A wrapped collection in another space still works, but
    its scores are then ``1 - (its distance)``.

    Args:
        collection: A ``chromadb`` Collection. Its embedding function is never called: every
            method passes embeddings explicitly.

    Attributes:
        collection: The wrapped Chroma collection.
        client: The Chroma client this store created, or None when wrapping a collection.
    """

    def __init__(self, collection: Any) -> None:
        self._collection: Any = collection
        self._client: Any = None
        self._owns_client = True
        self._location: dict[str, Any] = {"kind": "collection"}
        self._opener: Callable[[], ChunkStore] | None = None
        self._name: str | None = None
        self._open_lock = threading.Lock()
        self._claim: dict[str, Any] | None = None  # the build claim of a replaced sibling (see sibling)
        self._added: list[str] | None = None  # the ids added while recording_additions() runs
        self._index_owned = False  # an index opened this embedded Chroma in its own directory

    @property
    def collection(self) -> Any:
        """The wrapped Chroma collection (a deferred store opens it here, on first use)."""
        if self._collection is None:
            self._open_deferred()
        return self._collection

    @property
    def client(self) -> Any:
        """The Chroma client this store created, or None when wrapping a collection."""
        if self._collection is None:
            self._open_deferred()
        return self._client

    @client.setter
    def client(self, value: Any) -> None:
        self._client = value

    def _open_deferred(self) -> None:
        with self._open_lock:
            if self._collection is not None or self._opener is None:
                return
            opened = self._opener()
            self._client, self._owns_client = opened._client, opened._owns_client
            self._location = opened._location
            self._collection = opened._collection
            self._opener = None

    @classmethod
    def deferred(
        cls,
        opener: Callable[[], ChunkStore],
        name: str,
        location: Mapping[str, Any],
        *,
        index_owned: bool = False,
    ) -> ChunkStore:
        """A store whose collection is opened by ``opener`` on first use, not now.

        A loaded index answers queries from its own files, so a worker that only queries never
        imports chromadb or connects to a server; the first write (or any other use of the
        collection) opens it, and an error opening it surfaces then.

        Args:
            opener: Opens the store (e.g. ``lambda: ChunkStore.persistent(path, name, create=False)``).
            name: The collection's name.
            location: Where it lives (see :attr:`location`).
            index_owned: See :attr:`index_owned`.
        """
        store = cls(None)
        store._opener, store._name, store._location = opener, name, dict(location)
        store._index_owned = index_owned
        return store

    # ----------------------------------------------------------------- constructors

    @classmethod
    def _open(
        cls,
        client: Any,
        collection_name: str,
        *,
        create: bool,
        hnsw: Mapping[str, Any] | None,
        location: dict[str, Any],
        metadata: Mapping[str, Any] | None = None,
    ) -> ChunkStore:
        if create:
            configuration = {"hnsw": {**DEFAULT_HNSW, **(hnsw or {})}}
            collection = client.get_or_create_collection(
                collection_name,
                configuration=configuration,
                metadata=dict(metadata) if metadata else None,
                embedding_function=None,
            )
        else:
            from chromadb.errors import NotFoundError

            try:
                collection = client.get_collection(collection_name, embedding_function=None)
            except NotFoundError as err:
                raise ValueError(
                    f"no collection {collection_name!r} in the Chroma store {location}; "
                    "pass create=True to make one"
                ) from err
        store = cls(collection)
        store.client = client
        store._location = location
        return store

    @classmethod
    def persistent(
        cls,
        path: str | os.PathLike[str],
        collection_name: str = "bridge_rag",
        *,
        create: bool = True,
        hnsw: Mapping[str, Any] | None = None,
        index_owned: bool = False,
    ) -> ChunkStore:
        """Opens (or creates) a collection in an embedded, on-disk Chroma.

        Args:
            path: Chroma's data directory.
            collection_name: The collection's name.
            create: Create the directory and collection when missing; otherwise a missing
                one is an error.
            hnsw: HNSW settings merged over :data:`DEFAULT_HNSW`; only used when the
                collection is created (an existing collection keeps its own).
            index_owned: The Chroma is an index's own (see :attr:`index_owned`): set by the
                strategies for the one under their persist directory, not by an app.

        Returns:
            The store.

        Raises:
            ValueError: The name breaks Chroma's rules, or the collection is missing and
                ``create`` is False.
            FileNotFoundError: ``path`` holds no Chroma data and ``create`` is False (nothing is
                written there).
        """
        _check_collection_name(collection_name)
        chromadb, settings = _chromadb()
        directory = Path(path).absolute()
        if not create and not (directory / _CHROMA_DB_FILE).is_file():
            # Chroma would create an empty database in any directory it is pointed at.
            raise FileNotFoundError(
                f"no Chroma data at {str(directory)!r} (no {_CHROMA_DB_FILE}); pass create=True to make one"
            )
        client = chromadb.PersistentClient(path=str(directory), settings=settings)
        location = {"kind": "persistent", "path": str(directory)}
        store = cls._open(client, collection_name, create=create, hnsw=hnsw, location=location)
        store._index_owned = index_owned
        return store

    @classmethod
    def http(
        cls,
        host: str = "127.0.0.1",
        port: int = 8000,
        collection_name: str = "bridge_rag",
        *,
        create: bool = True,
        hnsw: Mapping[str, Any] | None = None,
        **client_kwargs: Any,
    ) -> ChunkStore:
        """Opens (or creates) a collection on a Chroma server.

        Args:
            host: Server host.
            port: Server port.
            collection_name: The collection's name.
            create: Create the collection when missing.
            hnsw: HNSW settings merged over :data:`DEFAULT_HNSW` for a new collection.
            **client_kwargs: Passed to ``chromadb.HttpClient`` (``ssl``, ``headers``, ...). A
                ``settings`` object is accepted; telemetry is switched off in it regardless.

        Returns:
            The store.

        Raises:
            ValueError: The name breaks Chroma's rules, or the collection is missing and
                ``create`` is False.
        """
        _check_collection_name(collection_name)
        chromadb, settings = _chromadb()
        given = client_kwargs.pop("settings", None)
        if given is not None:
            settings = given.model_copy(update={"anonymized_telemetry": False})
        client = chromadb.HttpClient(host=host, port=port, settings=settings, **client_kwargs)
        location = {"kind": "http", "host": host, "port": int(port)}
        return cls._open(client, collection_name, create=create, hnsw=hnsw, location=location)

    @classmethod
    def ephemeral(
        cls, collection_name: str = "bridge_rag", *, hnsw: Mapping[str, Any] | None = None
    ) -> ChunkStore:
        """Opens (or creates) a collection in an in-memory Chroma.

        All in-memory clients of one process share their data, so tests should use unique
        collection names.

        Args:
            collection_name: The collection's name.
            hnsw: HNSW settings merged over :data:`DEFAULT_HNSW` for a new collection.

        Returns:
            The store.

        Raises:
            ValueError: The name breaks Chroma's rules.
        """
        _check_collection_name(collection_name)
        chromadb, settings = _chromadb()
        client = chromadb.EphemeralClient(settings=settings)
        return cls._open(client, collection_name, create=True, hnsw=hnsw, location={"kind": "ephemeral"})

    def sibling(
        self,
        collection_name: str,
        *,
        hnsw: Mapping[str, Any] | None = None,
        replace: bool = False,
        create: bool = True,
    ) -> ChunkStore:
        """Opens (or creates) another collection of the same Chroma client.

        Strategies that store units of their own (UMG-RAG's sentence windows) over a
        collection they were given keep them here, beside it, rather than in it.

        With ``replace=True`` the collection is made anew for a build, and several processes
        (or threads with clients of their own) may try that at once over one Chroma. So the
        new collection carries a *build claim* in its metadata (a random token, the builder's
        pid and host, the start time and a heartbeat), and an existing one is only replaced
        when no build is in progress in it: its build finished or failed, or its builder is
        gone (same host and the pid is free, or no heartbeat for :data:`BUILD_CLAIM_TIMEOUT`
        seconds). Build inside :meth:`build_claim` of the returned store, which keeps the
        claim fresh and marks it complete at the end. Of two builds replacing the same
        collection at once, exactly one gets it (Chroma refuses to create a name twice); the
        other gets :class:`BuildInProgressError`.

        Args:
            collection_name: The other collection's name (never this store's own).
            hnsw: HNSW settings merged over :data:`DEFAULT_HNSW` for a new collection.
            replace: Make the collection anew for a build, deleting the one an earlier build
                left (only a collection tagged as this store's sibling is ever deleted).
            create: Make the collection when there is none (else that is a ``ValueError``).

        Returns:
            The store.

        Raises:
            ValueError: The name breaks Chroma's rules or is this store's, a collection of that
                name exists that is not this store's sibling, or the store's client cannot be
                reached (a wrapped collection without one).
            BuildInProgressError: ``replace`` and another build is writing the collection.
        """
        _check_collection_name(collection_name)
        client = self._reachable_client()
        if client is None:
            raise ValueError(
                f"cannot open a collection beside {self.name!r}: its Chroma client is unknown; "
                "pass the store to write to explicitly"
            )
        if collection_name == self.name:
            raise ValueError(f"a sibling of {self.name!r} needs another name")
        if replace:
            store = self._replace_sibling(client, collection_name, hnsw)
        else:
            existing = _find_collection(client, collection_name)
            if existing is not None:
                self._check_sibling(existing)
            store = ChunkStore._open(
                client,
                collection_name,
                create=create,
                hnsw=hnsw,
                location=self.location,
                metadata={SIBLING_TAG: self.name},
            )
        # The client belongs to this store (or to the caller): the sibling uses it, never closes it.
        store.client = client
        store._owns_client = False
        return store

    def made_beside(self) -> ChunkStore:
        """The collection this one was made beside by :meth:`sibling` (UMG-RAG's source).

        Raises:
            ValueError: This collection was not made by :meth:`sibling`, its client is
                unknown, or the other collection no longer exists.
        """
        name = (self.collection.metadata or {}).get(SIBLING_TAG)
        client = self._reachable_client()
        if not isinstance(name, str) or client is None:
            raise ValueError(
                f"the collection {self.name!r} was not made by bridge-rag beside another one, so the "
                "collection it was built from is unknown"
            )
        return self._existing(client, name)

    def current(self) -> ChunkStore | None:
        """This store, or the collection of its name that the app made anew since; None: gone.

        A Chroma collection deleted and made again under its name is another collection: a
        store over the old one fails. The new one shares this store's client.
        """
        from chromadb.errors import NotFoundError

        try:
            self.collection.count()
            return self
        except NotFoundError:
            client = self._reachable_client()
            if client is None or _find_collection(client, self.name) is None:
                return None
            return self._existing(client, self.name)

    def _reachable_client(self) -> Any:
        """The Chroma client behind this store (its own, or its collection's); None: unknown."""
        return self.client if self.client is not None else _client_of(self.collection)

    def _existing(self, client: Any, name: str) -> ChunkStore:
        """Another existing collection of ``client``, which stays this store's (never closed by it).

        Raises:
            ValueError: There is no collection ``name``.
        """
        store = ChunkStore._open(client, name, create=False, hnsw=None, location=self.location)
        store._owns_client = False
        return store

    def _check_sibling(self, collection: Any) -> None:
        """Refuses a collection that bridge-rag did not make beside this store."""
        if (collection.metadata or {}).get(SIBLING_TAG) != self.name:
            raise ValueError(
                f"the collection {collection.name!r} exists and was not made by bridge-rag beside "
                f"{self.name!r}; pass the store to write to explicitly, or delete that collection"
            )

    def _replace_sibling(self, client: Any, name: str, hnsw: Mapping[str, Any] | None) -> ChunkStore:
        """Makes the sibling ``name`` anew, carrying a build claim of this process.

        The old collection is first renamed (by its id) to a unique name and deleted under
        that name, so a collection another build has just created under ``name`` is never
        deleted; then ``name`` is created, which Chroma does only once: a build that finds it
        created meanwhile looks again and meets the other build's claim.
        """
        from chromadb.errors import NotFoundError

        claim = _new_claim(self.name)
        for _ in range(_REPLACE_ATTEMPTS):
            existing = _find_collection(client, name)
            if existing is not None:
                self._check_sibling(existing)
                building = _build_in_progress(existing.metadata)
                if building is not None:
                    raise BuildInProgressError(_in_progress_message(name, building))
                retired = f"bridge_rag_replaced_{secrets.token_hex(8)}"
                try:
                    existing.modify(name=retired)
                except NotFoundError:
                    continue  # another build replaced it meanwhile: look again
                with contextlib.suppress(NotFoundError):
                    client.delete_collection(retired)
            try:
                collection = client.create_collection(
                    name,
                    configuration={"hnsw": {**DEFAULT_HNSW, **(hnsw or {})}},
                    metadata=claim,
                    embedding_function=None,
                )
            except Exception:
                if _find_collection(client, name) is None:
                    raise
                continue  # another build created it first: look again (and meet its claim)
            store = ChunkStore(collection)
            store._location = self.location
            store._claim = claim
            return store
        raise BuildInProgressError(
            f"could not make the collection {name!r} anew: other builds kept replacing it at the "
            "same time; retry once they are done"
        )

    @contextlib.contextmanager
    def build_claim(self) -> Iterator[ChunkStore]:
        """Runs a build into this store under its build claim; marks it complete at the end.

        For a store from :meth:`sibling` with ``replace=True``: while the block runs, a
        background thread refreshes the claim's heartbeat every :data:`BUILD_HEARTBEAT`
        seconds, so a long build is never taken for an abandoned one. When the block ends
        the claim is marked complete (a later ``sibling(..., replace=True)`` replaces the
        collection, as a rebuild should), or failed when it raised (a retry may replace it at
        once). For any other store (or once the claim is settled) this is a no-op.

        Example:
            >>> units = store.sibling(f"{store.name}_units", replace=True)  # doctest: +SKIP
            >>> with units.build_claim():  # doctest: +SKIP
            ...     units.add(ids, texts, vectors, metadatas)

        Yields:
            This store.

        Raises:
            BuildInProgressError: Another build took the collection over while this one ran
                (this build went unheard from for :data:`BUILD_CLAIM_TIMEOUT` seconds): what
                this build wrote went with the collection, and nothing was written into the
                other build's collection.
        """
        claim, self._claim = self._claim, None  # settled once, by the outermost block
        if claim is None:
            yield self
            return
        stop = threading.Event()
        beat = threading.Thread(
            target=self._heartbeat, args=(claim, stop), name=f"build claim of {self.name}", daemon=True
        )
        beat.start()
        try:
            yield self
        except BaseException as err:
            stop.set()
            beat.join()
            try:
                lost = not self._settle_claim(claim, "failed")
            except Exception:  # Chroma unreachable: the claim expires by itself; the error says more
                lost = False
            if lost:
                raise BuildInProgressError(self._lost_claim_message(claim)) from err
            raise
        stop.set()
        beat.join()
        if not self._settle_claim(claim, "complete"):
            raise BuildInProgressError(self._lost_claim_message(claim))

    def _holds_claim(self, claim: Mapping[str, Any], state: str) -> bool:
        """Whether the collection named as this store's is still this store's, under ``claim``."""
        current = _find_collection(self.client, self.collection.name)
        if current is None or current.id != self.collection.id:
            return False
        metadata = current.metadata or {}
        return bool(metadata.get(_CLAIM_TOKEN) == claim[_CLAIM_TOKEN] and metadata.get(_CLAIM_STATE) == state)

    def _heartbeat(self, claim: Mapping[str, Any], stop: threading.Event) -> None:
        """Refreshes the claim until ``stop`` is set or the claim is lost (a background thread)."""
        while not stop.wait(BUILD_HEARTBEAT):
            try:
                if not self._holds_claim(claim, "building"):
                    return  # taken over: the end of build_claim reports it
                self.collection.modify(metadata={**claim, _CLAIM_BEAT: time.time()})
            except Exception:  # a missed beat (Chroma busy or unreachable) is retried
                continue

    def _settle_claim(self, claim: Mapping[str, Any], state: str) -> bool:
        """Marks the claim ``state`` ("complete" or "failed"); False when it was lost."""
        if not self._holds_claim(claim, "building"):
            return False
        self.collection.modify(metadata={**claim, _CLAIM_STATE: state, _CLAIM_BEAT: time.time()})
        # Chroma ignores a change to a deleted collection: read it back.
        return self._holds_claim(claim, state)

    def _lost_claim_message(self, claim: Mapping[str, Any]) -> str:
        name = self.collection.name
        current = _find_collection(self.client, name)
        building = None if current is None else _build_in_progress(current.metadata)
        now = f"; it is now built by {building}" if building else ""
        return (
            f"the build into the collection {name!r} (started at {claim[_CLAIM_STARTED]}) lost its "
            "claim: another build replaced the collection (which happens once a build goes unheard "
            f"from for {BUILD_CLAIM_TIMEOUT:g} s), or it was deleted{now}. What this build wrote went "
            "with the old collection; build again once the other build is done, or into a "
            "collection of your own (UMGRAG.from_store: pass units_store=...)"
        )

    # ----------------------------------------------------------------- description

    @property
    def in_memory(self) -> bool:
        """Whether the chunks live only in this process: an ephemeral client's, or a wrapped one's."""
        kind = self._location.get("kind")
        if kind != "collection" or self._collection is None:
            return kind == "ephemeral"
        settings = _client_settings(self._collection)
        return (
            settings is not None
            and not settings.is_persistent
            and "fastapi" not in str(settings.chroma_api_impl).lower()  # an HTTP client's server keeps them
        )

    @property
    def index_owned(self) -> bool:
        """Whether an index opened this embedded Chroma inside its own directory, and so owns it.

        True for the Chroma a strategy opens itself under its persist directory
        (``persist_directory/chroma``: a ``from_documents`` build given no store, a ``load``
        given none, ``bridge-rag index`` with embedded Chroma). After a save that followed a
        delete, such an index has :meth:`forget_deleted` compact it. False for every store an
        app passes in (embedded, a server, in memory): the app owns it, and its files are left
        as Chroma keeps them.
        """
        return self._index_owned

    @property
    def is_deferred(self) -> bool:
        """True for a :meth:`deferred` store whose collection is not open yet."""
        return self._collection is None and self._opener is not None

    @property
    def name(self) -> str:
        """The collection's name."""
        if self._collection is None and self._name is not None:
            return self._name
        return str(self.collection.name)

    @property
    def location(self) -> dict[str, Any]:
        """Where the data lives, as a JSON-ready dict.

        One of ``{"kind": "persistent", "path": ...}``, ``{"kind": "http", "host": ...,
        "port": ...}``, ``{"kind": "ephemeral"}`` or ``{"kind": "collection"}`` (a wrapped
        collection, whose whereabouts the store does not know).
        """
        return dict(self._location)

    def __repr__(self) -> str:
        return f"ChunkStore(name={self.name!r}, location={self._location!r})"

    def count(self) -> int:
        """Returns the number of chunks in the collection."""
        return int(self.collection.count())

    def dimension(self) -> int | None:
        """Returns the embedding dimension, read from one stored embedding; None when empty."""
        page = self.collection.get(limit=1, include=["embeddings"])
        embeddings = page.get("embeddings")
        if embeddings is None or len(embeddings) == 0:
            return None
        return len(embeddings[0])

    def close(self) -> None:
        """Releases the client this store created (a no-op for a wrapped collection).

        Other stores opened on the same path in this process share Chroma's system and stop
        working too.
        """
        if self._collection is None:  # a deferred store never opened
            self._opener = None
            return
        if self.client is not None and self._owns_client and hasattr(self.client, "close"):
            self.client.close()

    def _batch_size(self) -> int:
        if self.client is not None:
            try:
                return max(1, int(self.client.get_max_batch_size()))
            except Exception:  # an older server without the endpoint
                return FALLBACK_BATCH_SIZE
        return FALLBACK_BATCH_SIZE

    # ----------------------------------------------------------------- writing

    def add(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        embeddings: npt.NDArray[Any],
        metadatas: Sequence[Mapping[str, Any]],
        *,
        show_progress: bool = False,
    ) -> None:
        """Inserts new chunks.

        Everything is validated before anything is written, so a rejected call leaves the
        collection unchanged. Inserts go in batches of at most the client's maximum batch
        size (1000 when unknown). Metadata goes through :func:`sanitize_metadata`.

        Args:
            ids: Unique chunk ids, none of them already stored.
            texts: Chunk texts.
            embeddings: ``(n, d)`` real-valued matrix; stored as float32.
            metadatas: One mapping per chunk.
            show_progress: Show a progress bar.

        Raises:
            TypeError: An id or text is not a string.
            ValueError: Lengths differ, an id is repeated or already stored, an embedding row
                holds NaN/inf, or the dimension differs from the collection's.
        """
        id_list = _check_ids(ids)
        n = len(id_list)
        if len(texts) != n or len(metadatas) != n:
            raise ValueError(
                "ids, texts and metadatas must have the same length, "
                f"got {n}, {len(texts)} and {len(metadatas)}"
            )
        if len(set(id_list)) != n:
            counts = Counter(id_list)
            raise ValueError(f"duplicate ids: {_shown([i for i, c in counts.items() if c > 1])}")
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"texts must be strings, got {type(text).__name__}")
        matrix = _check_embeddings(embeddings, n)
        if n == 0:
            return
        stored = self.dimension()
        if stored is not None and stored != matrix.shape[1]:
            raise ValueError(f"embedding dimension {matrix.shape[1]} differs from the collection's {stored}")
        existing = self.existing(id_list)
        if existing:
            raise ValueError(f"ids already in the collection (delete them first): {_shown(existing)}")
        spans = _batches(n, self._batch_size())
        clean = [sanitize_metadata(m) or None for m in metadatas]
        with tqdm(total=n, desc="storing chunks", unit="chunk", disable=not show_progress) as bar:
            for start, end in spans:
                self.collection.add(
                    ids=id_list[start:end],
                    embeddings=matrix[start:end],
                    documents=list(texts[start:end]),
                    metadatas=clean[start:end],
                )
                if self._added is not None:
                    self._added.extend(id_list[start:end])
                bar.update(end - start)

    @contextlib.contextmanager
    def recording_additions(self) -> Iterator[list[str]]:
        """Collects the ids this object adds while the block runs, batch by batch as written.

        What a failed build wrote, and only that, so it can take it back (an app or another
        build writing to the same collection meanwhile keeps its rows).

        Yields:
            The list the added ids are appended to.
        """
        added: list[str] = []
        self._added = added
        try:
            yield added
        finally:
            self._added = None

    def existing(self, ids: Sequence[str]) -> list[str]:
        """The ids of ``ids`` that the collection holds (in the order given)."""
        id_list = _check_ids(ids)
        held: set[str] = set()
        for start, end in _batches(len(id_list), self._batch_size()):
            held.update(self.collection.get(ids=id_list[start:end], include=[])["ids"])
        return [i for i in id_list if i in held]

    def delete(self, ids: Sequence[str]) -> None:
        """Deletes chunks by id; ids that are not stored are ignored.

        Args:
            ids: The ids to delete.
        """
        id_list = _check_ids(ids)
        for start, end in _batches(len(id_list), self._batch_size()):
            self.collection.delete(ids=id_list[start:end])

    def delete_where(self, where: Mapping[str, Any]) -> int:
        """Deletes every chunk whose metadata matches a Chroma ``where`` filter.

        Args:
            where: A non-empty Chroma filter, e.g. ``{"doc_id": "d1"}``.

        Returns:
            How many chunks were deleted.

        Raises:
            ValueError: ``where`` is empty (use :meth:`delete` with explicit ids instead).
        """
        if not where:
            raise ValueError("where must be a non-empty filter; to delete everything, delete the collection")
        ids = self._ids_where(dict(where))
        self.delete(ids)
        return len(ids)

    def forget_deleted(self) -> None:
        """Makes Chroma's own files forget the rows deleted from this collection.

        After :meth:`delete`, the rows are gone from every query and ``get``, but an embedded
        Chroma (1.5) keeps copies in its files: its write-ahead log (the ``embeddings_queue``
        table of ``chroma.sqlite3``) keeps each added row (text, metadata, vector) until the
        collection's HNSW index is checkpointed past it, which happens every
        ``hnsw:sync_threshold`` writes (1,000 by default), and the delete's own log record
        names the ids; SQLite keeps deleted bytes in free pages; the full-text index
        (``embedding_fulltext_search*``) keeps the trigrams of deleted texts in its segments;
        the HNSW id map (``index_metadata.pickle``) keeps the ids until the next checkpoint.
        This uses Chroma's own means, in three steps:

        1. It deletes ``sync_threshold`` ids that no chunk has (:data:`FORGET_MARKER_PREFIX`):
           no-ops that Chroma logs, so it checkpoints the HNSW index (its id map is rewritten
           without the deleted ids) and prunes its log up to there. The log keeps one record,
           the last of those ids. This is Chroma's routine checkpoint, the one every
           ``sync_threshold`` writes trigger anyway.
        2. In a child process, SQLite's FTS5 ``optimize`` merges the full-text index into one
           segment, which drops what deleted rows left there (one SQLite transaction).
        3. There too, Chroma's ``chroma vacuum --path DIR --force``: prunes the log again and
           runs SQLite's ``VACUUM``, which rewrites the database without free pages (one
           transaction: an interrupted vacuum is rolled back on the next open).

        What stays: the HNSW binary files (``<segment uuid>/data_level0.bin``) keep, for each
        deleted vector, its unit-normalised float32 copy, marked deleted: no query or ``get``
        returns it, no id names it, and Chroma offers no way to compact it (a deleted
        collection's folder stays too): only a rebuild into a new Chroma directory drops it.

        A process killed during steps 2 or 3 leaves the database whole (Chroma rolls an
        interrupted vacuum back when it next opens it); only the compaction is left undone. The
        vacuum blocks this Chroma's reads and writes while it runs, and its time grows with the
        database (0.1 to 0.3 s for a 500-chunk index). Run it when no other process uses this
        Chroma directory (an index does it under its writer lock).

        Raises:
            ValueError: This is not an embedded, on-disk Chroma (a server's collection, an
                in-memory one): run it where the data lives, against its directory.
            RuntimeError: The compaction failed (the database was locked by another process,
                say); the collection is intact, the rows stay deleted, and a later call
                finishes the job.
        """
        directory = self._data_directory()
        if directory is None:
            raise ValueError(
                f"forget_deleted() needs an embedded, on-disk Chroma; {self!r} is not one: compact "
                "it where its files are (ChunkStore.persistent(path, name).forget_deleted() with "
                "the server stopped)"
            )
        self._checkpoint()
        done = subprocess.run(
            [sys.executable, "-c", _COMPACT_SCRIPT, str(directory)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            said = " ".join(f"{done.stdout}\n{done.stderr}".split())[-800:]
            raise RuntimeError(
                f"could not compact the Chroma files in {str(directory)!r} (exit status "
                f"{done.returncode}: {said}); the deleted rows are gone from the collection, but "
                "Chroma's files may still hold copies until forget_deleted() succeeds: run it "
                "again when no other process uses that Chroma"
            )

    def _data_directory(self) -> Path | None:
        """The data directory of an embedded, on-disk Chroma behind this store; None: not one."""
        if self._location.get("kind") == "persistent":
            return Path(str(self._location["path"]))
        if self._location.get("kind") != "collection":
            return None
        settings = _client_settings(self.collection)
        remote = settings is not None and "fastapi" in str(settings.chroma_api_impl).lower()
        if settings is None or not settings.is_persistent or remote:
            return None
        return Path(str(settings.persist_directory)).absolute()

    def _checkpoint(self) -> None:
        """Has Chroma checkpoint this collection's HNSW index: ``sync_threshold`` no-op deletes.

        Chroma counts every log record it applies to the index (a delete of a missing id
        included) and checkpoints once the count reaches the threshold.
        """
        config = getattr(self.collection, "configuration_json", None) or {}
        configured = (config.get("hnsw") or {}).get("sync_threshold")
        count = max(configured if isinstance(configured, int) else 0, _SYNC_THRESHOLD)
        token = secrets.token_hex(8)
        markers = [f"{FORGET_MARKER_PREFIX}{token}-{i}" for i in range(count)]
        if self.existing(markers):  # never a chunk's: a delete must not take a row
            raise RuntimeError(f"the collection {self.name!r} holds ids of the form {markers[0]!r}")
        for start, end in _batches(count, self._batch_size()):
            self.collection.delete(ids=markers[start:end])

    # ----------------------------------------------------------------- reading

    def pages(self, batch_size: int = 1000) -> Iterator[StoredChunks]:
        """The whole collection, page by page: ids, texts and metadata, no vectors.

        Pages are read with limit/offset while the collection may change: an item can be
        missed or seen twice when another writer deletes or adds meanwhile.
        """
        for page in self._raw_pages(None, ["documents", "metadatas"], batch_size):
            n = len(page["ids"])
            docs = page.get("documents") or [None] * n
            metas = page.get("metadatas") or [None] * n
            yield StoredChunks(
                ids=list(page["ids"]),
                texts=[d or "" for d in docs],
                metadatas=[dict(m or {}) for m in metas],
                embeddings=None,
            )

    def _raw_pages(
        self, where: dict[str, Any] | None, include: list[str], batch_size: int
    ) -> Iterator[Mapping[str, Any]]:
        """Chroma's ``get`` pages of the collection (or of what ``where`` matches), by limit/offset."""
        offset = 0
        while True:
            page = self.collection.get(where=where, limit=batch_size, offset=offset, include=include)
            yield page
            offset += len(page["ids"])
            if len(page["ids"]) < batch_size:
                return

    def _ids_where(self, where: dict[str, Any], batch_size: int = FALLBACK_BATCH_SIZE) -> list[str]:
        return [i for page in self._raw_pages(where, [], batch_size) for i in page["ids"]]

    def get(
        self,
        ids: Sequence[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        include_embeddings: bool = True,
        batch_size: int = 1000,
        missing_ok: bool = False,
    ) -> StoredChunks:
        """Reads chunks back.

        With ``ids=None`` the whole collection (or everything matching ``where``) is read in
        pages of ``batch_size`` using limit/offset, in Chroma's own order (insertion order
        for an embedded Chroma; stable while the collection is not modified, but not sorted).
        With ``ids``, results come back in the requested order (repeats included).

        Args:
            ids: The ids to read, or None for all.
            where: Optional Chroma metadata filter. With ``ids``, requested ids that exist but
                do not match the filter are left out.
            include_embeddings: Also read the embedding matrix.
            batch_size: Rows per Chroma request.
            missing_ok: Leave out requested ids that are not stored instead of raising.

        Returns:
            The chunks.

        Raises:
            KeyError: Some requested ids are not in the collection (the message lists them),
                unless ``missing_ok``.
            ValueError: ``batch_size`` is not positive.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        include = ["documents", "metadatas", *(["embeddings"] if include_embeddings else [])]
        where_arg = dict(where) if where else None
        rows: dict[str, tuple[str, dict[str, Any], Any]] = {}
        order: list[str] = []

        def take(page: Mapping[str, Any]) -> None:
            docs = page.get("documents") or [None] * len(page["ids"])
            metas = page.get("metadatas") or [None] * len(page["ids"])
            embs = page.get("embeddings") if include_embeddings else None
            for row, chunk_id in enumerate(page["ids"]):
                vector = embs[row] if embs is not None else None
                rows[chunk_id] = (docs[row] or "", dict(metas[row] or {}), vector)

        if ids is None:
            for page in self._raw_pages(where_arg, include, batch_size):
                order.extend(page["ids"])
                take(page)
        else:
            requested = _check_ids(ids)
            unique = list(dict.fromkeys(requested))
            for start, end in _batches(len(unique), batch_size):
                take(self.collection.get(ids=unique[start:end], where=where_arg, include=include))
            missing = [] if missing_ok else [i for i in unique if i not in rows]
            if missing and where_arg is not None:
                present: set[str] = set()
                for start, end in _batches(len(missing), batch_size):
                    present.update(self.collection.get(ids=missing[start:end], include=[])["ids"])
                missing = [i for i in missing if i not in present]
            if missing:
                raise KeyError(f"ids not in the collection: {_shown(missing)}")
            order = [i for i in requested if i in rows]

        matrix: FloatMatrix | None = None
        if include_embeddings:
            if order:
                matrix = np.ascontiguousarray(
                    np.stack([np.asarray(rows[i][2]) for i in order]), dtype=np.float32
                )
            else:
                matrix = np.zeros((0, self.dimension() or 0), dtype=np.float32)
        return StoredChunks(
            ids=list(order),
            texts=[rows[i][0] for i in order],
            metadatas=[dict(rows[i][1]) for i in order],
            embeddings=matrix,
        )

    def query(
        self, embedding: npt.NDArray[Any], k: int, *, where: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float, str, dict[str, Any]]]:
        """Finds the ``k`` nearest chunks to an embedding.

        Args:
            embedding: A ``(d,)`` (or ``(1, d)``) query vector.
            k: How many results; capped at :meth:`count`.
            where: Optional Chroma metadata filter.

        Returns:
            ``(id, similarity, text, metadata)`` tuples, most similar first; similarity is
            ``1 - distance`` (cosine similarity in cosine space). Empty for an empty
            collection.

        Raises:
            ValueError: ``k`` is not positive, or the vector is not 1-D, empty or not finite.
        """
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        vector = np.asarray(embedding, dtype=np.float32)
        if vector.ndim == 2 and vector.shape[0] == 1:
            vector = vector[0]
        if vector.ndim != 1 or vector.size == 0:
            raise ValueError(f"the query embedding must be a non-empty 1-D vector, got shape {vector.shape}")
        if not np.isfinite(vector).all():
            raise ValueError("the query embedding contains NaN or infinity")
        n = self.count()
        if n == 0:
            return []
        result = self.collection.query(
            query_embeddings=vector[None, :],
            n_results=min(int(k), n),
            where=dict(where) if where else None,
            include=["documents", "metadatas", "distances"],
        )
        ids = result["ids"][0]
        distances = result["distances"][0]
        docs = (result.get("documents") or [[None] * len(ids)])[0]
        metas = (result.get("metadatas") or [[None] * len(ids)])[0]
        return [
            (chunk_id, 1.0 - float(distances[i]), docs[i] or "", dict(metas[i] or {}))
            for i, chunk_id in enumerate(ids)
        ]


def _chromadb() -> tuple[Any, Any]:
    """Imports chromadb (an optional dependency) and returns it with telemetry-free settings."""
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("ChunkStore needs chromadb: pip install 'bridge-rag[store]'") from err
    return chromadb, Settings(anonymized_telemetry=False)
