"""The user's own files as documents: find them under the paths given, read them into :class:`Document`.

Supported: ``.txt`` and ``.md`` (one document per file, UTF-8), ``.jsonl`` (one document per
line: ``text`` required, optional ``id`` and ``title``, every other key is metadata) and
``.pdf`` (one document per file, the text of its pages; needs the optional ``pypdf``:
``pip install 'bridge-rag[pdf]'``).

Every document's id comes from its path relative to the path it was found under (a folder
argument: relative to that folder; a file argument: its name), with POSIX separators; a
``.jsonl`` line's id is its ``id`` if given, else ``relpath#lineN``. Every document carries the
metadata ``source`` (that relative path), ``title`` and ``content_sha256`` (of its text).

Nothing here imports a model, Chroma or a framework: reading a folder is cheap, so a command
can read and check all of its input before it builds anything.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from core.types import Document

__all__ = [
    "PDF_INSTALL_HINT",
    "RESERVED_JSONL_KEYS",
    "SUPPORTED_SUFFIXES",
    "FileScan",
    "ReadFile",
    "SourceFile",
    "UnreadableFileError",
    "discover_files",
    "markdown_title",
    "read_file",
    "sha256_hex",
]

#: File name endings read into documents (compared in lower case).
SUPPORTED_SUFFIXES = (".txt", ".md", ".jsonl", ".pdf")

#: What to run when a PDF cannot be read for lack of pypdf.
PDF_INSTALL_HINT = "pip install 'bridge-rag[pdf]'"

#: Keys of a ``.jsonl`` line that are not copied into metadata: the fields read separately and
#: the per-chunk keys the strategies write themselves.
RESERVED_JSONL_KEYS = frozenset(
    {"text", "id", "title", "source", "content_sha256", "doc_id", "chunk_order", "start_index", "end_index"}
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


@dataclass
class FileScan:
    """The files found under the paths given.

    Attributes:
        files: The supported files, in a stable order (each argument's in sorted path order).
        skipped: Files inside folders that were left out: an unsupported extension, or no
            ``--glob`` pattern matched.
    """

    files: list[SourceFile] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)


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


def _walk(folder: Path) -> Iterable[Path]:
    """Every file under ``folder``, sorted, hidden files and folders (``.git``, ...) left out."""
    for directory, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith("."):
                yield Path(directory) / name


def discover_files(paths: Sequence[str | os.PathLike[str]], *, globs: Sequence[str] = ()) -> FileScan:
    """Finds the files to index under files and folders (folders recursively).

    Args:
        paths: Files and folders.
        globs: Shell patterns (``*.md``, ``notes/**``): a file inside a folder is read only when
            its relative path or its name matches one of them. Files named explicitly are
            always read.

    Returns:
        The supported files and the files skipped inside folders.

    Raises:
        FileNotFoundError: A path does not exist.
        ValueError: A file named explicitly has an unsupported extension, or two files would
            get the same relative path (the same name under two arguments).
    """
    scan = FileScan()
    seen: dict[str, Path] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise FileNotFoundError(f"{str(given)!r} does not exist; pass existing files or folders")
        root = path.absolute()
        if path.is_dir():
            found = []
            for file in _walk(path):
                source = file.relative_to(path).as_posix()
                if _supported(file) and _matches(source, globs):
                    found.append(SourceFile(file, root, source))
                else:
                    scan.skipped.append(file)
        elif _supported(path):
            found = [SourceFile(path, root, path.name)]
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


def _metadata(source: str, title: str, text: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    meta = {k: v for k, v in (extra or {}).items() if k not in RESERVED_JSONL_KEYS}
    meta.update(source=source, title=title, content_sha256=sha256_hex(text))
    return meta


def _read_text(file: SourceFile, data: bytes) -> list[Document]:
    text = _decode(file.path, data)
    if not text.strip():
        return []
    title = (markdown_title(text) if file.path.suffix.lower() == ".md" else None) or file.path.stem
    return [Document(text=text, id=file.source, metadata=_metadata(file.source, title, text))]


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
        title = str(raw_title) if raw_title not in (None, "") else file.path.stem
        docs.append(Document(text=text, id=doc_id, metadata=_metadata(file.source, title, text, row)))
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
    return [Document(text=text, id=file.source, metadata=_metadata(file.source, file.path.stem, text))]


def read_file(file: SourceFile) -> ReadFile:
    """Reads one file into documents.

    Args:
        file: The file (from :func:`discover_files`).

    Returns:
        The file's hash and documents; a text file holding only whitespace gives none.

    Raises:
        UnreadableFileError: The file cannot be read (permissions, bad UTF-8, a bad JSON line,
            a damaged or encrypted PDF, a PDF without text, pypdf missing).
    """
    try:
        data = file.path.read_bytes()
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
