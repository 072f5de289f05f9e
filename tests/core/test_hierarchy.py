"""Tests for core.strategies.bridge.hierarchy: grouping abstracts by meaning and their weighted centroids."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.strategies.bridge.hierarchy import group_by_meaning, weighted_centroids


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _check_partition(groups: list[list[int]], n: int, branching: int) -> None:
    flat = [i for g in groups for i in g]
    assert sorted(flat) == list(range(n)), "every index exactly once"
    assert all(1 <= len(g) <= branching for g in groups)
    assert all(g == sorted(g) for g in groups), "each group is sorted"
    assert sum(len(g) < branching for g in groups) <= 1, "all groups but one are full"
    assert len(groups) == -(-n // branching), "the fewest groups possible"


def _clusters(rng: np.random.Generator, sizes: list[int], d: int = 16, spread: float = 0.05) -> np.ndarray:
    """Tight clusters around orthogonal axes; rows shuffled so clusters are not contiguous."""
    rows = []
    for c, size in enumerate(sizes):
        centre = np.zeros(d, dtype=np.float32)
        centre[c] = 1.0
        rows.append(centre + spread * rng.standard_normal((size, d)).astype(np.float32))
    return np.vstack(rows)


# ---------------------------------------------------------------- partition properties


@pytest.mark.parametrize(
    ("n", "branching"),
    [(1, 2), (2, 2), (3, 2), (4, 4), (5, 4), (9, 4), (10, 4), (16, 4), (17, 4), (46, 4), (100, 3), (64, 8)],
)
def test_partition_invariants(n: int, branching: int) -> None:
    x = _unit_rows(np.random.default_rng(n * 31 + branching), n, 12)
    groups = group_by_meaning(x, branching)
    _check_partition(groups, n, branching)


@given(
    n=st.integers(min_value=0, max_value=60),
    d=st.integers(min_value=1, max_value=8),
    branching=st.integers(min_value=2, max_value=7),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_partition_invariants_property(n: int, d: int, branching: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    groups = group_by_meaning(x, branching)
    if n == 0:
        assert groups == []
    else:
        _check_partition(groups, n, branching)


def test_empty_input_gives_no_groups() -> None:
    assert group_by_meaning(np.zeros((0, 5), dtype=np.float32), 4) == []


def test_at_most_branching_rows_form_one_group() -> None:
    x = _unit_rows(np.random.default_rng(0), 4, 6)
    assert group_by_meaning(x, 4) == [[0, 1, 2, 3]]


def test_identical_rows_still_partition() -> None:
    x = np.ones((11, 5), dtype=np.float32)
    groups = group_by_meaning(x, 3)
    _check_partition(groups, 11, 3)
    # with no direction to split along, ties fall back to index order
    assert groups == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10]]


def test_float64_input_is_accepted() -> None:
    x = np.random.default_rng(3).standard_normal((13, 4))
    _check_partition(group_by_meaning(x, 4), 13, 4)


# ---------------------------------------------------------------- determinism


def test_deterministic_across_calls_and_copies() -> None:
    x = _unit_rows(np.random.default_rng(7), 57, 24)
    first = group_by_meaning(x, 4)
    assert group_by_meaning(x, 4) == first
    assert group_by_meaning(x.copy(order="F"), 4) == first
    assert group_by_meaning(np.ascontiguousarray(x), 4) == first


def test_input_is_not_modified() -> None:
    x = _unit_rows(np.random.default_rng(8), 20, 6)
    before = x.copy()
    group_by_meaning(x, 3)
    np.testing.assert_array_equal(x, before)


# ---------------------------------------------------------------- grouping by meaning


@pytest.mark.parametrize(("size", "branching"), [(4, 2), (8, 4), (12, 4), (6, 3), (16, 8)])
def test_two_separated_clusters_are_never_mixed(size: int, branching: int) -> None:
    for seed in range(5):
        rng = np.random.default_rng(seed)
        x = _clusters(rng, [size, size])
        perm = rng.permutation(len(x))
        shuffled = x[perm]
        label = (perm >= size).astype(int)  # cluster of each shuffled row
        groups = group_by_meaning(shuffled, branching)
        _check_partition(groups, 2 * size, branching)
        for g in groups:
            assert len({int(label[i]) for i in g}) == 1, (seed, g, label[g])


def test_four_clusters_of_branching_size_become_the_groups() -> None:
    rng = np.random.default_rng(11)
    x = _clusters(rng, [4, 4, 4, 4], spread=0.02)
    perm = rng.permutation(16)
    groups = group_by_meaning(x[perm], 4)
    found = sorted(sorted(int(perm[i]) // 4 for i in g) for g in groups)
    assert found == [[0] * 4, [1] * 4, [2] * 4, [3] * 4]


def test_groups_are_tighter_than_random_groups() -> None:
    rng = np.random.default_rng(5)
    x = _unit_rows(rng, 64, 16)
    groups = group_by_meaning(x, 4)

    def mean_within_similarity(gs: list[list[int]]) -> float:
        sims = [float(x[a] @ x[b]) for g in gs for i, a in enumerate(g) for b in g[i + 1 :]]
        return float(np.mean(sims))

    random_groups = [sorted(rng.permutation(64)[i : i + 4].tolist()) for i in range(0, 64, 4)]
    assert mean_within_similarity(groups) > mean_within_similarity(random_groups) + 0.05


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("branching", [1, 0, -3])
def test_branching_below_two_is_rejected(branching: int) -> None:
    with pytest.raises(ValueError, match="branching must be >= 2"):
        group_by_meaning(np.ones((5, 3), dtype=np.float32), branching)


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), ()])
def test_non_two_dimensional_input_is_rejected(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="two-dimensional"):
        group_by_meaning(np.ones(shape, dtype=np.float32), 2)


# ---------------------------------------------------------------- weighted centroids


def test_weighted_centroids_are_normalised_weighted_means() -> None:
    rng = np.random.default_rng(2)
    x = _unit_rows(rng, 10, 8)
    groups = [[0, 1, 2], [3, 4], [5, 6, 7, 8, 9]]
    weights = rng.uniform(0.5, 3.0, size=10)
    c = weighted_centroids(x, groups, weights)
    assert c.shape == (3, 8)
    assert c.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(c, axis=1), 1.0, atol=1e-6)
    for g, members in enumerate(groups):
        expected = (x[members] * weights[members][:, None]).sum(axis=0)
        expected /= np.linalg.norm(expected)
        np.testing.assert_allclose(c[g], expected, atol=1e-6)


def test_weights_pull_the_centroid() -> None:
    x = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    heavy_first = weighted_centroids(x, [[0, 1]], np.array([9.0, 1.0]))[0]
    equal = weighted_centroids(x, [[0, 1]], np.array([1.0, 1.0]))[0]
    only_second = weighted_centroids(x, [[0, 1]], np.array([0.0, 2.0]))[0]
    assert heavy_first[0] > heavy_first[1]
    np.testing.assert_allclose(equal, [np.sqrt(0.5), np.sqrt(0.5)], atol=1e-6)
    np.testing.assert_allclose(only_second, [0.0, 1.0], atol=1e-6)


def test_zero_centroids_stay_zero() -> None:
    x = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 3.0]], dtype=np.float32)
    c = weighted_centroids(x, [[0, 1], [2]], np.ones(3))
    np.testing.assert_array_equal(c[0], [0.0, 0.0])
    np.testing.assert_allclose(c[1], [0.0, 1.0])
    zero_weight = weighted_centroids(x, [[2]], np.zeros(3))
    np.testing.assert_array_equal(zero_weight[0], [0.0, 0.0])


def test_centroids_of_group_by_meaning_output() -> None:
    x = _unit_rows(np.random.default_rng(9), 30, 10)
    groups = group_by_meaning(x, 4)
    c = weighted_centroids(x, groups, np.ones(30))
    assert c.shape == (len(groups), 10)
    np.testing.assert_allclose(np.linalg.norm(c, axis=1), 1.0, atol=1e-6)
    # each row is at least as similar to its own centroid as to the average other centroid
    for g, members in enumerate(groups):
        own = x[members] @ c[g]
        others = np.delete(c, g, axis=0)
        assert own.mean() > (x[members] @ others.T).mean()


def test_no_groups_gives_an_empty_matrix() -> None:
    c = weighted_centroids(np.ones((3, 4), dtype=np.float32), [], np.ones(3))
    assert c.shape == (0, 4)
