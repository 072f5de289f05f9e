"""Strings (and JSON objects) stored as one UTF-8 blob and an offsets array, read one at a time.

A strategy keeps the text and metadata of every row it indexed. Held as Python objects,
100,000 chunks cost each worker process tens of MB of private memory and a second or more
to rebuild at load. Saved as two ``.npy`` arrays instead (the UTF-8 bytes of all strings,
and ``n + 1`` int64 offsets into them), a loaded index memory-maps them read-only
(:class:`core.persist.IndexFiles`): the workers of one machine share one copy in the page
cache, a load reads nothing but the header, and a string is decoded only when a result needs it.

Rows only ever get appended (:meth:`PackedStrings.extended` keeps the saved part mapped and
the new strings in a Python list), so a writer that loads an index and adds documents never
copies what was saved.
"""

from __future__ import annotations

import codecs
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

from core.persist import FileData, array_to_bytes, array_view

__all__ = ["PackedJson", "PackedStrings"]

_log = logging.getLogger("bridge_rag.index")
T = TypeVar("T")


def _pack(strings: Sequence[str]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    encoded = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


class _Rows(Sequence[T]):
    """A read-only sequence whose subclasses give its length and one row at a time (:meth:`_row`)."""

    def __len__(self) -> int:
        raise NotImplementedError

    def _row(self, i: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self._row(i) for i in range(*index.indices(len(self)))]
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"row {index} out of range for {n} rows")
        return self._row(i)

    def __iter__(self) -> Iterator[T]:
        for i in range(len(self)):
            yield self._row(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


class PackedStrings(_Rows[str]):
    """A read-only sequence of strings over a UTF-8 blob and its offsets, plus appended strings.

    Args:
        blob: The UTF-8 bytes of the saved strings, back to back.
        offsets: ``len + 1`` non-decreasing offsets into ``blob``, from 0 to ``blob.size``.
        tail: Strings appended since (kept as Python strings).

    Raises:
        ValueError: The offsets do not describe ``blob``.
    """

    def __init__(
        self,
        blob: npt.NDArray[np.uint8] | None = None,
        offsets: npt.NDArray[np.int64] | None = None,
        tail: Sequence[str] = (),
    ) -> None:
        self._blob = np.zeros(0, dtype=np.uint8) if blob is None else blob
        self._offsets = np.zeros(1, dtype=np.int64) if offsets is None else offsets
        o = self._offsets
        if (
            o.ndim != 1
            or o.size < 1
            or int(o[0]) != 0
            or int(o[-1]) != self._blob.size
            or (o.size > 1 and bool(np.any(o[1:] < o[:-1])))
        ):
            raise ValueError("the string offsets do not describe the string bytes; rebuild the index")
        self._saved = o.size - 1
        self._tail = list(tail)

    def check_utf8(self, *, first: int | None = None, last: int | None = None) -> None:
        """Checks that every packed string is valid UTF-8 (one pass over the bytes, no copy kept).

        The whole blob must decode and every offset must fall on the first byte of a
        character, so each string decodes on its own. With ``first`` / ``last``, every
        non-empty string must also start / end with that byte (``{`` and ``}`` of a JSON object).

        Raises:
            ValueError: A string is not valid UTF-8 or does not have the expected ends.
        """
        blob, o = self._blob, self._offsets
        try:
            codecs.utf_8_decode(blob.data, "strict", True)
        except UnicodeDecodeError as exc:
            raise ValueError(f"the packed strings are not valid UTF-8 ({exc}); rebuild the index") from None
        starts, ends = o[:-1], o[1:]
        filled = ends > starts
        if blob.size and bool(np.any((blob[starts[filled]] & 0xC0) == 0x80)):
            raise ValueError("a packed string starts inside a character; rebuild the index")
        if first is not None and bool(np.any(blob[starts[filled]] != first)):
            raise ValueError(f"a packed string does not start with {chr(first)!r}; rebuild the index")
        if last is not None and bool(np.any(blob[ends[filled] - 1] != last)):
            raise ValueError(f"a packed string does not end with {chr(last)!r}; rebuild the index")

    # ------------------------------------------------------------------ sequence
    def __len__(self) -> int:
        return self._saved + len(self._tail)

    def _row(self, i: int) -> str:
        if i >= self._saved:
            return self._tail[i - self._saved]
        start, end = int(self._offsets[i]), int(self._offsets[i + 1])
        return self._blob[start:end].tobytes().decode("utf-8")

    def __repr__(self) -> str:
        return f"PackedStrings({len(self)} strings, {self._saved} packed)"

    # ------------------------------------------------------------------ growth
    def extended(self, more: Sequence[str]) -> PackedStrings:
        """A new sequence: these strings, then ``more`` (the packed part is shared, not copied)."""
        out = PackedStrings.__new__(PackedStrings)
        out._blob, out._offsets, out._saved = self._blob, self._offsets, self._saved
        out._tail = [*self._tail, *more]
        return out

    # ------------------------------------------------------------------ persistence
    @staticmethod
    def to_files(strings: Sequence[str], name: str) -> dict[str, bytes]:
        """``{name}.npy`` (the UTF-8 bytes) and ``{name}_offsets.npy`` for :meth:`from_files`."""
        blob, offsets = _pack(strings)
        return {f"{name}.npy": array_to_bytes(blob), f"{name}_offsets.npy": array_to_bytes(offsets)}

    @classmethod
    def from_files(cls, files: Mapping[str, FileData], name: str) -> PackedStrings:
        """Reads :meth:`to_files` output without copying it (a memory-mapped file stays mapped).

        Raises:
            KeyError: A file is missing.
            ValueError: The files are malformed.
        """
        blob = array_view(files[f"{name}.npy"], dtype=np.uint8, ndim=1)
        offsets = array_view(files[f"{name}_offsets.npy"], dtype=np.int64, ndim=1)
        packed = cls(blob, offsets)
        packed.check_utf8()
        return packed


class PackedJson(_Rows[dict[str, Any]]):
    """A read-only sequence of JSON objects stored as :class:`PackedStrings`; each access decodes a new dict.

    Args:
        strings: The JSON texts.
    """

    def __init__(self, strings: PackedStrings | None = None) -> None:
        self._strings = PackedStrings() if strings is None else strings

    def __len__(self) -> int:
        return len(self._strings)

    def _row(self, i: int) -> dict[str, Any]:
        try:
            value = json.loads(self._strings._row(i))
        except ValueError:
            value = None
        if not isinstance(value, dict):  # only a forged file with a valid checksum gets here
            _log.warning("row %d's metadata in the index files is damaged (read as empty); rebuild it", i)
            return {}
        return value

    def __repr__(self) -> str:
        return f"PackedJson({len(self)} objects)"

    def extended(self, more: Sequence[Mapping[str, Any]]) -> PackedJson:
        """A new sequence: these objects, then ``more``."""
        return PackedJson(self._strings.extended([_dumps(m) for m in more]))

    @staticmethod
    def to_files(objects: Sequence[Mapping[str, Any]], name: str) -> dict[str, bytes]:
        """The objects as :meth:`PackedStrings.to_files` of their JSON texts."""
        return PackedStrings.to_files([_dumps(m) for m in objects], name)

    @classmethod
    def from_files(cls, files: Mapping[str, FileData], name: str) -> PackedJson:
        """Reads :meth:`to_files` output without copying it.

        Every row must be UTF-8 text between ``{`` and ``}`` (checked here in one pass); a row
        whose JSON is still damaged inside (a forged file) reads as an empty object, with a
        logged warning.

        Raises:
            KeyError, ValueError: As :meth:`PackedStrings.from_files`.
        """
        strings = PackedStrings.from_files(files, name)
        strings.check_utf8(first=ord("{"), last=ord("}"))
        return cls(strings)


def _dumps(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
