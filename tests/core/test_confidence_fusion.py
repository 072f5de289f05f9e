"""The confidence fusion of any ranked lists (core.confidence_fusion)."""

from __future__ import annotations

import pytest

from core.confidence_fusion import DEFAULT_RANK_CONSTANT, RankedList, fuse_ranked_lists, list_confidences


def test_a_peaked_list_outweighs_a_flat_one() -> None:
    peaked = RankedList(["a", "b", "c", "d"], [9.0, 1.0, 0.9, 0.8])
    flat = RankedList(["d", "c", "b", "a"], [1.0, 0.99, 0.98, 0.97])
    conf = list_confidences([peaked, flat])
    assert conf[0] > conf[1]
    fused, _ = fuse_ranked_lists([peaked, flat])
    assert fused[0].key == "a"  # the flat list's top ("d") loses to the confident list's
    # With the lists' roles swapped the fusion follows the confident list again.
    fused_swapped, _ = fuse_ranked_lists([flat, peaked])
    assert fused_swapped[0].key == "a"


def test_every_key_once_best_first_and_cut_at_k() -> None:
    a = RankedList(["x", "y", "x"], [3.0, 2.0, 1.0])
    b = RankedList(["y", "z"], [0.9, 0.1])
    fused, conf = fuse_ranked_lists([a, b], k=2)
    assert len(fused) == 2
    assert len({f.key for f in fused}) == 2
    assert fused[0].score >= fused[1].score
    assert len(conf) == 2
    everything, _ = fuse_ranked_lists([a, b])
    assert {f.key for f in everything} == {"x", "y", "z"}
    assert next(f for f in everything if f.key == "z").source == 1


def test_a_scoreless_list_is_fused_by_rank_with_the_scored_lists_mean_confidence() -> None:
    scored = RankedList(["a", "b", "c"], [5.0, 1.0, 0.0])
    ranked = RankedList(["c", "b"])
    conf = list_confidences([scored, ranked])
    assert conf[1] == pytest.approx(conf[0])
    only_ranked = list_confidences([RankedList(["a"]), RankedList(["b"])])
    assert only_ranked == [0.5, 0.5]
    fused, _ = fuse_ranked_lists([ranked])
    assert [f.key for f in fused] == ["c", "b"]


def test_weights_steer_and_bad_arguments_are_refused() -> None:
    a = RankedList(["a", "b"], [2.0, 1.0])
    b = RankedList(["b", "a"], [2.0, 1.0])
    assert fuse_ranked_lists([a, b], [1.0, 0.0])[0][0].key == "a"
    assert fuse_ranked_lists([a, b], [0.0, 1.0])[0][0].key == "b"
    with pytest.raises(ValueError, match="one weight per retriever"):
        fuse_ranked_lists([a, b], [1.0])
    with pytest.raises(ValueError, match="finite and >= 0"):
        fuse_ranked_lists([a, b], [1.0, float("nan")])
    with pytest.raises(ValueError, match="k must be >= 1"):
        fuse_ranked_lists([a], k=0)
    with pytest.raises(ValueError, match="2 results but 1 scores"):
        RankedList(["a", "b"], [1.0])
    assert fuse_ranked_lists([RankedList([]), RankedList([])])[0] == []


def test_rank_scaling_gives_every_place_its_reciprocal_rank_times_the_confidence() -> None:
    scores = [0.61, 0.60, 0.59, 0.58, 0.20]
    li = RankedList(["a", "b", "c", "d", "e"], scores)
    (conf,) = list_confidences([li])
    fused, _ = fuse_ranked_lists([li])  # the default scaling: rank
    assert [f.key for f in fused] == ["a", "b", "c", "d", "e"]
    rank_scores = [conf / (rank + DEFAULT_RANK_CONSTANT) for rank in range(1, 6)]
    assert [f.score for f in fused] == pytest.approx(rank_scores, rel=1e-6)
    assert fused[-1].score > 0, "the last place still counts"
    by_score, _ = fuse_ranked_lists([li], scaling="minmax")
    assert by_score[-1].score == 0.0
    assert by_score[0].score == pytest.approx(by_score[3].score, abs=0.1), "min-max: one gap decides"
    with pytest.raises(ValueError, match="scaling must be 'rank' or 'minmax'"):
        fuse_ranked_lists([li], scaling="softmax")  # type: ignore[arg-type]


def test_with_equal_confidences_rank_scaling_is_reciprocal_rank_fusion() -> None:
    a = RankedList(["x", "y", "z"], [3.0, 2.0, 1.0])
    b = RankedList(["z", "y", "x"], [3.0, 2.0, 1.0])  # the same shape: the same confidence
    c = RankedList(["y", "w"], [1.0, 0.0])
    fused, conf = fuse_ranked_lists([a, b], weights=[1.0, 1.0], c=0)
    assert conf[0] == pytest.approx(conf[1])
    rrf = {"x": 1 + 1 / 3, "y": 1 / 2 + 1 / 2, "z": 1 / 3 + 1}
    assert {f.key: f.score for f in fused} == pytest.approx({key: conf[0] * v for key, v in rrf.items()})
    assert fuse_ranked_lists([a, c], weights=[0.0, 1.0])[0][0].key == "y"


def test_non_finite_scores_count_as_the_lowest() -> None:
    fused, _ = fuse_ranked_lists([RankedList(["a", "b", "c"], [float("nan"), 2.0, 1.0])], scaling="minmax")
    assert fused[0].key == "b"
    assert fused[-1].score == 0.0
    assert all(f.score == f.score for f in fused)  # no NaN


def test_one_odd_score_neither_silences_its_list_nor_wins_by_default() -> None:
    clean = RankedList(["x", "y", "z"], [9.0, 1.0, 0.5])
    other = RankedList(["p", "q", "r"], [9.0, 1.0, 0.5])
    (reference, _) = list_confidences([clean, other])
    for odd in (float("nan"), float("-inf")):  # counts as the list's lowest score
        (conf, _) = list_confidences([RankedList(["x", "y", "z"], [9.0, odd, 0.5]), other])
        assert conf > 0.5 * reference, odd
    (top_inf, _) = list_confidences([RankedList(["x", "y", "z"], [float("inf"), 1.0, 0.5]), other])
    assert top_inf > 0.5 * reference
    fused, _ = fuse_ranked_lists([RankedList(["x", "y", "z"], [float("inf"), 1.0, 0.5]), other])
    assert fused[0].score > 0
    # Scores too large to square (their variance overflows) are judged by their shape alone.
    (huge, _) = list_confidences([RankedList(["x", "y", "z"], [9e307, 1e307, 0.5e307]), other])
    assert huge == pytest.approx(reference)
    assert fuse_ranked_lists([RankedList(["x", "y"], [0.3, 0.1])], scaling="minmax", k=1)[0][0].key == "x"


def test_an_empty_list_does_not_lower_a_scoreless_lists_confidence() -> None:
    scored = RankedList(["a", "b", "c"], [5.0, 1.0, 0.0])
    ranked = RankedList(["c", "b"])
    alone = list_confidences([scored, ranked])
    with_empty = list_confidences([scored, ranked, RankedList([], [])])
    assert with_empty[:2] == pytest.approx(alone)
    assert with_empty[2] == 0.0


def test_the_rank_constant_is_ensemble_retrievers_c() -> None:
    li = RankedList(["a", "b", "c"])
    fused, (conf,) = fuse_ranked_lists([li], c=60)
    assert [f.score for f in fused] == pytest.approx([conf / (60 + rank) for rank in (1, 2, 3)], rel=1e-6)
    for bad in (-1, float("nan"), "60", True):
        with pytest.raises(ValueError, match="c must be a finite number >= 0"):
            fuse_ranked_lists([li], c=bad)  # type: ignore[arg-type]
