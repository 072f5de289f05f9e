"""The framework-neutral half of the LangChain and LlamaIndex adapters: the shared checks.

What both adapter packages need and neither framework provides: splitting a constructor's
keyword arguments into the retriever's own fields and the strategy's settings, checking
that a named retriever wraps its own strategy, and reading the collection behind a
framework's Chroma store. The retrievers' lifecycle is in :mod:`core.adapters.lifecycle`,
the parent-promotion post-processors' shared half in :mod:`core.adapters.promotion`.
Nothing here imports LangChain or LlamaIndex.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from core.store import ChunkStore
from core.strategies.base import Searchable

__all__ = [
    "as_chunk_store",
    "check_option",
    "check_strategy_type",
    "chroma_collection",
    "lift_option",
    "public_name",
    "split_fields",
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


def as_chunk_store(store: Any) -> ChunkStore | None:
    """The ``store=`` of a load: a ``ChunkStore``, a framework's Chroma store or a chromadb collection.

    Raises:
        TypeError: Anything else.
    """
    if store is None or isinstance(store, ChunkStore):
        return store
    if getattr(store, "_collection", None) is not None:  # LangChain Chroma, LlamaIndex ChromaVectorStore
        return ChunkStore(store._collection)
    if all(callable(getattr(store, name, None)) for name in ("get", "add", "delete", "count")):
        return ChunkStore(store)  # a chromadb Collection
    raise TypeError(
        "store must be the Chroma collection the index was built over: a langchain_chroma.Chroma, a "
        f"ChromaVectorStore, a chromadb Collection or a core.store.ChunkStore; got {type(store).__name__}"
    )


def chroma_collection(store: Any, what: str) -> Any:
    """The chromadb Collection behind a framework's Chroma store (``_collection`` in both).

    Raises:
        TypeError: ``store`` has no Chroma collection.
    """
    collection = getattr(store, "_collection", None)
    if collection is None:
        raise TypeError(f"{what}, got {type(store).__name__}")
    return collection
