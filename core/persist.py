"""Crash-safe file primitives: atomic writes (write, fsync, rename) and guarded reads.

Every index file goes through :func:`atomic_write_bytes`, so a reader sees either the old
file or the new one, never a torn write. Nothing here uses pickle.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["atomic_write_bytes", "read_bytes"]


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Writes ``data`` to ``path`` atomically.

    The bytes go to a temporary file in the same directory, which is flushed to disk and
    then renamed over ``path``; the directory entry is synced too.

    Args:
        path: Destination file. Its parent directory must exist.
        data: The complete new contents.

    Raises:
        FileNotFoundError: The parent directory does not exist.
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
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(parent)


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
