"""The typed config base every strategy's settings derive from.

A strategy's config is a frozen dataclass of plain values. :class:`StrategyConfig` checks
every field against its real annotated type (``int`` refuses bools, ``float`` takes ints,
``X | None``, ``tuple[int, ...]``), then the class's own range checks (:meth:`checks`), and
reads and writes JSON-ready dicts (:meth:`from_dict` / :meth:`to_dict`) for the index manifest.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, TypeVar

from core.strategies.base import DEFAULT_MAX_QUERY_CHARS

__all__ = ["ChunkingConfig", "StrategyConfig"]

C = TypeVar("C", bound="StrategyConfig")


def _type_name(kind: Any) -> str:
    return {int: "an int", float: "a number", bool: "a bool", str: "a str"}.get(kind, str(kind))


def _matches(value: Any, kind: Any, finite: bool) -> bool:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, k, finite) for k in typing.get_args(kind))
    if kind is type(None):
        return value is None
    if origin is tuple:
        item = typing.get_args(kind)[0]
        return isinstance(value, tuple | list) and all(_matches(v, item, finite) for v in value)
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and (not finite or math.isfinite(value))
    return isinstance(value, kind)


@dataclass(frozen=True)
class StrategyConfig:
    """Settings of a strategy: validated by type, then by range (the shared checks, then :meth:`checks`).

    Attributes:
        k: Default number of results.
        max_query_chars: Longest accepted query.

    Raises:
        TypeError: A field's value does not have the field's type.
        ValueError: A range check fails (the message names the setting).
    """

    #: Require float settings to be finite at the type check (else ``checks`` decide).
    finite_floats: ClassVar[bool] = False

    k: int = 4
    max_query_chars: int = DEFAULT_MAX_QUERY_CHARS

    def __post_init__(self) -> None:
        label = type(self).__name__
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            value, kind = getattr(self, f.name), hints[f.name]
            if typing.get_origin(kind) is tuple and isinstance(value, list):
                value = tuple(value)
                object.__setattr__(self, f.name, value)
            if not _matches(value, kind, self.finite_floats):
                args = [k for k in typing.get_args(kind) if k is not type(None)] or [kind]
                finite = "a finite number" if self.finite_floats and float in args else None
                expected = finite or " or ".join(_type_name(k) for k in args)
                if typing.get_origin(kind) is tuple:
                    expected = "ints" if typing.get_args(kind)[0] is int else str(kind)
                raise TypeError(f"{label}: {f.name} must be {expected}, got {value!r}")
        shared = [("k must be >= 1", self.k >= 1), ("max_query_chars must be >= 1", self.max_query_chars > 0)]
        for message, ok in [*shared, *self.checks()]:
            if not ok:
                raise ValueError(f"{label}: {message}")

    def checks(self) -> list[tuple[str, bool]]:
        """The class's own range checks: ``(message, passed)`` pairs, the first failure raised."""
        return []

    @classmethod
    def from_dict(cls: type[C], data: Mapping[str, Any]) -> C:
        """Builds a config from a mapping (a manifest's), ignoring unknown keys."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready data (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def merged(cls: type[C], config: C | None, overrides: Mapping[str, Any], label: str) -> C:
        """``config`` (or the defaults) with keyword ``overrides`` applied.

        Raises:
            TypeError: An override names no field of the config.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise TypeError(f"unknown {label} setting(s): {', '.join(unknown)}; see {cls.__name__}")
        return cls(**{**(config.to_dict() if config is not None else {}), **overrides})


@dataclass(frozen=True)
class ChunkingConfig:
    """The chunking settings of a strategy that cuts its own chunks.

    ``BridgeConfig`` and ``BubbleConfig`` derive from it (after :class:`StrategyConfig`), so
    both have these fields, with these names and defaults, and the same range checks.

    Attributes:
        chunk_size: Largest chunk, in characters (chunks keep whole sentences); None = what
            fits the embedder's input window (:func:`core.embed.window_chars`).
        chunk_overlap: Characters of trailing sentences repeated in the next chunk.
    """

    chunk_size: int | None = None
    chunk_overlap: int = 64

    def chunking_checks(self) -> list[tuple[str, bool]]:
        """Range checks of the chunking settings, as a strategy config's ``checks()`` lists them."""
        return [
            ("chunk_size must be None or >= 1", self.chunk_size is None or self.chunk_size >= 1),
            (
                "chunk_overlap must be >= 0 and below chunk_size",
                0 <= self.chunk_overlap < (self.chunk_size if self.chunk_size is not None else 1 << 30),
            ),
        ]
