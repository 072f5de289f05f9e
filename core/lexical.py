"""Lexical evidence: BM25 (bm25s) over a strategy's units, persisted without pickle.

Names, dates, amounts and identifiers that a question repeats verbatim are strong evidence in
report-like text, and a dense model blurs them. Every strategy keeps a :class:`LexicalIndex`
over its live units (chunks, windows) beside its vectors: its hits join the candidates and
its scores count in each unit's direct evidence (:mod:`core.strategies.direct`). UMG-RAG's
BM25 experts are such indexes, one per window size.
"""

from __future__ import annotations

import functools
import json
import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from core.persist import FileData, array_from_bytes

__all__ = ["BM25Expert", "Hits", "LexicalIndex", "check_csr", "query_tokens", "tokenize", "top_scores"]

Hits = tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]
_BM25_FILES = (
    "params.index.json",
    "vocab.index.json",
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
)


def top_scores(scores: npt.NDArray[Any], n: int) -> Hits:
    """Indices of the n best positive scores, best first (ties by index)."""
    scores = np.asarray(scores, dtype=np.float32).ravel()
    pos = np.flatnonzero(scores > 0)
    if pos.size == 0 or n <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if pos.size > n:  # sort only what scores at least the n-th best (ties at the cut included)
        values = scores[pos]
        pos = pos[values >= np.partition(values, pos.size - n)[pos.size - n]]
    order = pos[np.lexsort((pos, -scores[pos]))][:n]
    return order.astype(np.int64), scores[order]


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """BM25 tokens of each text (bm25s: lower-cased words, English stopwords removed)."""
    import bm25s

    out: Any = bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
    return [list(t) for t in out]


@functools.lru_cache(maxsize=1024)
def query_tokens(query: str) -> tuple[str, ...]:
    """A query's BM25 tokens (:func:`tokenize`), remembered for the next indexes it is asked of.

    One retrieval asks several indexes for the same query (UMG-RAG has one per window size),
    so the query is tokenised once.
    """
    return tuple(tokenize([query])[0])


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
        except ImportError as exc:  # pragma: no cover - bm25s is a dependency
            raise ImportError("BM25 needs bm25s (a dependency of bridge-rag): pip install bm25s") from exc
        self._bm25s = bm25s
        self.k1, self.b = k1, b
        self.model: Any = None
        self.size = 0

    def index(self, texts: Sequence[str]) -> None:
        """Indexes ``texts`` (their positions are the ids :meth:`search` returns).

        When no text has a word (every unit deleted, say), each gets one placeholder token
        that no query can produce (bm25s cannot index a corpus of empty documents).
        """
        model = self._bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        tokens = tokenize(texts)
        if texts and not any(tokens):
            tokens = [[_NO_WORD] for _ in texts]
        model.index(tokens, show_progress=False)
        self.model, self.size = model, len(texts)

    def query_scores(self, query: str) -> tuple[npt.NDArray[np.float32], float]:
        """Every indexed text's BM25 score for ``query``, and the best score the query could reach.

        The best score is the sum, over the query's distinct words that the index knows, of
        the highest score that word gives any text: a text scoring it holds every word at
        its best. Dividing by it puts a score in [0, 1] on a scale that means the same for
        every query (0 and an empty vector for a query without a known word).
        """
        if self.model is None or self.size == 0:
            return np.zeros(self.size, dtype=np.float32), 0.0
        vocab = self.model.vocab_dict
        ids = list(dict.fromkeys(vocab[t] for t in query_tokens(query) if t in vocab))
        if not ids:
            return np.zeros(self.size, dtype=np.float32), 0.0
        scores = np.asarray(self.model.get_scores_from_ids(ids), dtype=np.float32)
        data, indptr = self.model.scores["data"], self.model.scores["indptr"]
        best = sum(float(data[indptr[i] : indptr[i + 1]].max(initial=0.0)) for i in ids)
        return scores, best

    def search(self, query: str, n: int, allowed: npt.NDArray[np.bool_] | None = None) -> Hits:
        """The ``n`` best-scoring texts for ``query`` (texts with a zero score are left out).

        Args:
            query: The query text.
            n: How many texts.
            allowed: One bool per indexed text: only those may be returned (a metadata
                filter's, or the live ones); None allows every text.
        """
        if self.model is None or self.size == 0:
            return top_scores(np.zeros(0), n)
        tokens = [t for t in query_tokens(query) if t in self.model.vocab_dict]
        if not tokens:
            return top_scores(np.zeros(0), n)
        scores = np.asarray(self.model.get_scores(tokens), dtype=np.float32)
        if allowed is not None:
            if allowed.shape != scores.shape:
                raise ValueError(f"allowed must have one entry per text ({scores.size}), got {allowed.shape}")
            scores = np.where(allowed, scores, np.float32(0.0))
        return top_scores(scores, n)

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
            check_csr(data, indices, indptr, [len(indptr) - 1, params["num_docs"]])
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


def check_csr(
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


IntArray = npt.NDArray[np.int64]


class LexicalIndex:
    """BM25 over some rows of a strategy's table (its live units): table rows in, table rows out.

    Built anew from the live rows after every change (:meth:`build`), so a deleted unit's
    words leave the vocabulary, document counts and lengths are those of a clean build of the
    live units, and no saved file keeps them.

    Args:
        expert: The BM25 index; position ``i`` of it is table row ``rows[i]``.
        rows: The table row of each indexed text.
    """

    def __init__(self, expert: BM25Expert, rows: IntArray) -> None:
        if rows.shape[0] > expert.size:
            raise ValueError("a lexical index has more rows than texts")
        self.expert = expert
        self.rows = np.asarray(rows, dtype=np.int64)

    @classmethod
    def build(cls, texts: Sequence[str], rows: Sequence[int] | IntArray) -> LexicalIndex:
        """Indexes the texts of ``rows`` (``texts`` holds every table row's text).

        A table with no such row indexes one blank text that no query matches (bm25s needs a
        document).
        """
        kept = np.asarray(rows, dtype=np.int64)
        expert = BM25Expert()
        expert.index([texts[r] for r in kept.tolist()] or [""])
        return cls(expert, kept)

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def search(self, query: str, n: int, allowed: npt.NDArray[np.bool_] | None = None) -> Hits:
        """The ``n`` best rows for ``query`` and their BM25 scores (rows without a query word left out).

        Args:
            query: The query text.
            n: How many rows.
            allowed: One bool per table row (a filter's live rows, or the live ones): only
                those may be returned; None allows every indexed row.
        """
        mask = None
        if allowed is not None:
            mask = np.zeros(self.expert.size, dtype=bool)
            inside = self.rows < allowed.shape[0]
            mask[: self.rows.shape[0]][inside] = allowed[self.rows[inside]]
        local, scores = self.expert.search(query, n, mask)
        return self.rows[local], scores

    def evidence(self, query: str, n_rows: int) -> npt.NDArray[np.float32]:
        """Each table row's lexical evidence for ``query``: its BM25 score over the best reachable.

        Args:
            query: The query text.
            n_rows: The table's size (rows past the index, or not in it, get 0).

        Returns:
            One value in [0, 1] per table row (:meth:`BM25Expert.query_scores`).
        """
        out = np.zeros(n_rows, dtype=np.float32)
        scores, best = self.expert.query_scores(query)
        if best <= 0:
            return out
        rows = self.rows[: scores.shape[0]]
        inside = rows < n_rows
        out[rows[inside]] = np.minimum(scores[: rows.shape[0]][inside] / np.float32(best), 1.0)
        return out

    def to_files(self) -> tuple[dict[str, bytes], IntArray]:
        """bm25s's own files (JSON and ``.npy``, no pickle) and the table row of each position."""
        return self.expert.to_files(), self.rows

    @classmethod
    def from_files(cls, files: Mapping[str, FileData], rows: IntArray) -> LexicalIndex:
        """Rebuilds an index from :meth:`to_files` output.

        Raises:
            ValueError: A file is missing or malformed, or more rows than indexed texts.
        """
        expert = BM25Expert.from_files(files)
        if rows.ndim != 1 or rows.shape[0] > expert.size or (rows.size and rows.min() < 0):
            raise ValueError("the lexical index disagrees with its rows; rebuild the index")
        return cls(expert, rows)
