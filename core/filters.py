"""Metadata filters: Chroma ``where`` clauses, validated once and evaluated over a strategy's rows.

Every strategy takes ``retrieve(query, filter={...})`` with the operators of Chroma's
``where`` (``$eq $ne $gt $gte $lt $lte $in $nin`` and the logical ``$and $or``), with
Chroma's own semantics, so a filter an app already passes to its Chroma store means the
same thing here:

- a bare value is ``$eq``: ``{"tenant": "acme"}`` == ``{"tenant": {"$eq": "acme"}}``;
- equality compares numbers by value (``2`` matches ``2.0``) but never a bool with a
  number, and a list value never equals a scalar;
- ``$gt $gte $lt $lte`` take an int or a float and match numeric values only, compared by
  value. The one known difference from Chroma (1.5): Chroma compares an int value with a
  fractional bound as if the bound were cut to an int (``{"level": {"$gte": 1.5}}`` matches
  ``level: 1`` there, not here); with whole-number bounds, or float values, the two agree;
- ``$ne`` and ``$nin`` are the negations of ``$eq`` and ``$in``: they also match rows that
  lack the field;
- ``$in`` / ``$nin`` take a non-empty list of values of one type;
- ``$and`` / ``$or`` take a list of at least two clauses; a clause has exactly one key.

An operator this module does not know (``$contains``, ``$exists``, a ``where_document``
clause, ...) is a :class:`FilterError` that names it: a filter is honoured or refused,
never ignored.

:class:`MetadataColumns` answers a filter over many rows at once: per field it keeps the
rows of every value and a numeric column, built lazily the first time a field is filtered
on and extended as rows are appended (rows never change), so a filter costs a few numpy
operations per clause instead of a Python test per row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from core.store import sanitize_value

__all__ = [
    "COMPARISON_OPERATORS",
    "LOGICAL_OPERATORS",
    "FilterError",
    "MetadataColumns",
    "MetadataFilter",
    "parse_filter",
]

COMPARISON_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
"""Comparison operators a filter may use on a field."""
LOGICAL_OPERATORS = ("$and", "$or")
"""Operators that combine clauses."""

BoolMask = npt.NDArray[np.bool_]
_RANGE = {"$gt": np.greater, "$gte": np.greater_equal, "$lt": np.less, "$lte": np.less_equal}
_HINT = (
    "use Chroma's where syntax, e.g. {'tenant': 'acme'} or "
    "{'$and': [{'tenant': 'acme'}, {'year': {'$gte': 2020}}]}"
)


class FilterError(ValueError):
    """A metadata filter that is malformed or uses an operator bridge-rag cannot honour."""


def _key(value: Any) -> tuple[str, Any] | None:
    """The equality key of a metadata value (None: a value no scalar equals, e.g. a list)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)  # Python's 2 == 2.0 and equal hashes: numbers compare by value
    if isinstance(value, str):
        return ("s", value)
    return None


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else float("nan")


# ---------------------------------------------------------------------- the parsed tree
@dataclass(frozen=True)
class _Clause:
    """One field test."""

    field: str
    op: str
    value: Any  # a scalar, or a tuple of scalars for $in / $nin

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        present = self.field in metadata
        raw = sanitize_value(metadata[self.field]) if present else None
        if self.op in _RANGE:
            number = _number(raw)
            return bool(_RANGE[self.op](number, self.value)) if number == number else False
        key = _key(raw) if raw is not None else None
        wanted = (_key(self.value),) if self.op in ("$eq", "$ne") else tuple(_key(v) for v in self.value)
        hit = key is not None and key in wanted
        return hit if self.op in ("$eq", "$in") else not hit

    def mask(self, columns: MetadataColumns, n: int) -> BoolMask:
        column = columns.column(self.field, n)
        if self.op in _RANGE:
            with np.errstate(invalid="ignore"):
                return np.asarray(_RANGE[self.op](column.numbers[:n], self.value), dtype=bool)
        values = (self.value,) if self.op in ("$eq", "$ne") else self.value
        out = np.zeros(n, dtype=bool)
        for v in values:
            rows = column.rows_of(_key(v))
            rows = rows[rows < n] if rows.size and rows[-1] >= n else rows
            if rows.size:
                out[rows] = True
        return out if self.op in ("$eq", "$in") else ~out


@dataclass(frozen=True)
class _Logical:
    op: str
    children: tuple[_Node, ...]

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        results = (c.matches(metadata) for c in self.children)
        return all(results) if self.op == "$and" else any(results)

    def mask(self, columns: MetadataColumns, n: int) -> BoolMask:
        out = self.children[0].mask(columns, n)
        for child in self.children[1:]:
            out = out & child.mask(columns, n) if self.op == "$and" else out | child.mask(columns, n)
        return out


_Node = _Clause | _Logical


@dataclass(frozen=True)
class MetadataFilter:
    """A validated metadata filter.

    Build one with :func:`parse_filter`; strategies accept the raw ``where`` dict too.

    Attributes:
        where: The filter in Chroma's syntax (bare values spelled out as ``$eq``), ready to
            pass to a Chroma collection.
        fields: The metadata fields it reads.
    """

    root: _Node
    where: dict[str, Any]
    fields: frozenset[str] = field(default_factory=frozenset)

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        """Whether one row's metadata passes (Chroma's semantics; values as Chroma stores them)."""
        return self.root.matches(metadata)

    def mask(self, columns: MetadataColumns) -> BoolMask:
        """Which rows of ``columns`` pass, as a boolean array (one entry per current row)."""
        return columns.mask(self)


def parse_filter(where: Mapping[str, Any] | MetadataFilter | None) -> MetadataFilter | None:
    """Validates a Chroma ``where`` filter.

    Args:
        where: The filter (a mapping in Chroma's syntax), an already parsed filter, or None.

    Returns:
        The parsed filter, or None when ``where`` is None or empty (no filter).

    Raises:
        FilterError: The filter is malformed or uses an operator outside
            :data:`COMPARISON_OPERATORS` and :data:`LOGICAL_OPERATORS`; the message names it.
    """
    if where is None or isinstance(where, MetadataFilter):
        return where
    if not isinstance(where, Mapping):
        raise FilterError(
            f"filter must be a dict in Chroma's where syntax, got {type(where).__name__}; {_HINT}"
        )
    if not where:
        return None
    fields: set[str] = set()
    root, canonical = _parse(where, fields, "filter")
    return MetadataFilter(root=root, where=canonical, fields=frozenset(fields))


def _only_item(where: Mapping[Any, Any], rule: str, hint: str) -> tuple[Any, Any]:
    """The one (key, value) of ``where``; else a FilterError: ``rule``, the keys found, ``hint``."""
    if len(where) != 1:
        keys = ", ".join(repr(k) for k in where) or "none"
        raise FilterError(f"{rule}, got {keys}; {hint}")
    ((key, value),) = where.items()
    return key, value


def _parse(where: Any, fields: set[str], path: str) -> tuple[_Node, dict[str, Any]]:
    if not isinstance(where, Mapping):
        raise FilterError(f"{path} must be a dict, got {type(where).__name__} ({where!r}); {_HINT}")
    key, value = _only_item(
        where,
        f"{path} must have exactly one key",
        "combine several conditions with {'$and': [{...}, {...}]} (Chroma's rule)",
    )
    if not isinstance(key, str):
        raise FilterError(f"{path} has a non-string key {key!r}; field names are strings")
    if key in LOGICAL_OPERATORS:
        if not isinstance(value, list | tuple) or len(value) < 2:
            raise FilterError(
                f"{path}: {key} takes a list of at least two clauses, got {value!r}; "
                "a single clause needs no " + key
            )
        parsed = [_parse(c, fields, f"{path}.{key}[{i}]") for i, c in enumerate(value)]
        return _Logical(key, tuple(p[0] for p in parsed)), {key: [p[1] for p in parsed]}
    if key.startswith("$"):
        raise FilterError(
            f"{path}: unsupported filter operator {key!r} at the top of a clause; bridge-rag honours "
            f"{', '.join(LOGICAL_OPERATORS)} there and {', '.join(COMPARISON_OPERATORS)} on a field"
        )
    fields.add(key)
    if isinstance(value, Mapping):
        op, operand = _only_item(
            value,
            f"{path}: the condition on {key!r} must have exactly one operator",
            "combine several with $and",
        )
    else:
        op, operand = "$eq", value
    if op not in COMPARISON_OPERATORS:
        raise FilterError(
            f"{path}: unsupported filter operator {op!r} on field {key!r}; bridge-rag honours "
            f"{', '.join(COMPARISON_OPERATORS)} (and {', '.join(LOGICAL_OPERATORS)} between clauses)"
        )
    return _Clause(key, op, _operand(op, operand, key, path)), {key: {op: _plain(operand)}}


def _plain(operand: Any) -> Any:
    return list(operand) if isinstance(operand, list | tuple) else operand


def _operand(op: str, operand: Any, key: str, path: str) -> Any:
    where = f"{path}: {op} on {key!r}"
    if op in _RANGE:
        if isinstance(operand, bool) or not isinstance(operand, int | float):
            raise FilterError(f"{where} takes an int or a float, got {operand!r}")
        return operand
    if op in ("$eq", "$ne"):
        if not isinstance(operand, str | int | float):
            raise FilterError(f"{where} takes a str, int, float or bool, got {operand!r}")
        return operand
    if not isinstance(operand, list | tuple) or not operand:
        raise FilterError(f"{where} takes a non-empty list of values, got {operand!r}")
    kinds = {type(v) for v in operand}
    if len(kinds) != 1 or not kinds <= {str, int, float, bool}:
        raise FilterError(
            f"{where} takes values of one type (str, int, float or bool), got {list(operand)!r} "
            "(Chroma's rule; write 1.0 instead of 1 to mix with floats)"
        )
    return tuple(operand)


# ---------------------------------------------------------------------- columns
class _Column:
    """One field's values over the rows: the rows of each value, and the numbers."""

    def __init__(self) -> None:
        self.size = 0
        self._rows: dict[tuple[str, Any], list[int]] = {}
        self._arrays: dict[tuple[str, Any], npt.NDArray[np.int64]] = {}
        self._numbers: list[float] = []
        self.numbers: npt.NDArray[np.float64] = np.zeros(0, dtype=np.float64)

    def extend(self, values: Sequence[Any]) -> None:
        for i, raw in enumerate(values, start=self.size):
            value = sanitize_value(raw) if raw is not None else None
            key = _key(value) if value is not None else None
            if key is not None:
                self._rows.setdefault(key, []).append(i)
            self._numbers.append(_number(value))
        self.size += len(values)
        self._arrays = {}
        self.numbers = np.asarray(self._numbers, dtype=np.float64)

    def rows_of(self, key: tuple[str, Any] | None) -> npt.NDArray[np.int64]:
        if key is None:
            return np.zeros(0, dtype=np.int64)
        arrays = self._arrays
        found = arrays.get(key)
        if found is None:
            found = np.asarray(self._rows.get(key, ()), dtype=np.int64)
            arrays[key] = found
        return found


class MetadataColumns:
    """Per-field value indexes over a growing list of row metadata (rows never change).

    Args:
        metadatas: A callable returning the current list of row metadata (the table's list,
            which only grows by appending).
    """

    def __init__(self, metadatas: Callable[[], Sequence[Mapping[str, Any]]]) -> None:
        self._metadatas = metadatas
        self._columns: dict[str, _Column] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._metadatas())

    def column(self, name: str, n: int) -> _Column:
        """The column of field ``name``, covering at least the first ``n`` rows."""
        col = self._columns.get(name)
        if col is not None and col.size >= n:
            return col
        with self._lock:
            col = self._columns.setdefault(name, _Column())
            rows = self._metadatas()
            if col.size < len(rows):
                col.extend([m.get(name) for m in rows[col.size :]])
            return col

    def mask(self, flt: MetadataFilter) -> BoolMask:
        """Which of the current rows pass ``flt``, as a boolean array (one entry per row)."""
        return flt.root.mask(self, len(self))
