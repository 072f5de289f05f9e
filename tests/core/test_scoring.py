from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core import top_k_cosine


def normalised(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    m = rng.standard_normal((n, d)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def numpy_top_k(q: np.ndarray, m: np.ndarray, cand: list[int], k: int) -> tuple[list[int], np.ndarray]:
    ids = sorted(set(cand))
    qn = q / np.linalg.norm(q)
    scores = m[ids] @ qn
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))[:k]
    return [ids[i] for i in order], scores[order]


@given(
    seed=st.integers(0, 1000),
    n=st.integers(1, 300),
    d=st.sampled_from([1, 3, 8, 17, 384]),
    m=st.integers(0, 400),
    k=st.integers(0, 50),
)
def test_matches_numpy(seed: int, n: int, d: int, m: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    mat = normalised(rng, n, d)
    q = rng.standard_normal(d).astype(np.float32) * 3
    cand = rng.integers(0, n, size=m).tolist()
    ids, scores = top_k_cosine(q, mat, cand, k)
    want_ids, want_scores = numpy_top_k(q, mat, cand, k)
    assert ids.dtype == np.int64
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, want_scores, rtol=1e-4, atol=1e-5)
    # Ids agree except where float rounding swaps near-ties.
    assert len(ids) == len(want_ids) == min(k, len(set(cand)))
    assert set(ids.tolist()) <= set(cand)
    assert len(set(ids.tolist())) == len(ids)


def test_reads_matrix_in_place_and_orders_ties_by_id() -> None:
    mat = np.zeros((4, 2), dtype=np.float32)
    mat[:, 0] = 1.0
    ids, scores = top_k_cosine([1.0, 0.0], mat, [3, 1, 2, 1], 3)
    assert ids.tolist() == [1, 2, 3]
    assert scores.tolist() == [1.0, 1.0, 1.0]


def test_nan_rows_rank_last() -> None:
    mat = np.array([[np.nan, 0.0], [0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    ids, scores = top_k_cosine(np.array([1.0, 0.0]), mat, [0, 1, 2], 3)
    assert ids.tolist() == [2, 1, 0]
    assert np.isneginf(scores[-1])


@pytest.mark.parametrize(
    ("query", "matrix", "cand", "k", "exc", "match"),
    [
        (np.ones(2), np.ones((3, 2), dtype=np.float64), [0], 1, TypeError, "float32"),
        (np.ones(2), np.asfortranarray(np.ones((3, 2), dtype=np.float32)), [0], 1, TypeError, "C-contiguous"),
        (np.ones(2), [[1.0, 0.0]], [0], 1, TypeError, "numpy array"),
        (np.ones(2), np.ones(3, dtype=np.float32), [0], 1, ValueError, "two-dimensional"),
        (np.ones(3), np.ones((3, 2), dtype=np.float32), [0], 1, ValueError, "2 values"),
        (np.ones(2), np.ones((3, 2), dtype=np.float32), [3], 1, IndexError, "outside the matrix"),
        (np.ones(2), np.ones((3, 2), dtype=np.float32), [-1], 1, IndexError, "outside the matrix"),
        (np.ones(2), np.ones((3, 2), dtype=np.float32), [0], -1, ValueError, "k must be"),
        (np.ones(2), np.ones((3, 2), dtype=np.float32), [0.5], 1, TypeError, "integers"),
    ],
)
def test_bad_input(query, matrix, cand, k, exc, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(exc, match=match):
        top_k_cosine(query, matrix, cand, k)


def test_threads_share_one_matrix() -> None:
    rng = np.random.default_rng(0)
    mat = normalised(rng, 5000, 64)
    queries = normalised(rng, 16, 64)
    cand = np.arange(5000)
    expected = [top_k_cosine(q, mat, cand, 10)[0].tolist() for q in queries]
    errors = []

    def run() -> None:
        for _ in range(20):
            for q, want in zip(queries, expected, strict=True):
                if top_k_cosine(q, mat, cand, 10)[0].tolist() != want:
                    errors.append(1)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
