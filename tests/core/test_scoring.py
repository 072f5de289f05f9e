from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core import top_k_cosine
from core.native.scoring import top_k_cosine_groups


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


@given(
    seed=st.integers(0, 1000),
    n=st.integers(1, 200),
    sizes=st.lists(st.integers(0, 300), min_size=0, max_size=5),
    k=st.integers(0, 40),
)
def test_groups_equal_one_call_per_group(seed: int, n: int, sizes: list[int], k: int) -> None:
    """Each group's top k is exactly what top_k_cosine gives for that group alone, whether the
    groups together cover much of the matrix (scores kept by row) or little of it."""
    rng = np.random.default_rng(seed)
    mat = normalised(rng, n, 17)
    q = rng.standard_normal(17).astype(np.float32) * 2
    groups = [rng.integers(0, n, size=s) for s in sizes]
    offsets = np.zeros(len(groups) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(sizes)
    cand = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
    found = top_k_cosine_groups(q, mat, offsets, cand, k)
    assert len(found) == len(groups)
    for group, (ids, scores) in zip(groups, found, strict=True):
        want_ids, want_scores = top_k_cosine(q, mat, group, k)
        assert ids.tolist() == want_ids.tolist()
        assert scores.tobytes() == want_scores.tobytes()


def test_groups_over_a_large_matrix_split_the_reading_and_agree_with_small_calls() -> None:
    """A set of rows large enough to be read by several threads gives the same top k as
    merging the top k of small slices (each read on one thread)."""
    rng = np.random.default_rng(3)
    n, d = 24_000, 384  # 9.2M values: above the 2 x 4M a second thread is started for
    mat = normalised(rng, n, d)
    q = rng.standard_normal(d).astype(np.float32)
    rows = np.arange(n, dtype=np.int64)
    evens = rows[::2]
    (all_ids, all_scores), (even_ids, _) = top_k_cosine_groups(
        q, mat, np.array([0, n, n + evens.size]), np.concatenate([rows, evens]), 25
    )
    pieces = [top_k_cosine(q, mat, part, 25) for part in np.array_split(rows, 8)]
    merged = sorted(
        ((float(s), int(i)) for ids, scores in pieces for i, s in zip(ids, scores, strict=True)),
        key=lambda p: (-p[0], p[1]),
    )[:25]
    assert all_ids.tolist() == [i for _, i in merged]
    assert all_scores.tolist() == [s for s, _ in merged]
    assert even_ids.tolist() == top_k_cosine(q, mat, evens, 25)[0].tolist()


@pytest.mark.parametrize(
    ("offsets", "cand", "match"),
    [
        ([], [0], "len\\(groups\\) \\+ 1"),
        ([1, 1], [0], "start at 0"),
        ([0, 2, 1], [0], "must be non-decreasing, but entry 2 \\(1\\) < entry 1 \\(2\\)"),
        ([0, 1], [0, 1], "end at len\\(candidate_ids\\)"),
    ],
)
def test_groups_bad_offsets(offsets: list[int], cand: list[int], match: str) -> None:
    mat = np.ones((3, 2), dtype=np.float32)
    with pytest.raises(ValueError, match=match):
        top_k_cosine_groups(np.ones(2), mat, offsets, cand, 1)


def test_groups_none_and_empty() -> None:
    mat = np.ones((3, 2), dtype=np.float32)
    assert top_k_cosine_groups(np.ones(2), mat, [0], [], 5) == []
    ((ids, scores),) = top_k_cosine_groups(np.ones(2), mat, [0, 0], [], 5)
    assert ids.size == 0
    assert scores.size == 0
