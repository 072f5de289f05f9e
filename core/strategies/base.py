"""The contract every strategy meets, and the input checks they share.

The LangChain and LlamaIndex adapters are written against :class:`Strategy` alone, so a
new strategy gets both adapters for free.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence, Sized
from typing import Any, ClassVar, Protocol, runtime_checkable

from core.types import Document, Retrieved

__all__ = [
    "COMMON_PROVENANCE_KEYS",
    "DEFAULT_MAX_QUERY_CHARS",
    "MAX_K",
    "Searchable",
    "Strategy",
    "check_doc_ids",
    "check_k",
    "check_query",
    "check_same_lengths",
    "check_text",
]

#: Longest query accepted by default (characters). Embedders truncate long inputs anyway,
#: so a longer query almost always means a document was passed by mistake.
DEFAULT_MAX_QUERY_CHARS = 10_000

#: Largest result count accepted. Any count above the corpus size returns every result, so
#: this only turns absurd values into a clear error instead of an overflow in the C++ core.
MAX_K = 2**31 - 1


#: Provenance keys every strategy writes on its results (the adapters keep them out of prompts).
COMMON_PROVENANCE_KEYS = frozenset(
    {"strategy", "score", "found_by", "fallback", "chunk_order", "start_index", "end_index"}
)


@runtime_checkable
class Searchable(Protocol):
    """The query-time half of :class:`Strategy`: what an adapter needs of a built index.

    The framework retrievers accept any object with these members (a test double, a
    baseline); the constructors of :class:`Strategy` are what their ``from_*`` methods use.
    """

    name: ClassVar[str]

    @property
    def default_k(self) -> int:
        """Number of results when the caller gives none."""
        ...

    def retrieve(self, query: str, k: int | None = None, **options: Any) -> list[Retrieved]:
        """Returns up to ``k`` results for ``query``, best first, each with provenance metadata."""
        ...

    def add_documents(self, documents: Sequence[Document]) -> list[str]:
        """Indexes more documents without a rebuild; returns their document ids."""
        ...

    def delete_documents(self, doc_ids: Sequence[str], *, filter: Mapping[str, Any] | None = None) -> int:
        """Removes documents (all their chunks) by id; returns how many chunks were removed.

        With ``filter`` (Chroma ``where`` syntax), only the named rows that pass it go.
        """
        ...

    def save(self, path: str | os.PathLike[str]) -> None:
        """Persists the derived structures (atomically) to the directory ``path``."""
        ...


@runtime_checkable
class Strategy(Searchable, Protocol):
    """A retrieval strategy over an indexed corpus: the whole lifecycle behind one contract.

    A strategy is built from documents (:meth:`from_documents`), from the chunks, metadata and
    vectors already in a Chroma collection (:meth:`from_store`, nothing re-embedded that is
    stored there), or from a saved index (:meth:`load`); it is kept current with
    :meth:`add_documents` / :meth:`delete_documents` (no rebuild), saved atomically with
    :meth:`save`, and queried with :meth:`retrieve` or, with the query embedding already
    computed, :meth:`retrieve_by_vector`. The LangChain and LlamaIndex adapters are written
    against this contract alone, so a new strategy gets both of them by declaring itself.

    Implementations are thread-safe for concurrent :meth:`retrieve` calls.

    Attributes:
        name: Short strategy name (``"bridge"``, ``"umg"``, ``"bubble"``, ...).
        provenance_keys: The metadata keys the strategy adds to its results to say how each
            was found; adapters keep them in the metadata but out of LLM prompts.
    """

    provenance_keys: ClassVar[frozenset[str]]

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        *,
        embedder: Any = None,
        store: Any = None,
        persist_directory: str | os.PathLike[str] | None = None,
        llm: Any = None,
        show_progress: bool = True,
        **settings: Any,
    ) -> Strategy:
        """Chunks, embeds and indexes a new corpus (saved under ``persist_directory`` if given)."""
        ...

    @classmethod
    def from_store(
        cls, store: Any, *, embedder: Any = None, llm: Any = None, show_progress: bool = True, **settings: Any
    ) -> Strategy:
        """Builds the strategy over the chunks, metadata and vectors already in a Chroma collection."""
        ...

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, store: Any = None, embedder: Any = None) -> Strategy:
        """Reopens an index saved by :meth:`save` (nothing is re-embedded).

        Implementations may take more keyword options (``llm``, UMG's ``splade``).
        """
        ...

    def retrieve_by_vector(
        self, query: str, query_vector: Any, k: int | None = None, **options: Any
    ) -> list[Retrieved]:
        """:meth:`retrieve` with the query's embedding already computed."""
        ...


def check_doc_ids(doc_ids: object) -> list[str]:
    """Validates the ids given to ``delete_documents`` and returns them as a list.

    Raises:
        TypeError: ``doc_ids`` is a single string (which would otherwise be read as its
            characters, deleting the wrong documents) or not a sequence of strings.
    """
    if isinstance(doc_ids, str | bytes):
        raise TypeError(
            f"doc_ids must be a sequence of document ids, not a single string ({doc_ids!r}); "
            "wrap it in a list"
        )
    if not isinstance(doc_ids, Iterable):
        raise TypeError(f"doc_ids must be a sequence of document ids, got {type(doc_ids).__name__}")
    ids = list(doc_ids)
    bad = next((d for d in ids if not isinstance(d, str)), None)
    if bad is not None:
        raise TypeError(f"document ids must be strings, got {type(bad).__name__} ({bad!r})")
    return ids


def check_text(text: str, what: str) -> str:
    """Checks that a string is valid Unicode (encodable as UTF-8) and returns it.

    Python strings can hold lone surrogates (such as U+DCE9, left by decoding invalid UTF-8
    with ``errors="surrogateescape"``), which tokenizers, Chroma and the C++ core cannot take.

    Args:
        text: The string.
        what: What it is, for the error message (``"query"``, ``"document 3 (id 'a')"``).

    Returns:
        ``text`` unchanged.

    Raises:
        ValueError: ``text`` holds a lone surrogate.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{what} is not valid Unicode text: it holds the lone surrogate {text[exc.start]!r} at "
            f"position {exc.start} (invalid UTF-8 decoded with errors='surrogateescape'?); decode the "
            "bytes with errors='replace' or remove the character"
        ) from None
    return text


def check_same_lengths(*named: tuple[str, Sized | None]) -> None:
    """Checks that the given sequences (None: not given) have one entry each for the same items.

    Args:
        *named: ``(what, sequence)`` pairs, e.g. ``("texts", texts)``.

    Raises:
        ValueError: Their lengths differ; the message lists every length.
    """
    given = [(what, len(items)) for what, items in named if items is not None]
    if len({n for _, n in given}) > 1:
        listed = [f"{n} {what}" for what, n in given]
        raise ValueError(f"the sequences differ in length: {', '.join(listed[:-1])} and {listed[-1]}")


def check_query(query: object, max_chars: int = DEFAULT_MAX_QUERY_CHARS) -> str:
    """Validates a query string and returns it stripped.

    Args:
        query: The query as given by the caller.
        max_chars: Longest accepted query.

    Returns:
        The query without surrounding whitespace.

    Raises:
        TypeError: ``query`` is not a string.
        ValueError: ``query`` is empty, only whitespace, longer than ``max_chars``, or not valid
            Unicode (a lone surrogate).
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, got {type(query).__name__}")
    text = query.strip()
    if not text:
        raise ValueError("query is empty; pass the question or search text to retrieve for")
    if len(text) > max_chars:
        raise ValueError(
            f"query is {len(text):,} characters long, above the limit of {max_chars:,}; pass a shorter "
            "query or raise max_query_chars"
        )
    return check_text(text, "query")


def check_k(k: object, default: int) -> int:
    """Validates a result count.

    Args:
        k: The requested count, or None for ``default``.
        default: The strategy's default count.

    Returns:
        The count to use (a positive int). Counts above the corpus size simply return
        every result there is.

    Raises:
        TypeError: ``k`` is not an int (bools are rejected too).
        ValueError: ``k`` is below 1.
    """
    if k is None:
        return default
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k > MAX_K:
        raise ValueError(
            f"k must be <= {MAX_K:,}, got {k:,}; any k above the corpus size already returns every result"
        )
    return k
