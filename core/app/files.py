"""The user's own files as documents: find them under the paths given, read them into :class:`Document`.

Supported: ``.txt`` and ``.md`` (one document per file, UTF-8), ``.jsonl`` (one document per
line: ``text`` required, optional ``id`` and ``title``, every other key is metadata) and
``.pdf`` (one document per file, the text of its pages; needs the optional ``pypdf``:
``pip install 'bridge-rag[pdf]'``).

Every document's id comes from its path relative to the path it was found under (a folder
argument: relative to that folder; a file argument: its name), with POSIX separators; a
``.jsonl`` line's id is its ``id`` if given, else ``relpath#lineN``. Every document carries the
metadata ``source`` (that relative path), ``title`` and ``content_sha256`` (of its text). A
document without a title of its own (a ``.txt`` file, a ``.md`` file without a heading line)
gets its file's stem as its title, marked ``title_from_file_name``: shown, but never taken
for what the document is about (an entity).

Only regular files are read. Hidden entries of a folder (``.git``, ...) are left out, and so,
each with a reason for a warning (:class:`SkippedPath`), are FIFOs, sockets and devices (never
opened), files above the size limit (``--max-file-mb``, checked with ``stat`` before reading),
and, inside a folder, broken symlinks and symlinks to anything inside that folder (what they
point to is read at its own path: nothing is read twice and no link loop is walked). Symlinks
inside a folder that lead outside it are followed only with ``follow_symlinks``
(``--follow-symlinks``); each folder reached that way is walked once and each file read once,
so link loops end. A path given directly (a file, or the folder itself) may be a symlink:
naming it is the user's choice, and it is read.

Nothing here imports a model, Chroma or a framework: reading a folder is cheap, so a command
can read and check all of its input before it builds anything.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import math
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from core.types import TITLE_FROM_FILE_NAME, Document

__all__ = [
    "DEFAULT_MAX_FILE_MB",
    "MB",
    "PDF_INSTALL_HINT",
    "RESERVED_JSONL_KEYS",
    "SUPPORTED_SUFFIXES",
    "FileScan",
    "ReadFile",
    "SkippedPath",
    "SourceFile",
    "UnreadableFileError",
    "discover_files",
    "markdown_title",
    "read_file",
    "sha256_hex",
]

#: File name endings read into documents (compared in lower case).
SUPPORTED_SUFFIXES = (".txt", ".md", ".jsonl", ".pdf")

#: Files larger than this many megabytes (of 2**20 bytes) are skipped unless told otherwise.
DEFAULT_MAX_FILE_MB = 100.0

#: Bytes in a megabyte, as ``--max-file-mb`` counts them.
MB = 1 << 20

#: What to run when a PDF cannot be read for lack of pypdf.
PDF_INSTALL_HINT = "pip install 'bridge-rag[pdf]'"

#: Keys of a ``.jsonl`` line that are not copied into metadata: the fields read separately and
#: the per-chunk keys the strategies write themselves.
RESERVED_JSONL_KEYS = frozenset(
    {
        "text",
        "id",
        "title",
        "source",
        "content_sha256",
        "doc_id",
        "chunk_order",
        "start_index",
        "end_index",
        TITLE_FROM_FILE_NAME,
    }
)

_HEADING_RE = re.compile(r"^#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE_RE = re.compile(r"^[ \t]{0,3}(```|~~~)")


class UnreadableFileError(ValueError):
    """A file that cannot be read into documents (bad UTF-8, a broken PDF, a bad JSON line, ...).

    Attributes:
        path: The file.
        reason: What is wrong with it and, where possible, what to do.
    """

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class SourceFile:
    """One file to read.

    Attributes:
        path: The file.
        root: The path argument it was found under (a folder, or the file itself), absolute.
        source: Its path relative to that argument's folder, with POSIX separators: the
            basis of its document ids and its ``source`` metadata.
    """

    path: Path
    root: Path
    source: str


@dataclass(frozen=True)
class SkippedPath:
    """A path that was found but is not read.

    Attributes:
        path: The path (under the argument it was found in, symlinks not resolved).
        reason: Why it is not read and what to do about it, for a warning; None for a file that
            was simply not asked for (an unsupported extension, or no ``--glob`` pattern
            matched), which is counted but not named.
    """

    path: Path
    reason: str | None = None

    def message(self) -> str | None:
        """The one-line warning about this path (None when it needs none)."""
        return None if self.reason is None else f"{str(self.path)!r} skipped: {self.reason}"


@dataclass
class FileScan:
    """The files found under the paths given.

    Attributes:
        files: The supported files, in a stable order (each argument's in sorted path order).
        skipped: Paths left out: files with an unsupported extension or matched by no ``--glob``
            pattern (no reason), and, each with its reason, special files (FIFOs, sockets,
            devices), files above the size limit, symlinks not followed, folders already walked
            and folders that cannot be listed.
    """

    files: list[SourceFile] = field(default_factory=list)
    skipped: list[SkippedPath] = field(default_factory=list)

    def warnings(self) -> list[str]:
        """One line for each path skipped for a reason, in the order found."""
        return [m for m in (s.message() for s in self.skipped) if m is not None]


@dataclass(frozen=True)
class ReadFile:
    """A file read into documents.

    Attributes:
        file: The file.
        sha256: SHA-256 of the file's bytes (what decides whether it changed).
        documents: Its documents (empty for a file without text).
    """

    file: SourceFile
    sha256: str
    documents: list[Document]


def sha256_hex(data: bytes | str) -> str:
    """The SHA-256 of bytes, or of a string's UTF-8 encoding, as 64 hex digits."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def _supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED_SUFFIXES


def _matches(source: str, globs: Sequence[str]) -> bool:
    """Whether a relative path (or its file name) matches one of the patterns (all match when none)."""
    if not globs:
        return True
    name = PurePosixPath(source).name
    return any(fnmatch.fnmatchcase(source, g) or fnmatch.fnmatchcase(name, g) for g in globs)


@dataclass(frozen=True)
class _Found:
    """A file found by :func:`_walk`, or a folder it left out (``reason`` set)."""

    path: Path
    via_link: bool
    reason: str | None = None


_SPECIAL_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def _identity(path: Path, info: os.stat_result) -> tuple[int, int] | str:
    """What tells a file or folder from any other: its device and inode, else its real path."""
    return (info.st_dev, info.st_ino) if info.st_ino else os.path.realpath(path)


def _os_reason(what: str, exc: OSError) -> str:
    return f"{what} ({exc.strerror or exc}); check its permissions"


def _link_reason(link: Path, real_root: Path, follow_symlinks: bool) -> str | None:
    """Why the symlink ``link``, found inside the folder ``real_root``, is not followed (None: follow it)."""
    try:
        os.stat(link)
    except OSError as exc:
        return f"a broken symlink ({exc.strerror or exc}); fix or remove it"
    target = Path(os.path.realpath(link))
    if target.is_relative_to(real_root):
        return (
            f"a symlink to {str(target)!r}, inside the folder; links inside the folder are not "
            "followed (what they point to is read at its own path)"
        )
    if not follow_symlinks:
        return f"a symlink to {str(target)!r}, outside the folder; pass --follow-symlinks to read it"
    return None


def _listing(directory: Path) -> list[os.DirEntry[str]]:
    """The entries of ``directory``, sorted by name, hidden ones (``.git``, ...) left out."""
    with os.scandir(directory) as entries:
        return sorted((e for e in entries if not e.name.startswith(".")), key=lambda e: e.name)


def _walk(folder: Path, *, follow_symlinks: bool = False) -> Iterator[_Found]:
    """Every non-hidden file under ``folder``, sorted, a folder's files before its subfolders'.

    Symlinks to files are yielded like files (the caller checks them); a symlink to a folder
    is walked only when :func:`_link_reason` allows it, else yielded with its reason. Each
    real folder is walked once: one reached again (a link loop, a second link to it) is yielded
    with a reason, and so is a folder that cannot be listed.
    """
    real_root = Path(os.path.realpath(folder))
    walked: set[tuple[int, int] | str] = set()
    stack = [(folder, False)]
    while stack:
        directory, via_link = stack.pop()
        try:
            identity = _identity(directory, os.stat(directory))
            entries = _listing(directory)
        except OSError as exc:
            yield _Found(directory, via_link, _os_reason("cannot be listed", exc))
            continue
        if identity in walked:
            yield _Found(directory, via_link, "a folder already read (a symlink loop, or a second link)")
            continue
        walked.add(identity)
        subfolders = []
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink() and os.path.isdir(path):
                reason = _link_reason(path, real_root, follow_symlinks)
                if reason is not None:
                    yield _Found(path, True, reason)
                    continue
                subfolders.append((path, True))
            elif entry.is_dir(follow_symlinks=False):
                subfolders.append((path, via_link))
            else:
                yield _Found(path, via_link or entry.is_symlink())
        stack.extend(reversed(subfolders))


def _check_max_file_mb(max_file_mb: float | None) -> None:
    if max_file_mb is not None and not (math.isfinite(max_file_mb) and max_file_mb > 0):
        raise ValueError(
            f"--max-file-mb must be a positive number of megabytes, got {max_file_mb}; "
            f"leave it out for the default ({DEFAULT_MAX_FILE_MB:g})"
        )


def _size_reason(size: int, max_file_mb: float | None) -> str | None:
    """Why a file of ``size`` bytes is too large to read (None when it is not)."""
    if max_file_mb is None or size <= max_file_mb * MB:
        return None
    return (
        f"{size:,} bytes ({size / MB:,.2f} MB) is above --max-file-mb {max_file_mb:g}; "
        f"pass --max-file-mb {math.ceil(size / MB)} to read it"
    )


def _stat_reason(info: os.stat_result, max_file_mb: float | None) -> str | None:
    """Why a file with this ``stat`` is not read: it is not a regular file, or it is too large."""
    if not stat.S_ISREG(info.st_mode):
        kind = _SPECIAL_KINDS.get(stat.S_IFMT(info.st_mode), "a special file")
        return f"{kind}, not a regular file (only regular files are read)"
    return _size_reason(info.st_size, max_file_mb)


@dataclass
class _FolderRules:
    """The rules of one folder argument's scan, and the files it has taken (by identity)."""

    folder: Path
    follow_symlinks: bool
    max_file_mb: float | None
    real_root: Path = field(init=False)
    taken: dict[tuple[int, int] | str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.real_root = Path(os.path.realpath(self.folder))

    def reason(self, found: _Found) -> str | None:
        """Why a supported file found in the folder is not read (None: read it)."""
        path = found.path
        if path.is_symlink():
            why = _link_reason(path, self.real_root, self.follow_symlinks)
            if why is not None:
                return why
        try:
            info = os.stat(path)
        except OSError as exc:
            return _os_reason("cannot be examined", exc)
        why = _stat_reason(info, self.max_file_mb)
        if why is not None:
            return why
        first = self.taken.setdefault(_identity(path, info), path)
        if found.via_link and first != path:
            return f"the same file as {str(first)!r}, which is read"
        return None


def _scan_folder(
    folder: Path,
    root: Path,
    scan: FileScan,
    *,
    globs: Sequence[str],
    follow_symlinks: bool,
    max_file_mb: float | None,
) -> list[SourceFile]:
    """The files to read under one folder argument; the others go to ``scan.skipped``."""
    rules = _FolderRules(folder, follow_symlinks, max_file_mb)
    found: list[SourceFile] = []
    for item in _walk(folder, follow_symlinks=follow_symlinks):
        source = item.path.relative_to(folder).as_posix()
        if item.reason is not None:
            scan.skipped.append(SkippedPath(item.path, item.reason))
        elif not (_supported(item.path) and _matches(source, globs)):
            scan.skipped.append(SkippedPath(item.path))
        elif (why := rules.reason(item)) is not None:
            scan.skipped.append(SkippedPath(item.path, why))
        else:
            found.append(SourceFile(item.path, root, source))
    return found


def _scan_file(path: Path, root: Path, scan: FileScan, max_file_mb: float | None) -> list[SourceFile]:
    """A file named explicitly (a symlink is followed): itself, unless it is special or too large."""
    try:
        why = _stat_reason(os.stat(path), max_file_mb)
    except OSError as exc:
        why = _os_reason("cannot be examined", exc)
    if why is not None:
        scan.skipped.append(SkippedPath(path, why))
        return []
    return [SourceFile(path, root, path.name)]


def discover_files(
    paths: Sequence[str | os.PathLike[str]],
    *,
    globs: Sequence[str] = (),
    follow_symlinks: bool = False,
    max_file_mb: float | None = DEFAULT_MAX_FILE_MB,
) -> FileScan:
    """Finds the files to index under files and folders (folders recursively).

    Nothing found is opened: each candidate is checked with ``stat`` (see the module's
    docstring for what is skipped and why).

    Args:
        paths: Files and folders.
        globs: Shell patterns (``*.md``, ``notes/**``): a file inside a folder is read only when
            its relative path or its name matches one of them. Files named explicitly are
            always read.
        follow_symlinks: Also read what symlinks inside the folders lead to outside them.
        max_file_mb: Skip files larger than this many megabytes (of 2**20 bytes); None: no limit.

    Returns:
        The supported files, and the paths skipped (with a reason when they deserve a warning).

    Raises:
        FileNotFoundError: A path does not exist.
        ValueError: A file named explicitly has an unsupported extension, two files would get
            the same relative path (the same name under two arguments), or ``max_file_mb`` is
            not a positive number.
    """
    _check_max_file_mb(max_file_mb)
    scan = FileScan()
    seen: dict[str, Path] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise FileNotFoundError(f"{str(given)!r} does not exist; pass existing files or folders")
        root = path.absolute()
        if path.is_dir():
            found = _scan_folder(
                path, root, scan, globs=globs, follow_symlinks=follow_symlinks, max_file_mb=max_file_mb
            )
        elif _supported(path):
            found = _scan_file(path, root, scan, max_file_mb)
        else:
            raise ValueError(
                f"{str(given)!r} is not a supported file; "
                f"give {', '.join(SUPPORTED_SUFFIXES)} files or a folder"
            )
        for item in found:
            other = seen.setdefault(item.source, item.path)
            if other != item.path:
                raise ValueError(
                    f"{str(other)!r} and {str(item.path)!r} would both be indexed as {item.source!r}; "
                    "give their common parent folder instead, or index them into separate directories"
                )
            scan.files.append(item)
    return scan


def markdown_title(text: str) -> str | None:
    """The first level-1 heading (``# Title``) of a Markdown text, outside code fences."""
    fenced = False
    for line in text.splitlines():
        if _FENCE_RE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            match = _HEADING_RE.match(line)
            if match:
                return match.group(1).strip()
    return None


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableFileError(
            path,
            f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); convert it to UTF-8 "
            "(e.g. iconv -f latin1 -t utf-8) or leave it out",
        ) from None


def _metadata(
    source: str, title: str | None, text: str, stem: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A document's metadata; without a ``title``, the file's ``stem`` is its title, marked as only that."""
    meta = {k: v for k, v in (extra or {}).items() if k not in RESERVED_JSONL_KEYS}
    meta.update(source=source, title=title or stem, content_sha256=sha256_hex(text))
    if not title:
        meta[TITLE_FROM_FILE_NAME] = True
    return meta


def _read_text(file: SourceFile, data: bytes) -> list[Document]:
    text = _decode(file.path, data)
    if not text.strip():
        return []
    title = markdown_title(text) if file.path.suffix.lower() == ".md" else None
    return [Document(text=text, id=file.source, metadata=_metadata(file.source, title, text, file.path.stem))]


def _read_jsonl(file: SourceFile, data: bytes) -> list[Document]:
    docs: list[Document] = []
    ids: dict[str, int] = {}
    for number, line in enumerate(_decode(file.path, data).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise UnreadableFileError(file.path, f"line {number} is not valid JSON ({exc})") from None
        if not isinstance(row, dict):
            raise UnreadableFileError(file.path, f"line {number} is not a JSON object")
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            raise UnreadableFileError(file.path, f'line {number} has no "text" (a non-empty string)')
        raw_id = row.get("id")
        if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, str | int)):
            raise UnreadableFileError(file.path, f'line {number}: "id" must be a string or an integer')
        doc_id = str(raw_id) if raw_id is not None and str(raw_id).strip() else f"{file.source}#line{number}"
        if doc_id in ids:
            raise UnreadableFileError(
                file.path, f"line {number} repeats the id {doc_id!r} of line {ids[doc_id]}"
            )
        ids[doc_id] = number
        raw_title = row.get("title")
        title = str(raw_title) if raw_title not in (None, "") else None
        docs.append(
            Document(text=text, id=doc_id, metadata=_metadata(file.source, title, text, file.path.stem, row))
        )
    return docs


def _read_pdf(file: SourceFile, data: bytes) -> list[Document]:
    try:
        from pypdf import PdfReader
    except ImportError:
        raise UnreadableFileError(file.path, f"reading PDF files needs pypdf: {PDF_INSTALL_HINT}") from None
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableFileError(file.path, "the PDF is encrypted; save a decrypted copy and index that")
        pages = [page.extract_text() or "" for page in reader.pages]
    except UnreadableFileError:
        raise
    except Exception as exc:  # pypdf raises many kinds on damaged files
        raise UnreadableFileError(
            file.path, f"not a readable PDF ({type(exc).__name__}: {exc}); repair or re-export it"
        ) from None
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        raise UnreadableFileError(
            file.path, "the PDF has no extractable text (a scanned PDF needs OCR first)"
        )
    return [Document(text=text, id=file.source, metadata=_metadata(file.source, None, text, file.path.stem))]


#: Flags that open a file for reading without ever blocking (a FIFO swapped in after the scan).
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def _read_bytes(path: Path, max_file_mb: float | None) -> bytes:
    """The bytes of a regular file, never more than ``max_file_mb`` megabytes of them.

    :func:`discover_files` already checked both; this holds if the file changed since.

    Raises:
        OSError: The file cannot be opened or read.
        UnreadableFileError: It is no longer a regular file, or it grew above the limit.
    """
    with open(os.open(path, _OPEN_FLAGS), "rb") as stream:
        why = _stat_reason(os.fstat(stream.fileno()), None)
        if why is not None:
            raise UnreadableFileError(path, why)
        if max_file_mb is None:
            return stream.read()
        data = stream.read(math.floor(max_file_mb * MB) + 1)
    if len(data) > max_file_mb * MB:
        raise UnreadableFileError(
            path, f"grew above --max-file-mb {max_file_mb:g} while it was read; pass a larger --max-file-mb"
        )
    return data


def read_file(file: SourceFile, *, max_file_mb: float | None = None) -> ReadFile:
    """Reads one file into documents.

    Args:
        file: The file (from :func:`discover_files`).
        max_file_mb: Refuse to read more than this many megabytes (of 2**20 bytes); None: no
            limit. The limit :func:`discover_files` applied, in case the file grew since.

    Returns:
        The file's hash and documents; a text file holding only whitespace gives none.

    Raises:
        UnreadableFileError: The file cannot be read (permissions, no longer a regular file or
            above ``max_file_mb``, bad UTF-8, a bad JSON line, a damaged or encrypted PDF, a PDF
            without text, pypdf missing).
    """
    try:
        data = _read_bytes(file.path, max_file_mb)
    except OSError as exc:
        raise UnreadableFileError(file.path, f"cannot be read ({exc.strerror or exc})") from None
    suffix = file.path.suffix.lower()
    if suffix == ".jsonl":
        docs = _read_jsonl(file, data)
    elif suffix == ".pdf":
        docs = _read_pdf(file, data)
    else:
        docs = _read_text(file, data)
    return ReadFile(file=file, sha256=sha256_hex(data), documents=docs)
