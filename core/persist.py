"""The one home of saving: crash-safe files and versioned, checksummed index directories.

No pickle, ever. Every index file goes through :func:`atomic_write_bytes` (write, fsync,
rename), so a reader sees either the old file or the new one, never a torn write.

Layout::

    DIR/CURRENT            names the active generation, e.g. "gen-000002" (atomically replaced)
    DIR/gen-000001/        the previous save, kept as a fallback
    DIR/gen-000002/        the current save: its files plus manifest.json

A save writes a whole new generation into a temporary directory, fsyncs every file, renames
the directory into place and only then points ``CURRENT`` at it, so a crash at any moment
leaves the previous generation loadable. ``manifest.json`` records the index kind, its
format version, and the size and SHA-256 of every file; loading checks all of them.

This module assumes one writer per directory at a time; any number of readers may load
while a save runs.

Arrays are stored with ``np.save(..., allow_pickle=False)`` and everything else as JSON,
so loading an index never executes code from the files it reads.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import mmap
import os
import re
import secrets
import shutil
import tokenize
import warnings
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "FORMAT",
    "MAP_MIN_BYTES",
    "CorruptIndexError",
    "FileData",
    "IndexFiles",
    "array_from_bytes",
    "array_to_bytes",
    "array_view",
    "atomic_write_bytes",
    "current_generation",
    "index_kind",
    "json_from_bytes",
    "json_to_bytes",
    "load_index",
    "load_index_generation",
    "read_bytes",
    "save_index",
]

#: The ``format`` field of every manifest.
FORMAT = "bridge-rag-index"

CURRENT = "CURRENT"
MANIFEST = "manifest.json"
_GEN_RE = re.compile(r"gen-(\d{6,})")
_TMP_RE = re.compile(r"gen-\d{6,}\.tmp-[0-9a-f]+")
_SHA_RE = re.compile(r"[0-9a-f]{64}")
_KEEP = 2  # generations kept after a save: the new one and the previous one
_HASH_THREADS = max(1, min(4, os.cpu_count() or 1))  # threads that verify a generation's files
_NPY_MAGIC = b"\x93NUMPY"

#: Index files at least this large whose names end in one of :data:`MAPPED_SUFFIXES` are
#: memory-mapped read-only when a generation is loaded (smaller ones, under a page, are read
#: into memory: mapping them would share nothing).
MAP_MIN_BYTES = 4096
MAPPED_SUFFIXES = (".npy", ".faiss")

#: The contents of one index file: bytes, or a read-only view of the memory-mapped file.
FileData = bytes | memoryview


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, exclusive: bool = False) -> None:
    """Writes ``data`` to ``path`` atomically.

    The bytes go to a temporary file in the same directory, which is flushed to disk and
    then renamed over ``path`` (``exclusive``: hard-linked to it, which fails when ``path``
    exists); the directory entry is synced too.

    Args:
        path: Destination file. Its parent directory must exist.
        data: The complete new contents.
        exclusive: Create ``path`` only if it does not exist, as one atomic step.

    Raises:
        FileNotFoundError: The parent directory does not exist.
        FileExistsError: ``exclusive`` and ``path`` exists.
        TypeError: ``data`` is not bytes-like.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    target = Path(path)
    parent = target.parent
    if not parent.is_dir():
        raise FileNotFoundError(f"directory {str(parent)!r} does not exist; create it first")
    tmp = parent / f".{target.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if exclusive and _link_exclusive(tmp, target):
            tmp.unlink()
        else:
            os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_path(parent)


def _link_exclusive(source: Path, target: Path) -> bool:
    """Hard-links ``source`` to a new ``target``; False where the file system has no hard links.

    Raises:
        FileExistsError: ``target`` exists.
    """
    try:
        os.link(source, target)
    except FileExistsError:
        raise
    except OSError as err:  # no hard links here (EPERM, ENOTSUP, ...): a plain check, then a rename
        if target.exists():
            raise FileExistsError(errno.EEXIST, "file exists", str(target)) from err
        return False
    return True


def read_bytes(path: str | os.PathLike[str], what: str = "file") -> bytes:
    """Reads a whole file, with an error message that names what was expected.

    Args:
        path: The file to read.
        what: What the file should hold, for the error message.

    Returns:
        The file's bytes.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no {what} at {str(p)!r}")
    return p.read_bytes()


class CorruptIndexError(ValueError):
    """A generation is incomplete or damaged: a file is missing, truncated or altered."""


# --------------------------------------------------------------------- byte helpers


def array_to_bytes(a: npt.NDArray[Any]) -> bytes:
    """Serialises an array in ``.npy`` format, without pickle.

    Args:
        a: A numeric (or fixed-width string) array.

    Returns:
        The ``.npy`` bytes.

    Raises:
        TypeError: ``a`` is not an ndarray.
        ValueError: ``a`` holds Python objects, which would need pickle.
    """
    if not isinstance(a, np.ndarray):
        raise TypeError(f"expected a numpy array, got {type(a).__name__}")
    if a.dtype.hasobject:
        raise ValueError("arrays of Python objects cannot be stored (they would need pickle)")
    buffer = io.BytesIO()
    np.save(buffer, a, allow_pickle=False)
    return buffer.getvalue()


def _npy_layout(data: memoryview) -> tuple[np.dtype[Any], tuple[int, ...], bool, int]:
    """Parses and checks a ``.npy`` header: ``(dtype, shape, fortran_order, data offset)``.

    The header is parsed here and the data length checked against it before anything is
    allocated, so a damaged header can neither raise an unexpected error nor ask for
    terabytes of memory.
    """
    if bytes(data[: len(_NPY_MAGIC)]) != _NPY_MAGIC:
        raise ValueError("not a .npy array (bad magic bytes)")
    # Only the header is copied: 10 or 12 bytes of prefix plus the length they announce.
    prefix = bytes(data[:12])
    header_end = 10 + int.from_bytes(prefix[8:10], "little")
    if prefix[6:7] == b"\x02" and len(prefix) == 12:
        header_end = 12 + int.from_bytes(prefix[8:12], "little")
    buffer = io.BytesIO(bytes(data[: min(header_end, len(data))]))
    try:
        with warnings.catch_warnings():  # a damaged dtype can name a deprecated alias ("<a8")
            warnings.simplefilter("error")
            major_minor = np.lib.format.read_magic(buffer)
            if major_minor == (1, 0):
                shape, fortran_order, found = np.lib.format.read_array_header_1_0(buffer)
            elif major_minor == (2, 0):
                shape, fortran_order, found = np.lib.format.read_array_header_2_0(buffer)
            else:
                raise ValueError(f"unsupported .npy format version {major_minor}")
    except (
        ValueError,
        OSError,
        EOFError,
        TypeError,
        SyntaxError,
        tokenize.TokenError,
        KeyError,
        Warning,
    ) as err:
        raise ValueError(f"malformed .npy array: {err}") from err
    if found.hasobject:
        raise ValueError("malformed .npy array: it holds Python objects, which would need pickle")
    if found.itemsize == 0:
        raise ValueError(f"malformed .npy array: zero-size items (dtype {found})")
    offset = buffer.tell()
    expected, present = math.prod(shape) * found.itemsize, len(data) - offset
    if present < expected:
        raise ValueError(
            f"malformed .npy array: truncated ({present} data bytes, the header announces {expected})"
        )
    if present > expected:
        raise ValueError(f"malformed .npy array: {present - expected} trailing bytes")
    return found, shape, fortran_order, offset


def array_view(
    b: bytes | bytearray | memoryview | mmap.mmap,
    *,
    dtype: npt.DTypeLike | None = None,
    ndim: int | None = None,
) -> npt.NDArray[Any]:
    """A read-only array over ``.npy`` bytes without copying them, never unpickling anything.

    Over a memory-mapped index file (:class:`IndexFiles`) the array shares the page cache
    with every other process that maps the same file, so N workers hold one copy.

    Args:
        b: ``.npy`` bytes, or a buffer over them (a memory map).
        dtype: The dtype the array must have, or None to accept any.
        ndim: The number of dimensions it must have, or None to accept any.

    Returns:
        A read-only array that keeps ``b`` alive.

    Raises:
        ValueError: As :func:`array_from_bytes`.
    """
    data = memoryview(b).cast("B") if not isinstance(b, memoryview) else b.cast("B")
    found, shape, fortran_order, offset = _npy_layout(data)
    flat = np.frombuffer(data, dtype=found, count=math.prod(shape), offset=offset)
    array = flat.reshape(shape[::-1]).T if fortran_order else flat.reshape(shape)
    if dtype is not None and array.dtype != np.dtype(dtype):
        raise ValueError(f"expected an array of dtype {np.dtype(dtype)}, got {array.dtype}")
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"expected a {ndim}-D array, got shape {array.shape}")
    array.flags.writeable = False
    return array


def array_from_bytes(
    b: bytes | bytearray | memoryview | mmap.mmap,
    *,
    dtype: npt.DTypeLike | None = None,
    ndim: int | None = None,
) -> npt.NDArray[Any]:
    """Reads an array written by :func:`array_to_bytes` into a new array, never unpickling anything.

    :func:`array_view` reads it without a copy (read-only).

    Args:
        b: ``.npy`` bytes.
        dtype: The dtype the array must have, or None to accept any.
        ndim: The number of dimensions it must have, or None to accept any.

    Returns:
        A new, writable array.

    Raises:
        ValueError: The bytes are not a complete ``.npy`` array, hold pickled objects, have
            trailing data, or the dtype / ndim differ from the expected ones.
    """
    return array_view(b, dtype=dtype, ndim=ndim).copy()


def json_to_bytes(obj: Any) -> bytes:
    """Serialises JSON data as UTF-8 with sorted keys (byte-identical for equal data).

    Args:
        obj: JSON-compatible data (dicts with str keys, lists, str, int, finite float, bool,
            None).

    Returns:
        The UTF-8 bytes.

    Raises:
        TypeError: ``obj`` holds something JSON cannot represent.
        ValueError: ``obj`` holds NaN or infinity, or a circular reference.
    """
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def json_from_bytes(b: bytes | bytearray | memoryview) -> Any:
    """Parses UTF-8 JSON written by :func:`json_to_bytes`.

    Args:
        b: The bytes.

    Returns:
        The decoded data.

    Raises:
        ValueError: The bytes are not valid UTF-8 or not valid (standard) JSON.
    """
    try:
        return json.loads(bytes(b).decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"malformed JSON: {err}") from err


# --------------------------------------------------------------------- paths


def _check_file_name(name: Any) -> str:
    """Accepts only plain file names, so paths inside an index never resolve outside it."""
    if (
        not isinstance(name, str)
        or name in {"", ".", "..", MANIFEST}
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or os.path.isabs(name)
    ):
        raise ValueError(
            f"invalid index file name {name!r}: use a plain name (no '/', '..', or {MANIFEST!r})"
        )
    return name


def _generation_name(number: int) -> str:
    return f"gen-{number:06d}"


def _generations(root: Path) -> list[tuple[int, Path]]:
    """Lists the committed generation directories, oldest first."""
    found = []
    for entry in root.iterdir():
        match = _GEN_RE.fullmatch(entry.name)
        if match is not None and entry.is_dir():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def index_kind(directory: str | os.PathLike[str]) -> str | None:
    """The kind of index ``directory`` holds (``"bridge"``, ...), from one manifest.

    The manifest read is that of the generation ``CURRENT`` names, else that of the newest
    generation whose manifest reads.

    Returns:
        The kind; ``""`` for an index whose kind cannot be read (damaged manifests, a folder
        that cannot be listed); None where there is no index.
    """
    root = Path(directory)
    try:
        if not root.is_dir():
            return None
        current = _read_current(root)
        kind = _manifest_kind(root / current) if current is not None else None
        if kind is not None:
            return kind
        generations = [generation for _, generation in reversed(_generations(root))]
        for generation in generations:
            kind = _manifest_kind(generation)
            if kind is not None:
                return kind
        return "" if generations or (root / CURRENT).is_file() else None
    except OSError:
        return ""


def current_meta(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``meta`` the manifest of the generation ``CURRENT`` names records (None: unreadable)."""
    root = Path(directory)
    current = _read_current(root)
    document = _manifest(root / current) if current is not None else None
    meta = document.get("meta") if document is not None else None
    return meta if isinstance(meta, dict) else None


def _manifest_kind(generation: Path) -> str | None:
    """The ``kind`` a generation's manifest records (None: no readable bridge-rag manifest)."""
    document = _manifest(generation)
    kind = document.get("kind") if document is not None else None
    return str(kind) if kind is not None else None


def _manifest(generation: Path) -> dict[str, Any] | None:
    """A generation's bridge-rag manifest, read without checks of its files (None: unreadable)."""
    if generation.is_symlink():
        return None
    try:
        document = json_from_bytes((generation / MANIFEST).read_bytes())
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) and document.get("format") == FORMAT else None


def _read_current(root: Path) -> str | None:
    """Returns the generation CURRENT names, or None when it is missing or not a generation name."""
    try:
        text = (root / CURRENT).read_bytes().decode("utf-8", "replace").strip()
    except OSError:
        return None
    return text if _GEN_RE.fullmatch(text) else None


def _fsync_path(path: Path) -> None:
    """Flushes a file or directory to disk (where the platform allows directory fds)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - file systems without directory fsync
        pass
    finally:
        os.close(fd)


def _inside(path: Path, directory: Path) -> bool:
    real, base = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([real, base]) == base


class IndexFiles(Mapping[str, FileData]):
    """The files of one loaded generation, every one verified against its SHA-256.

    Small files are read into memory (``bytes``). Large arrays (``.npy`` and ``.faiss`` files
    of at least :data:`MAP_MIN_BYTES`) are memory-mapped read-only (``memoryview``), so the
    worker processes of one machine that load the same generation share one copy of them in
    the page cache; :func:`array_view` reads such a file without copying it.

    The guarantee behind the mapping: a file's SHA-256 is computed over the mapped bytes
    themselves before anything reads them, and the files of a committed generation are
    never written again (a save writes a new generation; pruning an old one unlinks its
    files, which leaves existing mappings intact). So what a worker reads is what was
    verified. A file replaced by hand under a running worker is outside that guarantee.
    """

    def __init__(
        self, directory: Path, data: Mapping[str, FileData], identities: Mapping[str, tuple[int, int]]
    ):
        self.directory = directory
        self._data = dict(data)
        self._identities = dict(identities)

    def __getitem__(self, name: str) -> FileData:
        return self._data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def is_mapped(self, name: str) -> bool:
        """Whether ``name`` is memory-mapped (rather than read into memory)."""
        return isinstance(self._data.get(name), memoryview)

    def open_verified(self, name: str) -> int:
        """Opens the verified file ``name`` read-only, for a library that maps it itself.

        Returns:
            A file descriptor of the very file that was verified (the caller closes it).

        Raises:
            CorruptIndexError: The path now names another file than the one verified.
            KeyError: No such file in the generation.
        """
        identity = self._identities[name]
        fd = os.open(self.directory / name, os.O_RDONLY)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != identity:
            os.close(fd)
            raise CorruptIndexError(f"index file {name!r} was replaced after it was verified; load again")
        return fd


# --------------------------------------------------------------------- save


def save_index(
    path: str | os.PathLike[str],
    files: Mapping[str, bytes],
    manifest: Mapping[str, Any],
    *,
    kind: str,
    version: int,
    keep_previous: bool = True,
) -> Path:
    """Saves one generation of an index, atomically.

    Steps: write every file into ``gen-N.tmp-<random>`` (fsync each), write and fsync
    ``manifest.json``, rename the directory to ``gen-N``, fsync ``path``, atomically point
    ``CURRENT`` at it, then delete generations other than the new one and the previous
    current one (plus leftovers of crashed saves). With ``keep_previous=False`` every other
    generation goes too: a save after a delete leaves no file that still holds the deleted
    data (a reader loading an old generation meanwhile retries on the new one).

    Args:
        path: The index directory; created when missing.
        files: File name (plain, no directories) to contents.
        manifest: JSON-compatible metadata, returned as ``meta`` by :func:`load_index`.
        kind: What the index is (e.g. ``"bridge"``); loading checks it.
        version: The index format version; loading checks it.
        keep_previous: Keep the previous current generation (and up to the usual number of
            others) beside the new one.

    Returns:
        The new generation's directory.

    Raises:
        ValueError: A file name is not plain, ``kind`` is empty, or ``manifest`` holds NaN.
        TypeError: A file's contents are not bytes, or ``manifest`` is not JSON-compatible.
    """
    if not isinstance(kind, str) or not kind:
        raise ValueError("kind must be a non-empty string")
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"version must be an int, got {type(version).__name__}")
    for name, data in files.items():
        _check_file_name(name)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"contents of {name!r} must be bytes, got {type(data).__name__}")
    meta = json_from_bytes(json_to_bytes(dict(manifest)))  # fails early on non-JSON data

    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    previous = _read_current(root)
    existing = _generations(root)
    number = (existing[-1][0] if existing else 0) + 1
    final = root / _generation_name(number)
    tmp = root / f"{final.name}.tmp-{secrets.token_hex(6)}"
    tmp.mkdir()
    try:
        entries: dict[str, dict[str, Any]] = {}
        for name, data in files.items():
            blob = bytes(data)
            with open(tmp / name, "xb") as fh:
                fh.write(blob)
                fh.flush()
                os.fsync(fh.fileno())
            entries[name] = {"sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)}
        document = {
            "format": FORMAT,
            "kind": kind,
            "version": version,
            "created": datetime.now(UTC).isoformat(),
            "files": entries,
            "meta": meta,
        }
        with open(tmp / MANIFEST, "xb") as fh:
            fh.write(json_to_bytes(document))
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_path(tmp)
        os.rename(tmp, final)  # fails rather than merging if another writer made gen-N
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_path(root)
    atomic_write_bytes(root / CURRENT, f"{final.name}\n".encode())
    _prune(root, keep_current=final.name, keep_previous=previous, keep=_KEEP if keep_previous else 1)
    return final


def _prune(root: Path, *, keep_current: str, keep_previous: str | None, keep: int = _KEEP) -> None:
    """Deletes old generations and the debris of crashed saves, keeping ``keep`` generations.

    The current one is always kept, then the previous current one, then the newest others.
    """
    generations = [p for _, p in _generations(root)]
    kept = {keep_current}
    if keep > 1 and keep_previous is not None and (root / keep_previous).is_dir():
        kept.add(keep_previous)
    for candidate in reversed(generations):  # without a usable previous one, keep the newest others
        if len(kept) >= keep:
            break
        kept.add(candidate.name)
    for entry in root.iterdir():
        stale_tmp = _TMP_RE.fullmatch(entry.name) is not None or entry.name.startswith(f".{CURRENT}.tmp-")
        stale_gen = _GEN_RE.fullmatch(entry.name) is not None and entry.name not in kept
        if stale_tmp or stale_gen:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


# --------------------------------------------------------------------- load


def _read_verified(
    file_path: Path, name: str, entry: Mapping[str, Any], generation: str, *, memory_map: bool
) -> tuple[FileData, tuple[int, int]]:
    """Reads (or maps) one index file and checks its size and SHA-256 over the bytes read."""
    try:
        with open(file_path, "rb") as fh:
            st = os.fstat(fh.fileno())
            size = st.st_size
            if size != entry["bytes"]:
                data: FileData = b""
            elif memory_map and size >= max(MAP_MIN_BYTES, 1) and name.endswith(MAPPED_SUFFIXES):
                data = memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
            else:
                data = fh.read()
    except OSError as err:  # removed while we read it
        raise CorruptIndexError(f"index file {name!r} in {generation} could not be read: {err}") from err
    if size != entry["bytes"] or len(data) != size or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise CorruptIndexError(
            f"index file {name!r} in {generation} is truncated or corrupted "
            f"({size} bytes, expected {entry['bytes']} with the recorded SHA-256)"
        )
    return data, (st.st_dev, st.st_ino)


def _load_generation(
    root: Path, generation: Path, *, kind: str, version: int, memory_map: bool
) -> tuple[str, dict[str, Any], IndexFiles]:
    if generation.is_symlink() or not _inside(generation, root):
        raise ValueError(f"{generation.name} resolves outside the index directory {str(root)!r}")
    manifest_path = generation / MANIFEST
    if manifest_path.is_symlink() or not manifest_path.is_file():
        raise CorruptIndexError(f"{generation.name} has no {MANIFEST}; the save did not complete")
    try:
        document = json_from_bytes(manifest_path.read_bytes())
    except (OSError, ValueError) as err:
        raise CorruptIndexError(f"{generation.name}/{MANIFEST} is truncated or corrupted: {err}") from err
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(
            f"{str(generation)!r} is not a bridge-rag index ({MANIFEST} has no format {FORMAT!r})"
        )
    found_kind = document.get("kind")
    if found_kind != kind:
        raise ValueError(f"this directory holds a {found_kind} index, not {kind}")
    found_version = document.get("version")
    if found_version != version:
        raise ValueError(
            f"index format version {found_version} is not supported by this bridge-rag "
            f"(reads version {version}); rebuild the index"
        )
    entries = document.get("files")
    meta = document.get("meta")
    if not isinstance(entries, dict) or not isinstance(meta, dict):
        raise CorruptIndexError(
            f"{generation.name}/{MANIFEST} is malformed: 'files' and 'meta' must be objects"
        )

    listed: list[tuple[str, Path, dict[str, Any]]] = []
    for name, entry in entries.items():
        _check_file_name(name)
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("sha256"), str)
            or _SHA_RE.fullmatch(entry["sha256"]) is None
            or isinstance(entry.get("bytes"), bool)
            or not isinstance(entry.get("bytes"), int)
        ):
            raise CorruptIndexError(f"{generation.name}/{MANIFEST} has a malformed entry for {name!r}")
        file_path = generation / name
        if not _inside(file_path, generation):
            raise ValueError(f"index file {name!r} is a link that points outside {str(generation)!r}")
        if not file_path.is_file():
            raise CorruptIndexError(
                f"index file {name!r} listed in {generation.name}/{MANIFEST} is missing: the generation "
                "is incomplete or its manifest corrupted"
            )
        listed.append((name, file_path, entry))

    def verify(item: tuple[str, Path, dict[str, Any]]) -> tuple[FileData, tuple[int, int]]:
        name, file_path, entry = item
        return _read_verified(file_path, name, entry, generation.name, memory_map=memory_map)

    # SHA-256 releases the GIL: the files are hashed on a few threads, largest first.
    order = sorted(range(len(listed)), key=lambda i: -int(listed[i][2]["bytes"]))
    with ThreadPoolExecutor(max_workers=_HASH_THREADS) as pool:
        futures = {i: pool.submit(verify, listed[i]) for i in order}
        done = {i: f.exception() for i, f in futures.items()}
    error = next((done[i] for i in range(len(listed)) if done[i] is not None), None)
    if error is not None:  # the first damaged file in manifest order, whatever finished first
        raise error
    files: dict[str, FileData] = {}
    identities: dict[str, tuple[int, int]] = {}
    for i, (name, _, _) in enumerate(listed):
        files[name], identities[name] = futures[i].result()
    return generation.name, meta, IndexFiles(generation, files, identities)


def _load_newest(
    root: Path, *, kind: str, version: int, memory_map: bool
) -> tuple[str, dict[str, Any], IndexFiles]:
    """Loads the newest complete generation, skipping incomplete or damaged ones."""
    first_error: CorruptIndexError | None = None
    for _, generation in reversed(_generations(root)):
        try:
            return _load_generation(root, generation, kind=kind, version=version, memory_map=memory_map)
        except CorruptIndexError as err:
            first_error = first_error or err
    if first_error is not None:
        raise first_error
    raise FileNotFoundError(
        f"no saved index in {str(root)!r}; build one and save it there first "
        "(e.g. BridgeRAG.from_documents(..., persist_directory=...) or `bridge-rag index`)"
    )


def current_generation(path: str | os.PathLike[str]) -> str | None:
    """The generation ``CURRENT`` names in an index directory (one small read), or None.

    Readers poll it to notice a writer's new save cheaply.
    """
    return _read_current(Path(path))


def load_index(
    path: str | os.PathLike[str], *, kind: str, version: int, memory_map: bool = True
) -> tuple[dict[str, Any], IndexFiles]:
    """Loads the current generation of an index directory, checking every byte.

    :func:`load_index_generation` also says which generation it was.

    The generation named by ``CURRENT`` is loaded. When ``CURRENT`` is missing (a crash
    before the first save completed it), the newest complete generation is used. When
    ``CURRENT`` names a generation that does not exist (the directory was copied or edited
    by hand), the newest complete generation is used too, with a ``RuntimeWarning``. A
    damaged current generation is an error, not a reason to fall back silently.

    Args:
        path: The index directory.
        kind: The expected index kind.
        version: The format version this code reads.
        memory_map: Map large arrays read-only instead of reading them into memory
            (:class:`IndexFiles`); False reads every file into private memory.

    Returns:
        ``(meta, files)``: the ``manifest`` given to :func:`save_index` and the verified files.

    Raises:
        FileNotFoundError: ``path`` does not exist or holds no saved index.
        ValueError: Wrong kind or version, a path that resolves outside the directory, or
            a missing, truncated or corrupted file (:class:`CorruptIndexError`, which names
            the file).
    """
    _, meta, files = load_index_generation(path, kind=kind, version=version, memory_map=memory_map)
    return meta, files


def load_index_generation(
    path: str | os.PathLike[str], *, kind: str, version: int, memory_map: bool = True
) -> tuple[str, dict[str, Any], IndexFiles]:
    """:func:`load_index`, with the name of the generation loaded (``"gen-000003"``).

    Raises:
        FileNotFoundError, ValueError: As :func:`load_index`.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(
            f"no index directory at {str(root)!r}; build an index and save it there first "
            "(e.g. BridgeRAG.from_documents(..., persist_directory=...) or `bridge-rag index`)"
        )
    for attempt in range(3):
        current = _read_current(root)
        if current is None:
            return _load_newest(root, kind=kind, version=version, memory_map=memory_map)
        generation = root / current
        if not generation.is_dir():
            warnings.warn(
                f"{CURRENT} in {str(root)!r} names {current}, which is missing; loading the newest "
                "complete generation instead",
                RuntimeWarning,
                stacklevel=2,
            )
            return _load_newest(root, kind=kind, version=version, memory_map=memory_map)
        try:
            return _load_generation(root, generation, kind=kind, version=version, memory_map=memory_map)
        except CorruptIndexError:
            # A concurrent save may have replaced and pruned this generation while we read it.
            if attempt == 2 or _read_current(root) == current:
                raise
    raise AssertionError("unreachable")  # pragma: no cover
