"""Cluster index: exact below the threshold, approximate above, safe on bad layouts."""

from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt
import pytest

from core._native import ClusterIndex as NativeClusterIndex
from core.native.cluster_index import ClusterIndex


def _unit(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    out = np.asarray(rows, dtype=np.float32)
    return np.ascontiguousarray(out / np.linalg.norm(out, axis=1, keepdims=True))


def _clustered(n: int, seed: int = 0, dim: int = 32) -> npt.NDArray[np.float32]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(40, dim))
    return _unit(centers[rng.integers(0, 40, n)] + 0.6 * rng.normal(size=(n, dim)))


def _brute(
    queries: npt.NDArray[np.float32], matrix: npt.NDArray[np.float32], rows: npt.NDArray[np.int64], k: int
):
    sims = _unit(queries) @ matrix[rows].T
    out = []
    for s in sims:
        order = np.lexsort((rows, -s))[:k]
        out.append(rows[order].tolist())
    return out


def test_below_the_threshold_the_search_is_exact_with_ties_by_row() -> None:
    x = _clustered(500)
    x[7] = x[3]  # a tie: the lower row comes first
    q = np.vstack([x[3], _clustered(9, seed=1)])
    index = ClusterIndex.build(x, exact_below=1000)
    assert index.num_lists == 1
    assert len(index) == 500
    ids, scores = index.search(q, x, 5)
    assert ids.tolist() == _brute(q, x, np.arange(500), 5)
    assert ids[0, :2].tolist() == [3, 7]
    assert np.allclose(scores, np.sort(_unit(q) @ x.T, axis=1)[:, ::-1][:, :5], atol=1e-5)


def test_clustered_search_finds_the_true_neighbours() -> None:
    x = _clustered(6000)
    index = ClusterIndex.build(x, exact_below=100)
    assert index.num_lists == int(np.ceil(4 * np.sqrt(6000)))
    q = x[np.random.default_rng(5).integers(0, 6000, 200)] + 0.05
    truth = _brute(q, x, np.arange(6000), 3)
    ids, _ = index.search(q, x, 3, probe_rows=600)
    recall = np.mean([len(set(a) & set(b)) / 3 for a, b in zip(ids.tolist(), truth, strict=True)])
    assert recall >= 0.9
    # Probing every row is exact whatever the lists.
    ids_all, _ = index.search(q, x, 3, probe_rows=6000)
    assert ids_all.tolist() == truth


def test_a_subset_of_rows_is_searched_and_short_results_are_padded() -> None:
    x = _clustered(300)
    rows = np.arange(0, 300, 3)
    for exact_below in (1000, 10):
        index = ClusterIndex.build(x, rows, exact_below=exact_below)
        ids, _ = index.search(x[:4], x, 2, probe_rows=10_000)
        assert set(ids.ravel().tolist()) <= set(rows.tolist())
        assert ids.tolist() == _brute(x[:4], x, rows, 2)
    tiny = ClusterIndex.build(x, np.asarray([5, 9]))
    ids, scores = tiny.search(x[:1], x, 4)
    assert ids.tolist()[0][2:] == [-1, -1]
    assert np.isneginf(scores[0, 2:]).all()
    empty = ClusterIndex.build(x, np.zeros(0, dtype=np.int64))
    ids, _ = empty.search(x[:2], x, 3)
    assert (ids == -1).all()


def test_build_is_deterministic_and_reuses_centroids_until_the_rows_double() -> None:
    x = _clustered(4500, seed=2)
    a = ClusterIndex.build(x[:2000], exact_below=100)
    b = ClusterIndex.build(x[:2000], exact_below=100)
    assert np.array_equal(a.centroids, b.centroids)
    assert np.array_equal(a.rows, b.rows)
    grown = ClusterIndex.build(x[:3500], exact_below=100, reuse=a)
    assert np.array_equal(grown.centroids, a.centroids)
    assert grown.trained_on == 2000
    assert sorted(grown.rows.tolist()) == list(range(3500))
    retrained = ClusterIndex.build(x, exact_below=100, reuse=a)
    assert retrained.trained_on == 4500
    assert retrained.num_lists != a.num_lists


def test_files_round_trip_and_checks() -> None:
    x = _clustered(800)
    index = ClusterIndex.build(x, exact_below=100)
    files = index.to_files("a.")
    back = ClusterIndex.from_files(files, "a.", 32, 800)
    assert back is not None
    assert np.array_equal(back.search(x[:5], x, 3)[0], index.search(x[:5], x, 3)[0])
    assert ClusterIndex.from_files({}, "a.", 32, 800) is None
    with pytest.raises(ValueError, match="do not match"):
        ClusterIndex.from_files(files, "a.", 16, 800)
    with pytest.raises(ValueError, match="does not have"):
        ClusterIndex.from_files(files, "a.", 32, 700)
    partial = dict(files)
    del partial["a.rows.npy"]
    with pytest.raises(ValueError, match="missing"):
        ClusterIndex.from_files(partial, "a.", 32, 800)


@pytest.mark.parametrize(
    ("centroids", "offsets", "rows", "message"),
    [
        (np.zeros((2, 4)), [0, 2], [0, 1], "lists \\+ 1"),
        (np.zeros((1, 4)), [1, 2], [0, 1], "start at 0"),
        (np.zeros((2, 4)), [0, 1, 2], [0], "end at"),
        (np.zeros((3, 4)), [0, 2, 1, 2], [0, 1], "must not decrease"),
        (np.zeros((1, 4)), [0, 2], [3, 3], "listed twice"),
        (np.zeros((1, 4)), [0, 1], [-2], ">= 0"),
        (np.full((1, 4), np.nan), [0, 1], [0], "not finite"),
        (np.zeros((0, 4)), [0], [], "at least one list"),
        (np.zeros((1, 0)), [0, 0], [], "dim"),
    ],
)
def test_bad_layouts_are_refused(centroids, offsets, rows, message) -> None:
    with pytest.raises(ValueError, match=message):
        NativeClusterIndex(centroids, offsets, rows)


def test_bad_searches_are_refused() -> None:
    x = _clustered(50)
    index = ClusterIndex.build(x)
    with pytest.raises(ValueError, match="rows but the index lists row 49"):
        index.search(x[:1], x[:10], 2)
    with pytest.raises(ValueError, match="columns"):
        index.search(x[:1, :8], x, 2)
    with pytest.raises(ValueError, match="columns"):
        index.search(x[:1], np.ascontiguousarray(x[:, :8]), 2)
    with pytest.raises(TypeError, match="C-contiguous float32"):
        index.search(x[:1], x.astype(np.float64), 2)
    with pytest.raises(ValueError, match="k must be"):
        index.search(x[:1], x, -1)
    with pytest.raises(ValueError, match="within"):
        ClusterIndex.build(x, np.asarray([0, 50]))
    nan_query = np.full((1, 32), np.nan, dtype=np.float32)
    ids, _ = index.search(nan_query, x, 2)  # NaN scores rank last but never crash
    assert ids.shape == (1, 2)


def test_searches_run_in_parallel_threads() -> None:
    x = _clustered(3000)
    index = ClusterIndex.build(x, exact_below=100)
    q = x[:64]
    expected = index.search(q, x, 4)[0]
    results: list[npt.NDArray[np.int64]] = []

    def work() -> None:
        for _ in range(20):
            results.append(index.search(q, x, 4)[0])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 80
    assert all(np.array_equal(r, expected) for r in results)
