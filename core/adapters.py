"""The framework-neutral half of the LangChain and LlamaIndex adapters.

What both adapter packages need and neither framework provides: splitting a constructor's
keyword arguments into the retriever's own fields and the strategy's settings, checking
that a named retriever wraps its own strategy, reading the collection behind a framework's
Chroma store, and the helpers of the parent-promotion post-processors. Nothing here imports
LangChain or LlamaIndex.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from core.strategies.base import Searchable
from core.strategies.umg.promotion import Promoted, PromotionItem, promote_to_parents

__all__ = [
    "check_option",
    "check_strategy_type",
    "chroma_collection",
    "lift_option",
    "offset_or_none",
    "promote",
    "public_name",
    "refresh_strategy",
    "scores_or_ranks",
    "split_fields",
    "texts_by_id",
    "umg_store_of",
]

T = TypeVar("T")


def public_name(cls: type) -> str:
    """A strategy class's import path as users write it (``core.strategies.umg.UMGRAG``)."""
    return f"{cls.__module__.removesuffix('.strategy')}.{cls.__qualname__}"


def check_option(name: str, value: Any, kind: type) -> Any:
    """A named retriever's option field, type-checked (bools are not ints, ints are >= 0).

    Raises:
        TypeError: ``value`` is not a ``kind`` (None passes: the strategy's default).
        ValueError: An int option is negative.
    """
    if value is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
        raise TypeError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
    if kind is int and isinstance(value, int) and value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def refresh_strategy(strategy: Any) -> bool:
    """Calls a strategy's ``refresh()`` when it has one (a loaded index follows its writer).

    Returns:
        True when the strategy now serves a newer generation; False otherwise, and for
        searchables without ``refresh`` (test doubles, baselines).
    """
    refresh = getattr(strategy, "refresh", None)
    return bool(refresh()) if callable(refresh) else False


def check_strategy_type(expected: type | None, strategy: T, error: type[Exception]) -> T:
    """Checks that an adapter wraps a strategy, and a named retriever the one it declares.

    Raises:
        error: ``strategy`` does not meet :class:`core.strategies.Searchable`, or is not an
            instance of ``expected`` (when given).
    """
    if not isinstance(strategy, Searchable):
        raise error(
            "strategy must implement core.strategies.Strategy (name, default_k, retrieve, "
            f"add_documents, delete_documents, save); got {type(strategy).__name__}"
        )
    if expected is not None and not isinstance(strategy, expected):
        raise error(f"strategy must be a {public_name(expected)}, got {type(strategy).__name__}")
    return strategy


def lift_option(fields: dict[str, Any], options: dict[str, Any], name: str) -> None:
    """Moves ``options[name]`` (a ``search_kwargs`` entry) to ``fields[name]``, in place.

    Lets users spell a retriever field the framework way (``search_kwargs={"k": 2}``).

    Raises:
        ValueError: The field and the option give different values.
    """
    if name not in options:
        return
    value = options.pop(name)
    if fields.get(name) is not None and fields[name] != value:
        raise ValueError(
            f"{name} is given twice with different values: {name}={fields[name]!r}, "
            f"search_kwargs[{name!r}]={value!r}"
        )
    fields[name] = value


def split_fields(
    settings: Mapping[str, Any], fields: Iterable[str], shared: Iterable[str] = ()
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Splits constructor keyword arguments into retriever fields and strategy settings.

    Args:
        settings: The keyword arguments.
        fields: The retriever's own option fields.
        shared: Fields the strategy's constructor takes too (saved as the index's default);
            given ones that are not None go to both sides.

    Returns:
        ``(fields, strategy settings)``.
    """
    names = set(fields)
    own = {name: value for name, value in settings.items() if name in names}
    rest = {name: value for name, value in settings.items() if name not in names}
    rest.update({name: own[name] for name in shared if own.get(name) is not None})
    return own, rest


def chroma_collection(store: Any, what: str) -> Any:
    """The chromadb Collection behind a framework's Chroma store (``_collection`` in both).

    Raises:
        TypeError: ``store`` has no Chroma collection.
    """
    collection = getattr(store, "_collection", None)
    if collection is None:
        raise TypeError(f"{what}, got {type(store).__name__}")
    return collection


def offset_or_none(value: object) -> int | None:
    """A character offset from metadata: an int (not a bool), else None."""
    return None if isinstance(value, bool) or not isinstance(value, int) else value


def scores_or_ranks(scores: Sequence[object]) -> list[float]:
    """The given scores when every one is a finite number, else scores from the rank order."""
    numbers = [float(s) for s in scores if isinstance(s, int | float) and not isinstance(s, bool)]
    if len(numbers) == len(scores) and all(math.isfinite(s) for s in numbers):
        return numbers
    return [float(len(scores) - i) for i in range(len(scores))]


def texts_by_id(documents: Iterable[tuple[object, str]]) -> dict[str, str]:
    """Full source texts by document id, from ``(id, text)`` pairs.

    Raises:
        ValueError: A document has no id, or two different texts share one.
    """
    texts: dict[str, str] = {}
    for i, (raw, text) in enumerate(documents):
        if raw is None:
            raise ValueError(f"document {i} has no id: set its id or the doc_id metadata its chunks carry")
        doc_id = str(raw)
        if doc_id in texts and texts[doc_id] != text:
            raise ValueError(f"two different documents have the id {doc_id!r}; ids must be unique")
        texts[doc_id] = text
    return texts


def umg_store_of(strategy: Any) -> Any:
    """The unit store of a UMG-RAG strategy, or of a retriever wrapping one.

    Raises:
        TypeError: Neither has a Chroma store.
    """
    strategy = getattr(strategy, "strategy", strategy)
    store = getattr(strategy, "store", None)
    if store is None:
        raise TypeError(f"from_umg expects a UMGRAG strategy, got {type(strategy).__name__}")
    return store


def promote(settings: Any, items: Sequence[PromotionItem], start_key: str, end_key: str) -> list[Promoted]:
    """Parent promotion with a post-processor's settings; each passage's offsets written back.

    Args:
        settings: The compressor / postprocessor (``texts``, ``parent_size``, ``stride``,
            ``fine_max_sentences``, ``mode``).
        items: The retrieved items, best first.
        start_key: Metadata key the passage's start offset is written to (when located).
        end_key: Metadata key of its end offset.

    Returns:
        The passages, best first (see :func:`core.strategies.umg.promotion.promote_to_parents`).
    """
    promoted = promote_to_parents(
        items,
        settings.texts,
        parent_size=settings.parent_size,
        stride=settings.stride,
        fine_max_sentences=settings.fine_max_sentences,
        mode=settings.mode,
    )
    for p in promoted:
        if p.start is not None and p.end is not None and p.sent_start is not None:
            p.metadata[start_key] = p.start
            p.metadata[end_key] = p.end
    return promoted
