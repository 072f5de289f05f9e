"""Mixin that gives a native structure ``from_bytes`` and path-based ``save`` / ``load``."""

from __future__ import annotations

import os
from typing import Protocol, TypeVar

from core.persist import atomic_write_bytes, read_bytes

_T = TypeVar("_T", bound="_Restorable")


class _Restorable(Protocol):
    def to_bytes(self) -> bytes: ...
    def _restore(self, data: bytes) -> None: ...


class SerializableMixin:
    """Adds ``from_bytes``, ``save`` and ``load`` on top of ``to_bytes`` / ``_restore``."""

    _what = "index file"

    @classmethod
    def from_bytes(cls: type[_T], data: bytes | bytearray | memoryview) -> _T:
        """Rebuilds a structure from :meth:`to_bytes` output.

        Args:
            data: The serialised bytes.

        Returns:
            A new instance with the saved contents.

        Raises:
            TypeError: ``data`` is not bytes-like.
            ValueError: The buffer is truncated, corrupted or of another format version.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        obj = cls()
        obj._restore(bytes(data))
        return obj

    def save(self: _Restorable, path: str | os.PathLike[str]) -> None:
        """Writes :meth:`to_bytes` to ``path`` atomically (temporary file, fsync, rename).

        Args:
            path: Destination file; its directory must exist.
        """
        atomic_write_bytes(path, self.to_bytes())

    @classmethod
    def load(cls: type[_T], path: str | os.PathLike[str]) -> _T:
        """Loads a structure saved with :meth:`save`.

        Args:
            path: The file to read.

        Returns:
            The loaded structure.

        Raises:
            FileNotFoundError: No file at ``path``.
            ValueError: The file is truncated, corrupted or of another format version.
        """
        data = read_bytes(path, getattr(cls, "_what", "index file"))
        obj = cls()
        try:
            obj._restore(data)
        except ValueError as exc:
            raise ValueError(f"{os.fspath(path)}: {exc}") from exc
        return obj
