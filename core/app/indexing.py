"""``bridge-rag index``: index the user's files into a directory, and keep it current with ``--update``.

All input is read and checked before anything is written: an empty folder, an unknown
strategy, an index directory that already holds an index, or (with ``strict``) one
unreadable file stop the command before the directory is created. A first build that
fails midway removes what it created. An update changes only what changed (by the SHA-256 of
each file), through the strategy contract alone (``load`` / ``delete_documents`` /
``add_documents``), journalled in ``DIR/sources.json`` (:mod:`core.app.sources`) so that a crash
at any point is repaired by the next ``--update``.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tqdm.auto import tqdm

from core.app.files import (
    DEFAULT_MAX_FILE_MB,
    SUPPORTED_SUFFIXES,
    FileScan,
    ReadFile,
    UnreadableFileError,
    discover_files,
    read_file,
)
from core.app.sources import ReadSettings, SourceEntry, SourcesRecord, read_sources, write_sources
from core.app.terminal import plural, strip_terminal_controls
from core.persist import CorruptIndexError, index_kind
from core.strategies.workers import check_workers
from core.types import Document
from core.writer_lock import owner_gone, owner_known_running, owner_record

__all__ = [
    "DEFAULT_STRATEGY",
    "CommandError",
    "IndexOptions",
    "IndexSummary",
    "NoFilesError",
    "ReadResult",
    "UpdatePlan",
    "detect_strategy",
    "plan_update",
    "read_inputs",
    "run_index",
]

#: The strategy index directory names ``bridge-rag index`` looks for inside an index directory.
KNOWN_INDEX_NAMES = ("bridge", "umg", "bubble")


class CommandError(Exception):
    """A command-line error the user can fix: the CLI prints it and exits with status 2."""


class NoFilesError(CommandError):
    """The paths given hold no file to index."""


#: The strategy a new index is built with when ``--strategy`` is not given.
DEFAULT_STRATEGY = "bridge"


@dataclass(frozen=True)
class IndexOptions:
    """What ``bridge-rag index`` was asked to do.

    Attributes:
        paths: Files and folders to index (with ``update``, none means the recorded ones).
        index_dir: The index directory.
        strategy: Strategy name; None: :data:`DEFAULT_STRATEGY` for a new index, the recorded
            one with ``update``.
        update: Update an existing index instead of building a new one.
        strict: Stop, writing nothing, when a file cannot be read.
        chroma_host: A Chroma server's host (with ``chroma_port``); None: embedded Chroma.
        chroma_port: The server's port.
        collection: Chroma collection name (default: the strategy's own).
        globs: Patterns a file inside a folder must match.
        progress: Show progress bars (None: when stderr is a terminal).
        follow_symlinks: Also read what symlinks inside the folders lead to outside them.
        max_file_mb: Skip files larger than this many megabytes (``math.inf``: no limit).
        workers: Cores the build or update uses (None: every core); the index does not depend on it.

    ``globs``, ``follow_symlinks`` and ``max_file_mb`` left None take, for a new index, the
    defaults (every supported file, no symlink out of a folder, :data:`DEFAULT_MAX_FILE_MB`)
    and, with ``update``, what the index was built or last updated with (``sources.json``),
    so that an update never reads files the build was told to leave out.
    """

    paths: Sequence[str]
    index_dir: str
    strategy: str | None = None
    update: bool = False
    strict: bool = False
    chroma_host: str | None = None
    chroma_port: int | None = None
    collection: str | None = None
    globs: Sequence[str] | None = None
    progress: bool | None = None
    follow_symlinks: bool | None = None
    max_file_mb: float | None = None
    workers: int | None = None

    def reading(self, recorded: ReadSettings | None) -> ReadSettings:
        """The read settings to use: those given, else ``recorded``'s, else the defaults."""
        base = recorded or ReadSettings()
        limit = base.max_file_mb if self.max_file_mb is None else self.max_file_mb
        return ReadSettings(
            base.globs if self.globs is None else tuple(self.globs),
            base.follow_symlinks if self.follow_symlinks is None else self.follow_symlinks,
            None if limit is None or math.isinf(limit) else limit,
        )


@dataclass
class IndexSummary:
    """What an index run did.

    Attributes:
        files_read: Files read into documents.
        added: Documents indexed that were not in the index.
        changed: Documents re-indexed because their file changed.
        deleted: Documents removed (their file or line is gone).
        unchanged: Documents left as they were (their file did not change).
        skipped: Files left out (unsupported extension, no matching ``--glob``, no text).
        failed: Files that could not be read.
        seconds: Wall time of the whole command.
    """

    files_read: int = 0
    added: int = 0
    changed: int = 0
    deleted: int = 0
    unchanged: int = 0
    skipped: int = 0
    failed: int = 0
    seconds: float = 0.0

    @property
    def indexed(self) -> int:
        """Documents embedded and indexed by this run."""
        return self.added + self.changed

    def line(self) -> str:
        """The one-line summary the command ends with."""
        return (
            f"{plural(self.files_read, 'file')} read; {plural(self.indexed, 'document')} indexed "
            f"({self.added} added, "
            f"{self.changed} changed, {self.deleted} deleted, {self.unchanged} unchanged); "
            f"{self.skipped} skipped, {self.failed} failed; {self.seconds:.1f} s"
        )


@dataclass
class ReadResult:
    """The input of one run, read and checked.

    Attributes:
        scan: The files found.
        files: The files read (in scan order).
        failures: Files that could not be read.
        empty: Files read that hold no text.
    """

    scan: FileScan
    files: list[ReadFile] = field(default_factory=list)
    failures: list[UnreadableFileError] = field(default_factory=list)
    empty: list[Path] = field(default_factory=list)

    @property
    def documents(self) -> list[Document]:
        """Every document read, in file order."""
        return [d for f in self.files for d in f.documents]


@dataclass
class UpdatePlan:
    """What an update changes.

    Attributes:
        delete_ids: Ids to delete first (old ids of changed and vanished files, and the ids of
            every document about to be added, in case an interrupted run added them).
        add: Documents to add (of new and changed files).
        pending: The journal's entries of the sources this update changes (pending, with
            their old and new ids together).
        entries: The record's entries once the update is done.
        summary: The document counts.
    """

    delete_ids: list[str] = field(default_factory=list)
    add: list[Document] = field(default_factory=list)
    pending: dict[str, SourceEntry] = field(default_factory=dict)
    entries: dict[str, SourceEntry] = field(default_factory=dict)
    summary: IndexSummary = field(default_factory=IndexSummary)

    @property
    def empty(self) -> bool:
        """Whether the index needs no change."""
        return not self.delete_ids and not self.add


def _say(stream: TextIO, text: str) -> None:
    print(strip_terminal_controls(text), file=stream, flush=True)  # file names come from the disk


def read_inputs(
    paths: Sequence[str],
    globs: Sequence[str],
    *,
    progress: bool | None,
    warn: Callable[[str], None],
    follow_symlinks: bool = False,
    max_file_mb: float | None = DEFAULT_MAX_FILE_MB,
) -> ReadResult:
    """Finds and reads every file, with a progress bar; unreadable files are collected, not raised.

    Args:
        paths: Files and folders.
        globs: Patterns a file inside a folder must match.
        progress: Show the progress bar (None: when stderr is a terminal).
        warn: Called with a message for each path skipped for a reason (a symlink not followed,
            a special file, a file too large), each file that cannot be read and each that holds
            no text.
        follow_symlinks: Also read what symlinks inside the folders lead to outside them.
        max_file_mb: Skip files larger than this many megabytes (None: no limit).

    Raises:
        CommandError: A path is missing, a named file is unsupported, two files share a relative
            path, or no supported file was found.
    """
    try:
        scan = discover_files(paths, globs=globs, follow_symlinks=follow_symlinks, max_file_mb=max_file_mb)
    except (FileNotFoundError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    for message in scan.warnings():
        warn(message)
    if not scan.files:
        others = f" ({plural(len(scan.skipped), 'other file')} skipped)" if scan.skipped else ""
        raise NoFilesError(
            f"no {', '.join(SUPPORTED_SUFFIXES)} files under {', '.join(map(repr, paths))}{others}; "
            "point at the folders that hold your documents" + (" or change --glob" if globs else "")
        )
    result = ReadResult(scan)
    seen: dict[str, Path] = {}
    for item in tqdm(
        scan.files, desc="reading", unit="file", disable=None if progress is None else not progress
    ):
        try:
            read = read_file(item, max_file_mb=max_file_mb)
            for doc in read.documents:
                other = seen.get(str(doc.id))
                if other is not None:
                    raise UnreadableFileError(
                        item.path, f"document id {doc.id!r} is already used by {other}; give it another id"
                    )
            for doc in read.documents:
                seen[str(doc.id)] = item.path
        except UnreadableFileError as exc:
            result.failures.append(exc)
            warn(f"cannot read {exc}")
            continue
        result.files.append(read)
        if not read.documents:
            result.empty.append(item.path)
            warn(f"{item.path}: no text, skipped")
    return result


def plan_update(
    previous: Mapping[str, SourceEntry], read: Sequence[ReadFile], failed: set[str]
) -> UpdatePlan:
    """Compares the files read with the record of the last run.

    A file whose hash matches its (not pending) entry is unchanged; any other file is new or
    changed: all its old and new ids are deleted, then its documents added. An entry whose
    file was not found this time has vanished: its ids are deleted (the index mirrors the
    paths of the run). Entries of files that could not be read (``failed``) are kept.

    Args:
        previous: The record's entries (empty for a directory without a record).
        read: The files read this time.
        failed: Sources that could not be read this time.

    Returns:
        The plan.
    """
    plan = UpdatePlan()
    counts = plan.summary
    found = set()
    for rf in read:
        source = rf.file.source
        found.add(source)
        new_ids = [str(d.id) for d in rf.documents]
        old = previous.get(source)
        if old is not None and not old.pending and old.sha256 == rf.sha256:
            counts.unchanged += len(old.ids)
            plan.entries[source] = SourceEntry(str(rf.file.root), old.sha256, old.ids)
            continue
        old_ids = set(old.ids) if old is not None else set()
        counts.changed += sum(1 for i in new_ids if i in old_ids)
        counts.added += sum(1 for i in new_ids if i not in old_ids)
        counts.deleted += len(old_ids - set(new_ids))
        plan.delete_ids += sorted(old_ids | set(new_ids))
        plan.add += rf.documents
        plan.pending[source] = SourceEntry(str(rf.file.root), None, tuple(sorted(old_ids | set(new_ids))))
        plan.entries[source] = SourceEntry(str(rf.file.root), rf.sha256, tuple(new_ids))
    for source, old in previous.items():
        if source in found:
            continue
        if source in failed:
            plan.entries[source] = old  # cannot be read now: left as it is
            continue
        counts.deleted += len(old.ids)
        plan.delete_ids += list(old.ids)
        plan.pending[source] = SourceEntry(old.root, None, old.ids)
    return plan


def detect_strategy(index_dir: Path, record: SourcesRecord | None) -> str | None:
    """The strategy of the index in ``index_dir``: the record's, else the one whose folder holds a save."""
    if record is not None:
        return record.strategy
    kinds = {n: index_kind(index_dir / n) for n in KNOWN_INDEX_NAMES}
    readable = [n for n, kind in kinds.items() if kind == n]  # before a damaged folder's ""
    return next(iter(readable), None) or next((n for n, kind in kinds.items() if kind is not None), None)


def _has_saved_index(index_dir: Path, strategy: str) -> bool:
    """Whether ``index_dir/strategy`` holds a save, found as a load finds it (also with ``CURRENT`` lost)."""
    return index_kind(index_dir / strategy) is not None


def _strategy_class(name: str) -> Any:
    from core.strategies.registry import get_strategy

    try:
        return get_strategy(name)
    except ValueError as exc:
        raise CommandError(f"{exc} (--strategy)") from None


def _http_store(options: IndexOptions, default_collection: str) -> Any:
    if options.chroma_host is None and options.chroma_port is None:
        return None
    if options.chroma_host is None or options.chroma_port is None:
        raise CommandError(
            "--chroma-host and --chroma-port go together; give both, or neither for embedded Chroma"
        )
    from core.store import ChunkStore

    try:
        return ChunkStore.http(
            options.chroma_host, options.chroma_port, options.collection or default_collection
        )
    except ValueError:
        raise
    except Exception as exc:  # chromadb raises its own kinds for a server it cannot reach
        raise CommandError(
            f"cannot reach the Chroma server at {options.chroma_host}:{options.chroma_port} "
            f"({type(exc).__name__}: {exc}); start it with `chroma run --port {options.chroma_port}` "
            "or check --chroma-host/--chroma-port"
        ) from None


def _store_json(options: IndexOptions, collection: str | None) -> dict[str, Any]:
    if options.chroma_host is None:
        return {"kind": "embedded", "collection": collection}
    return {
        "kind": "http",
        "host": options.chroma_host,
        "port": options.chroma_port,
        "collection": collection,
    }


def _progress(options: IndexOptions) -> bool:
    return sys.stderr.isatty() if options.progress is None else options.progress


def run_index(options: IndexOptions, *, out: TextIO | None = None, err: TextIO | None = None) -> IndexSummary:
    """Runs ``bridge-rag index``: a first build, or an update with ``options.update``.

    Args:
        options: What to do.
        out: Where the summary goes (default stdout).
        err: Where warnings go (default stderr).

    Returns:
        What was done.

    Raises:
        CommandError: Bad input or a directory in the wrong state (nothing written).
    """
    t0 = time.perf_counter()
    out = out or sys.stdout
    err = err or sys.stderr
    if not _progress(options):  # quiet: also the model loader's bar (read when transformers is imported)
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    index_dir = Path(options.index_dir)
    if index_dir.exists() and not index_dir.is_dir():
        raise CommandError(f"--index {str(index_dir)!r} is a file; give a directory")
    summary = _update(options, index_dir, err) if options.update else _build(options, index_dir, err)
    summary.seconds = time.perf_counter() - t0
    _say(out, summary.line())
    return summary


def _warn(err: TextIO) -> Callable[[str], None]:
    return lambda text: _say(err, f"bridge-rag index: warning: {text}")


def _checked_read(
    options: IndexOptions, reading: ReadSettings, paths: Sequence[str], err: TextIO
) -> ReadResult:
    read = read_inputs(
        paths,
        reading.globs,
        progress=_progress(options),
        warn=_warn(err),
        follow_symlinks=reading.follow_symlinks,
        max_file_mb=reading.max_file_mb,
    )
    if read.failures and options.strict:
        names = "; ".join(str(f) for f in read.failures)
        raise CommandError(
            f"--strict: {plural(len(read.failures), 'file')} cannot be read, nothing was written: {names}; "
            "fix or "
            "remove them, or run without --strict to index the others"
        )
    return read


def _say_recorded(options: IndexOptions, reading: ReadSettings, err: TextIO) -> None:
    """Names the recorded read settings an update applies without being given them."""
    default = ReadSettings()
    kept = []
    if options.globs is None and reading.globs:
        kept.append(" ".join(f"--glob {g!r}" for g in reading.globs))
    if options.follow_symlinks is None and reading.follow_symlinks:
        kept.append("--follow-symlinks")
    if options.max_file_mb is None and reading.max_file_mb != default.max_file_mb:
        kept.append(
            "no size limit" if reading.max_file_mb is None else f"--max-file-mb {reading.max_file_mb:g}"
        )
    if kept:
        _say(
            err,
            "bridge-rag index: reading the files with the settings recorded for this index: "
            f"{', '.join(kept)} (give the option to change it)",
        )


def _already_indexed(index_dir: Path) -> str | None:
    """Why ``index_dir`` cannot take a new build (None when it can)."""
    if not index_dir.is_dir():
        return None
    try:
        record = read_sources(index_dir)
    except ValueError:
        return "holds a damaged bridge-rag record (sources.json)"
    if record is not None:
        _check_saved(index_dir, record.strategy, record)  # an interrupted first build: say so
        return f"already holds a {record.strategy} index"
    if index_kind(index_dir) is not None:  # a library save(): --update cannot follow files into it
        raise not_an_index(index_dir)
    found = detect_strategy(index_dir, None) or next(
        (n for n in KNOWN_INDEX_NAMES if (index_dir / n).exists()), None
    )
    return f"already holds a {found} index" if found else None


def _build(options: IndexOptions, index_dir: Path, err: TextIO) -> IndexSummary:
    if not options.paths:
        raise CommandError("give the files or folders to index (PATH...)")
    cls = _strategy_class(options.strategy or DEFAULT_STRATEGY)
    why = _already_indexed(index_dir)
    if why is not None:
        raise CommandError(
            f"{index_dir} {why}; add --update to bring it up to date with your files, "
            "or choose another --index"
        )
    check_index_outside(index_dir, options.paths)
    reading = options.reading(None)
    read = _checked_read(options, reading, options.paths, err)
    docs = read.documents
    if not docs:
        raise CommandError(
            f"no documents to index: {plural(len(read.failures), 'file')} cannot be read and "
            f"{plural(len(read.empty), 'file')} without text; nothing was written"
        )
    store = _http_store(options, options.collection or f"{cls.name}_rag")
    if store is not None and store.count() > 0:
        raise CommandError(
            f"the collection {store.name!r} on {options.chroma_host}:{options.chroma_port} already holds "
            f"{store.count():,} items; choose another --collection, update its index with --update, or "
            "delete the collection if an interrupted build left it"
        )
    if options.strategy is None:  # only now: every check that refuses the build has passed
        _say(err, f"bridge-rag index: no --strategy given: building {DEFAULT_STRATEGY} (Bridge-RAG)")
    roots = sorted({str(f.file.root) for f in read.files})
    plan = plan_update({}, read.files, set())
    record = SourcesRecord(
        cls.name,
        roots,
        {},
        "building",
        _store_json(options, store.name if store is not None else options.collection),
        reading,
        owner_record(),  # while it runs, other commands say it runs (not that it was interrupted)
    )
    created = not index_dir.exists()
    before = set(index_dir.iterdir()) if not created else set()
    index_dir.mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = {}
    if options.collection is not None and store is None:
        settings["collection_name"] = options.collection
    try:
        write_sources(index_dir, record.journal(plan.pending), first=True)
    except FileExistsError:  # another build started here since the check: its directory, not ours
        raise CommandError(
            f"another `bridge-rag index` started building into {index_dir} meanwhile; nothing was "
            "written: let it finish, or choose another --index"
        ) from None
    except BaseException:
        _remove_created(index_dir, created, before)
        raise
    recording = store.recording_additions() if store is not None else contextlib.nullcontext([])
    with recording as written:
        try:
            rag = cls.from_documents(
                docs,
                store=store,
                persist_directory=index_dir,
                show_progress=_progress(options),
                workers=options.workers,
                **settings,
            )
            try:  # the record is final before the build lets go of the writer lock
                record.sources, record.state, record.builder = plan.entries, "complete", None
                write_sources(index_dir, record)
            finally:
                _close(rag)
        except BaseException:
            # Before the directory goes: interrupted here, its record names the collection to clean.
            _take_back_quietly(store, written)
            _remove_created(index_dir, created, before)
            raise
    export_query_embedder(rag, index_dir, docs, err, announce=_progress(options))
    return _summary(plan, read)


#: Rows deleted per call when a failed build takes back what it wrote.
_TAKE_BACK_BATCH = 500


def _take_back_quietly(store: Any, written: Sequence[str]) -> None:
    """Deletes the rows a failed first build wrote to a server's collection, and only those.

    An app or another build writing to the same collection meanwhile keeps its rows. Best
    effort, batch by batch: the server may be what failed.
    """
    for start in range(0, len(written), _TAKE_BACK_BATCH):
        try:
            store.delete(list(written[start : start + _TAKE_BACK_BATCH]))
        except Exception:  # the build's own error is the one to report; try the rest
            continue


def _remove_created(index_dir: Path, created: bool, before: set[Path]) -> None:
    """Removes what a failed first build wrote: the directory it created, or its new entries."""
    if created:
        shutil.rmtree(index_dir, ignore_errors=True)
        return
    for entry in set(index_dir.iterdir()) - before:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _close(rag: Any) -> None:
    close = getattr(rag, "close", None)
    if callable(close):
        close()


def _load_kwargs(cls: Any) -> dict[str, Any]:
    """``refresh_interval=None`` when the strategy's ``load`` takes it (a one-shot command follows no one)."""
    try:
        params = inspect.signature(cls.load).parameters
    except (TypeError, ValueError):
        return {}
    return {"refresh_interval": None} if "refresh_interval" in params else {}


def not_an_index(index_dir: Path, what: str = "") -> CommandError:
    """The error for a directory that holds no index the command can use (``what``: why not)."""
    kind = index_kind(index_dir)
    if kind is not None:  # a library save(): no sources record, so not the CLI's to manage
        return CommandError(
            f"{index_dir} is itself a saved {kind or 'bridge-rag'} index: it was saved by the library "
            "(save()), not by `bridge-rag index`; open it in Python with that strategy's load(), or "
            "build a command-line index into another --index"
        )
    if _holds_documents(index_dir):  # the documents folder itself: the index goes beside it
        place = suggested_index_dir(index_dir)
        return CommandError(
            f"{index_dir} is not a bridge-rag index{what}: it holds documents; index them into a "
            f"directory of its own with `bridge-rag index {index_dir} --index {place}`, then ask "
            f"`bridge-rag query {place} ...`"
        )
    return CommandError(
        f"{index_dir} is not a bridge-rag index{what}; build one with "
        f"`bridge-rag index PATH --index {index_dir}`"
    )


def suggested_index_dir(documents: Path) -> Path:
    """Where to index a documents folder: beside it, never inside it (``notes`` -> ``notes-index``)."""
    name = documents.resolve().name or "documents"
    return documents.parent / f"{name}-index" if documents.name else Path(f"{name}-index")


def _holds_documents(directory: Path, limit: int = 200) -> bool:
    """Whether a supported document file is among the first ``limit`` entries under ``directory``."""
    try:
        for seen, path in enumerate(directory.rglob("*")):
            if seen >= limit:
                return False
            if path.suffix.lower() in SUPPORTED_SUFFIXES and path.is_file():
                return True
    except OSError:
        return False
    return False


def check_index_outside(index_dir: Path, paths: Sequence[str | Path]) -> None:
    """Refuses an index directory inside (or equal to) a folder being indexed.

    Its files (``chroma/``, ``sources.json``, the model's copy) would sit among the user's
    documents, and the next ``--update`` would read them.

    Raises:
        CommandError: ``index_dir`` is one of ``paths`` or inside one; the message names a place beside it.
    """
    where = index_dir.resolve()
    for path in paths:
        folder = Path(path)
        if not folder.is_dir():
            continue
        root = folder.resolve()
        if where == root or root in where.parents:
            raise CommandError(
                f"--index {index_dir} is inside the folder {path} being indexed: the index's files would "
                f"sit among your documents; put it beside them, e.g. --index {suggested_index_dir(folder)}"
            )


def _check_saved(index_dir: Path, name: str, record: SourcesRecord | None) -> None:
    """Raises the right :class:`CommandError` when ``index_dir`` holds no saved ``name`` index."""
    if _has_saved_index(index_dir, name):
        return
    if record is not None and record.state == "building":
        server = record.store.get("kind") == "http"
        collection = f" and its collection {record.store.get('collection')!r} on the Chroma server"
        remove = f"remove {index_dir}{collection if server else ''} and run `bridge-rag index` again"
        builder = record.builder
        if builder is None or owner_gone(builder):
            raise CommandError(f"{index_dir} holds a first build that did not finish (interrupted); {remove}")
        who = f"pid {builder.get('pid')}" + (f" on {builder['host']}" if builder.get("host") else "")
        if owner_known_running(builder):
            raise CommandError(
                f"{index_dir} is being built by a running `bridge-rag index` ({who}); let it finish first"
            )
        raise CommandError(  # another host, or no start time to tell a reused pid: it cannot be known
            f"{index_dir} holds a first build that has not finished; it may still be running as {who}. "
            f"If no `bridge-rag index` runs there any more, {remove}"
        )
    raise not_an_index(index_dir)


def load_index_dir(
    index_dir: Path,
    record: SourcesRecord | None,
    store: Any = None,
    *,
    follow: bool = False,
    embedder: Any = None,
) -> Any:
    """Loads the strategy saved in ``index_dir``.

    Args:
        index_dir: The index directory.
        record: Its sources record (None: none).
        store: The store to open it over (None: the one its manifest names).
        follow: Pick up later saves (a server); by default the index is read once.
        embedder: The query embedder (None: the model the index was built with).

    Raises:
        CommandError: ``index_dir`` holds no saved index, or only an interrupted first build.
    """
    name = detect_strategy(index_dir, record) if index_dir.is_dir() else None
    if name is None:
        raise not_an_index(index_dir)
    _check_saved(index_dir, name, record)
    cls = _strategy_class(name)
    kwargs = {} if follow else _load_kwargs(cls)
    if store is not None:
        kwargs["store"] = store
    if embedder is not None:
        kwargs["embedder"] = embedder
    return cls.load(index_dir, **kwargs)


def _open_for_update(index_dir: Path, record: SourcesRecord | None, store: Any) -> Any:
    """The index to update, opened as ``bridge-rag index`` opens it (the default embedder).

    Raises:
        CommandError: An index built in Python that the command cannot open (another
            embedder, say): it is the library's to update.
    """
    try:
        return load_index_dir(index_dir, record, store)
    except CorruptIndexError:
        raise  # damaged files: load() fails on them too, and the error names them
    except ValueError as exc:
        if record is not None:
            raise
        raise CommandError(
            f"{index_dir} was built in Python (it has no sources.json) and `bridge-rag index --update` "
            f"cannot open it: {exc}. Update it from Python with that strategy's load(), "
            "add_documents() and delete_documents(), or build a command-line index into another --index"
        ) from None


def _hold_for_update(rag: Any, index_dir: Path, record: SourcesRecord | None) -> None:
    """Takes the index's writer lock, then checks that no other update ran since ``record`` was read.

    So two updates of one directory at once never interleave their journals and changes: the
    second is refused, before it writes anything.

    Raises:
        core.writer_lock.IndexLockedError: Another process is writing the index.
        CommandError: Another update finished while this one read the files (run it again).
    """
    hold = getattr(rag, "_hold_writer_lock", None)  # a plugin strategy may have no writer lock
    if callable(hold):
        hold()
    if read_sources(index_dir) != record:
        raise CommandError(
            f"another `bridge-rag index` changed {index_dir} while this one read the files; nothing "
            "was written: run it again"
        )


def _update(options: IndexOptions, index_dir: Path, err: TextIO) -> IndexSummary:
    record = read_sources(index_dir) if index_dir.is_dir() else None
    name = detect_strategy(index_dir, record) if index_dir.is_dir() else None
    if name is None:
        raise not_an_index(index_dir, ", so there is nothing to --update")
    if options.strategy is not None and options.strategy != name:
        raise CommandError(
            f"{index_dir} holds a {name} index, not {options.strategy}; drop --strategy or build a "
            f"{options.strategy} index into another directory"
        )
    _strategy_class(name)  # a strategy registered by a plugin that is not installed: a clear error
    _check_saved(index_dir, name, record)
    paths = list(options.paths) or (record.roots if record is not None else [])
    if not paths:
        raise CommandError(f"{index_dir} has no record of the files it indexed; give them (PATH...)")
    check_index_outside(index_dir, paths)
    reading = options.reading(record.reading if record is not None else None)
    _say_recorded(options, reading, err)
    try:
        read = _checked_read(options, reading, paths, err)
    except NoFilesError as exc:  # a folder emptied, or the wrong path: never taken as "delete all"
        raise NoFilesError(
            f"{exc}. An update never empties an index: to remove every document, delete {index_dir} "
            "(and its Chroma collection, when it is on a server)"
        ) from None
    roots = {str(Path(p).absolute()) for p in paths}
    failed = {f.path.absolute() for f in read.failures}
    failed_sources = {s.source for s in read.scan.files if s.path.absolute() in failed}
    previous = record.sources if record is not None else {}
    plan = plan_update(previous, read.files, failed_sources)
    if any(e.ids for e in previous.values()) and not any(e.ids for e in plan.entries.values()):
        raise NoFilesError(
            f"the files under {', '.join(map(repr, paths))} hold no text ({len(read.empty)} empty, "
            f"{len(read.failures)} unreadable): an update never empties an index. To remove every "
            f"document, delete {index_dir} (and its Chroma collection, when it is on a server)"
        )
    base = record or SourcesRecord(name, [], {}, "complete", _store_json(options, options.collection))
    final = SourcesRecord(name, sorted(roots), plan.entries, "complete", base.store, reading)
    if plan.empty and final == record:
        if not _has_query_embedder(index_dir):  # an index from before the copy, or a damaged copy
            _export_only(index_dir, record, options, err)
        return _summary(plan, read)  # nothing to write: no other update's record is touched
    store = _http_store(options, options.collection or str(base.store.get("collection") or f"{name}_rag"))
    rag = _open_for_update(index_dir, record, store)  # before the journal: a refusal writes nothing
    rag.workers = check_workers(options.workers)
    try:
        _hold_for_update(rag, index_dir, record)  # also for a record alone: it may be newer than ours
        if not plan.empty:
            write_sources(index_dir, base.journal(plan.pending, reading))
            if plan.delete_ids:
                rag.delete_documents(plan.delete_ids)
            if plan.add:
                rag.add_documents(plan.add)
        write_sources(index_dir, final)  # under the lock: an update waiting on it never reads our journal
    finally:
        _close(rag)
    export_query_embedder(rag, index_dir, plan.add, err, announce=_progress(options))
    return _summary(plan, read)


def _export_only(index_dir: Path, record: SourcesRecord | None, options: IndexOptions, err: TextIO) -> None:
    """Writes the ONNX copy of an index whose documents are up to date (the record is not touched)."""
    rag = load_index_dir(index_dir, record)
    try:
        export_query_embedder(rag, index_dir, [], err, announce=_progress(options))
    finally:
        _close(rag)


def _has_query_embedder(index_dir: Path) -> bool:
    """Whether the index's ONNX copy of its model is there and whole (an update writes it again if not)."""
    from core.onnx_embed import load_onnx_embedder

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_onnx_embedder(index_dir, quiet=True) is not None


#: Documents whose first characters the ONNX copy must embed as the model does.
_PROBE_DOCS = 8
_PROBE_CHARS = 2000


def export_query_embedder(
    rag: Any, index_dir: Path, docs: Sequence[Document], err: TextIO, *, announce: bool = False
) -> None:
    """Writes (or keeps) the index's ONNX copy of its embedding model, for fast cold queries.

    Checked against the model on a few of ``docs`` (see :mod:`core.onnx_embed`). When the model
    cannot be exported, ``bridge-rag query`` loads it itself, as before: a note says why.
    ``announce``: say so first (the stage lines of a build with progress).
    """
    from core.onnx_embed import export_onnx

    def say_exporting() -> None:
        if announce:
            _say(err, "bridge-rag: exporting the embedding model to ONNX for fast queries ...")

    probes = [d.text[:_PROBE_CHARS] for d in docs[:_PROBE_DOCS]]
    try:
        why = export_onnx(getattr(rag, "embedder", None), index_dir, probes=probes, on_export=say_exporting)
    except Exception as exc:  # an exporter failure costs speed, never the index
        why = f"the export failed ({type(exc).__name__}: {exc})"
    if why is not None:
        _say(
            err, f"bridge-rag index: note: queries will load the embedding model itself (slower start): {why}"
        )


def _summary(plan: UpdatePlan, read: ReadResult) -> IndexSummary:
    summary = plan.summary
    summary.files_read = len(read.files)
    summary.skipped = len(read.scan.skipped) + len(read.empty)
    summary.failed = len(read.failures)
    return summary
