"""The record of what an index directory holds from the user's files: ``DIR/sources.json``.

``bridge-rag index`` keeps, beside the strategy's own index, which file gave which documents
and the SHA-256 of its bytes, so that ``--update`` re-indexes only what changed. The record
is written atomically (:func:`core.persist.atomic_write_bytes`) and carries a checksum of its
own content.

Crash safety is a small write-ahead journal. Before the strategy is changed, the record is
written with every source about to change marked *pending* (``sha256`` null) and listing
both its old and its new document ids; the strategy then deletes all those ids (unknown ids
are ignored by every strategy) and adds the new documents, saving as it goes; only then is
the final record written. A crash at any point leaves either the previous record (nothing
changed yet) or the journal, whose pending sources never match a file's hash: the next
``--update`` deletes their ids again and re-adds them, which repairs the index whatever the
strategy had saved.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.app.files import DEFAULT_MAX_FILE_MB, sha256_hex
from core.persist import atomic_write_bytes, json_from_bytes, json_to_bytes

__all__ = [
    "SOURCES_FILE",
    "SOURCES_FORMAT",
    "SOURCES_VERSION",
    "ReadSettings",
    "SourceEntry",
    "SourcesRecord",
    "read_sources",
    "write_sources",
]

#: The record's file name inside an index directory.
SOURCES_FILE = "sources.json"
#: Its ``format`` field and format version.
SOURCES_FORMAT = "bridge-rag-sources"
SOURCES_VERSION = 1


@dataclass(frozen=True)
class SourceEntry:
    """What one file contributed to the index.

    Attributes:
        root: The path argument it was found under (absolute).
        sha256: SHA-256 of the file's bytes when indexed; None while a change is pending.
        ids: Its document ids (while pending: its old and new ids together).
    """

    root: str
    sha256: str | None
    ids: tuple[str, ...]

    @property
    def pending(self) -> bool:
        """Whether an update of this file was started and not recorded as finished."""
        return self.sha256 is None

    def to_json(self) -> dict[str, Any]:
        """The entry as JSON data."""
        return {"root": self.root, "sha256": self.sha256, "ids": list(self.ids)}


@dataclass(frozen=True)
class ReadSettings:
    """How the files were found and read: an ``--update`` reads them the same way unless told otherwise.

    Attributes:
        globs: Patterns a file inside a folder must match (empty: every supported file).
        follow_symlinks: Whether symlinks inside the folders that lead outside them are read.
        max_file_mb: Files above this many megabytes are skipped (None: no limit).
    """

    globs: tuple[str, ...] = ()
    follow_symlinks: bool = False
    max_file_mb: float | None = DEFAULT_MAX_FILE_MB

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON data."""
        return {
            "globs": list(self.globs),
            "follow_symlinks": self.follow_symlinks,
            "max_file_mb": self.max_file_mb,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReadSettings:
        """Reads :meth:`to_json`'s output.

        Raises:
            TypeError: A field of the wrong type.
        """
        globs, follow, limit = data["globs"], data["follow_symlinks"], data["max_file_mb"]
        if not (isinstance(globs, list) and all(isinstance(g, str) for g in globs)) or not isinstance(
            follow, bool
        ):
            raise TypeError("reading")
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int | float) or limit <= 0
        ):
            raise TypeError("reading.max_file_mb")
        return cls(tuple(globs), follow, None if limit is None else float(limit))


@dataclass
class SourcesRecord:
    """The contents of ``sources.json``.

    Attributes:
        strategy: The strategy's registry name.
        roots: The path arguments indexed (absolute), sorted.
        sources: Relative source path -> entry.
        state: ``"complete"``, ``"building"`` (a first build under way) or ``"updating"``.
        store: Where the chunks live: ``{"kind": "embedded"}`` or ``{"kind": "http", ...}``.
        reading: How the files were read; None in a record written before it was kept.
        builder: The process running a first build (``core.writer_lock.owner_record``), while
            the state is ``"building"``; None otherwise.
    """

    strategy: str
    roots: list[str] = field(default_factory=list)
    sources: dict[str, SourceEntry] = field(default_factory=dict)
    state: str = "complete"
    store: dict[str, Any] = field(default_factory=dict)
    reading: ReadSettings | None = None
    builder: dict[str, Any] | None = None

    def journal(
        self, pending: Mapping[str, SourceEntry], reading: ReadSettings | None = None
    ) -> SourcesRecord:
        """A copy with the ``pending`` entries over its own, in state ``"updating"``.

        A first build's record stays ``"building"``, so a build killed before its first save
        is named as such (not taken for an update of an index that is not there).

        ``reading`` is the update's read settings (None: this record's): a repair of an
        interrupted update reads the files as that update was told to.
        """
        return SourcesRecord(
            self.strategy,
            list(self.roots),
            {**self.sources, **pending},
            "building" if self.state == "building" else "updating",
            dict(self.store),
            self.reading if reading is None else reading,
            self.builder if self.state == "building" else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data, with its checksum."""
        body = {
            "format": SOURCES_FORMAT,
            "version": SOURCES_VERSION,
            "strategy": self.strategy,
            "state": self.state,
            "roots": sorted(self.roots),
            "store": self.store,
            **({} if self.reading is None else {"reading": self.reading.to_json()}),
            **({} if self.builder is None else {"builder": self.builder}),
            "written": datetime.now(UTC).isoformat(timespec="seconds"),
            "sources": {s: e.to_json() for s, e in sorted(self.sources.items())},
        }
        return {**body, "checksum": sha256_hex(json_to_bytes(body))}


def write_sources(directory: str | os.PathLike[str], record: SourcesRecord, *, first: bool = False) -> None:
    """Writes ``DIR/sources.json`` atomically.

    Args:
        directory: The index directory.
        record: What to write.
        first: A first build's record: written only where there is none yet.

    Raises:
        FileExistsError: ``first``, and the directory already has a record (another build's).
    """
    atomic_write_bytes(Path(directory) / SOURCES_FILE, json_to_bytes(record.to_json()), exclusive=first)


def _damaged(path: Path, why: str) -> ValueError:
    return ValueError(
        f"{path} is damaged ({why}); delete it and run `bridge-rag index PATH... --update --index "
        f"{path.parent}` to index every file again, or build a new index into another directory"
    )


def read_sources(directory: str | os.PathLike[str]) -> SourcesRecord | None:
    """Reads ``DIR/sources.json``, or None when there is none.

    Raises:
        ValueError: The file is damaged (bad JSON, a checksum that does not match, wrong fields)
            or of another format version.
    """
    path = Path(directory) / SOURCES_FILE
    if not path.is_file():
        if os.path.lexists(path):  # a folder, or a link to nothing: not a record, and not absent
            raise _damaged(path, "not a regular file")
        return None
    try:
        data = json_from_bytes(path.read_bytes())
    except ValueError as exc:
        raise _damaged(path, str(exc)) from None
    if not isinstance(data, dict) or data.get("format") != SOURCES_FORMAT:
        raise _damaged(path, f"not a {SOURCES_FORMAT} file")
    body = {k: v for k, v in data.items() if k != "checksum"}
    if data.get("checksum") != sha256_hex(json_to_bytes(body)):
        raise _damaged(path, "its checksum does not match its content")
    if data.get("version") != SOURCES_VERSION:
        raise ValueError(
            f"{path} has format version {data.get('version')!r}; this bridge-rag reads version "
            f"{SOURCES_VERSION}: upgrade bridge-rag, or build a new index into another directory"
        )
    try:
        sources = {
            str(s): SourceEntry(
                root=str(e["root"]),
                sha256=None if e["sha256"] is None else str(e["sha256"]),
                ids=tuple(str(i) for i in e["ids"]),
            )
            for s, e in data["sources"].items()
        }
        return SourcesRecord(
            strategy=str(data["strategy"]),
            roots=[str(r) for r in data["roots"]],
            sources=sources,
            state=str(data["state"]),
            store=dict(data.get("store") or {}),
            reading=None if data.get("reading") is None else ReadSettings.from_json(data["reading"]),
            builder=_builder(data.get("builder")),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise _damaged(path, f"missing or malformed field {exc}") from None


def _builder(value: Any) -> dict[str, Any] | None:
    """The ``builder`` field as read (an owner record), or None when absent."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"builder is {type(value).__name__}, not an object")
    return dict(value)
