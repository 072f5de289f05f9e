"""``core.strategies.umg.promotion``: parent promotion and overlap-aware de-duplication of retrieval hits."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.store import ChunkStore
from core.strategies.umg.promotion import (
    Promoted,
    PromotionItem,
    promote_to_parents,
    texts_from_spans,
    texts_from_store,
)
from core.text import sentence_windows, split_sentences

from .conftest import unique_name


def _text(n: int, tag: str = "S") -> str:
    return " ".join(f"{tag}{i} is sentence number {i}." for i in range(n))


DOC_A = _text(10)  # sentences 0..9
DOC_B = _text(3, "T")
DOC_C = "First line\nSecond line\nThird line. Still third? Fourth!"
TEXTS = {"a": DOC_A, "b": DOC_B, "c": DOC_C}
SENTS = {doc_id: split_sentences(text) for doc_id, text in TEXTS.items()}


def sent_span(doc_id: str, first: int, last: int) -> tuple[int, int]:
    """Character span of sentences [first, last) of a test document."""
    sents = SENTS[doc_id]
    return sents[first][0], sents[last - 1][1]


def hit(doc_id: str | None, first: int, last: int, score: float, hid: str | None = None) -> PromotionItem:
    """An item covering sentences [first, last) of a test document."""
    assert doc_id is not None
    start, end = sent_span(doc_id, first, last)
    return PromotionItem(
        doc_id=doc_id,
        start=start,
        end=end,
        score=score,
        text=TEXTS[doc_id][start:end],
        metadata={"doc_id": doc_id, "tag": hid or f"{doc_id}{first}-{last}"},
        id=hid or f"{doc_id}:{first}-{last}",
    )


def test_test_documents_have_the_expected_sentences() -> None:
    assert len(SENTS["a"]) == 10
    assert len(SENTS["b"]) == 3
    assert [DOC_C[s:e] for s, e in SENTS["c"]] == [
        "First line",
        "Second line",
        "Third line.",
        "Still third?",
        "Fourth!",
    ]


# ---------------------------------------------------------------------- promotion


def test_fine_hit_becomes_the_parent_window_overlapping_it_most() -> None:
    # parent windows of 4 sentences, stride 2: (0,4) (2,6) (4,8) (6,10)
    item = hit("a", 5, 7, 0.7)  # overlaps (2,6) by 1, (4,8) by 2, (6,10) by 1
    (p,) = promote_to_parents([item], TEXTS, parent_size=4, stride=2)
    assert isinstance(p, Promoted)
    assert (p.sent_start, p.sent_end) == (4, 8)
    start, end = sent_span("a", 4, 8)
    assert (p.start, p.end) == (start, end)
    assert p.text == DOC_A[start:end]
    assert p.text.startswith("S4 is")
    assert p.text.endswith("number 7.")
    assert p.promoted is True
    assert p.id == "a::s4-8"
    assert p.doc_id == "a"
    assert p.score == 0.7
    assert p.member_ids == ("a:5-7",)
    assert p.index == 0
    assert p.metadata == {
        "doc_id": "a",
        "tag": "a5-7",
        "promoted": True,
        "start_index": start,
        "end_index": end,
        "sent_start": 4,
        "sent_end": 8,
        "merged_ids": ["a:5-7"],
    }


def test_ties_go_to_the_earlier_window() -> None:
    # sentence 5 overlaps (2,6) and (4,8) by one sentence each
    (p,) = promote_to_parents([hit("a", 5, 6, 1.0)], TEXTS, parent_size=4, stride=2)
    assert (p.sent_start, p.sent_end) == (2, 6)
    # sentences 3..5 overlap (2,6) by 3 and (4,8) by 2
    (p,) = promote_to_parents([hit("a", 3, 6, 1.0)], TEXTS, parent_size=4, stride=2)
    assert (p.sent_start, p.sent_end) == (2, 6)


def test_default_stride_is_half_the_parent_size() -> None:
    (p,) = promote_to_parents([hit("a", 9, 10, 1.0)], TEXTS, parent_size=4)
    assert (p.sent_start, p.sent_end) == (6, 10)
    assert sentence_windows(10, 4) == [(0, 4), (2, 6), (4, 8), (6, 10)]
    (p,) = promote_to_parents([hit("a", 9, 10, 1.0)], TEXTS)  # parent_size 8: (0,8) (2,10)
    assert (p.sent_start, p.sent_end) == (2, 10)


def test_coarse_hits_keep_their_span() -> None:
    item = hit("a", 1, 6, 0.5)  # 5 sentences > fine_max_sentences=4
    (p,) = promote_to_parents([item], TEXTS, parent_size=4, stride=2)
    assert p.promoted is False
    assert (p.start, p.end, p.sent_start, p.sent_end) == (item.start, item.end, 1, 6)
    assert p.text == item.text
    assert p.id == item.id
    (q,) = promote_to_parents([item], TEXTS, parent_size=4, stride=2, fine_max_sentences=5)
    assert q.promoted is True
    assert (q.sent_start, q.sent_end) == (2, 6)


def test_partly_covered_sentences_count() -> None:
    s3, s4 = SENTS["a"][3], SENTS["a"][4]
    # the last word of sentence 3 and the first word of sentence 4: a chunk cut mid-sentence
    start, end = s3[1] - 8, s4[0] + 2
    item = PromotionItem("a", start, end, 1.0, DOC_A[start:end], id="cut")
    (p,) = promote_to_parents([item], TEXTS, parent_size=4, stride=2, fine_max_sentences=2)
    assert (p.sent_start, p.sent_end) == (2, 6)
    (q,) = promote_to_parents([item], TEXTS, parent_size=4, stride=2, fine_max_sentences=1)
    assert q.promoted is False
    assert (q.sent_start, q.sent_end) == (3, 5)


def test_a_hit_already_equal_to_its_parent_is_not_marked_promoted() -> None:
    item = hit("b", 0, 3, 0.4)  # the whole 3-sentence document: its only window
    (p,) = promote_to_parents([item], TEXTS, parent_size=8)
    assert p.promoted is False
    assert p.id == item.id
    assert p.text == item.text
    # a fine hit in a short document is promoted to the whole document
    (q,) = promote_to_parents([hit("b", 1, 2, 0.4)], TEXTS, parent_size=8)
    assert q.promoted is True
    assert q.text == DOC_B
    assert q.id == "b::s0-3"


def test_line_breaks_are_sentence_boundaries() -> None:
    start = DOC_C.index("Second")
    item = PromotionItem("c", start, start + len("Second line"), 1.0, "Second line", id="c1")
    (p,) = promote_to_parents([item], TEXTS, parent_size=2, stride=1)
    assert p.text == "First line\nSecond line"
    assert (p.sent_start, p.sent_end) == (0, 2)


# ---------------------------------------------------------------------- de-duplication


def test_hits_promoted_into_one_window_become_one_result_with_the_best_score() -> None:
    # -> (2,6) (a tie: the earlier window), (4,8), (4,8)
    items = [hit("a", 4, 5, 0.3), hit("a", 5, 7, 0.9), hit("a", 6, 7, 0.5)]
    (p,) = promote_to_parents(items, TEXTS, parent_size=4, stride=2)
    assert (p.sent_start, p.sent_end) == (4, 8)
    assert p.score == 0.9
    assert p.index == 1
    assert p.member_ids == ("a:5-7", "a:6-7", "a:4-5")  # best first, then by score
    assert p.metadata["tag"] == "a5-7"  # the best member's metadata
    assert p.metadata["merged_ids"] == list(p.member_ids)


def test_keep_best_drops_overlapping_and_nested_spans_but_keeps_adjacent_ones() -> None:
    items = [
        hit("a", 4, 5, 0.9),  # -> (4,8)
        hit("a", 2, 3, 0.8),  # -> (2,6): overlaps (4,8), dropped
        hit("a", 0, 10, 0.95),  # coarse: the whole document, contains everything
        hit("b", 0, 1, 0.1),  # another document
    ]
    out = promote_to_parents(items, TEXTS, parent_size=4, stride=2)
    assert [(p.doc_id, p.sent_start, p.sent_end) for p in out] == [("a", 0, 10), ("b", 0, 3)]
    assert out[0].member_ids == ("a:0-10", "a:4-5", "a:2-3")
    assert out[0].promoted is False

    items = [hit("a", 0, 1, 0.9), hit("a", 4, 5, 0.8), hit("a", 9, 10, 0.7)]
    out = promote_to_parents(items, TEXTS, parent_size=4, stride=4)  # windows (0,4) (4,8) (6,10)
    assert [(p.sent_start, p.sent_end) for p in out] == [(0, 4), (4, 8)]  # adjacent: both kept
    assert out[1].member_ids == ("a:4-5", "a:9-10")  # (6,10) overlaps (4,8)


def test_union_merges_overlapping_windows_into_their_span() -> None:
    # -> (4,8), (2,6), (6,10): transitively overlapping
    items = [hit("a", 5, 7, 0.9), hit("a", 3, 5, 0.8), hit("a", 8, 10, 0.2), hit("b", 1, 2, 0.5)]
    out = promote_to_parents(items, TEXTS, parent_size=4, stride=2, mode="union")
    # (4,8) u (2,6) u (6,10) are transitively overlapping: one passage over sentences 2..9
    assert [(p.doc_id, p.sent_start, p.sent_end) for p in out] == [("a", 2, 10), ("b", 0, 3)]
    start, end = sent_span("a", 2, 10)
    assert (out[0].start, out[0].end) == (start, end)
    assert out[0].text == DOC_A[start:end]
    assert out[0].score == 0.9
    assert out[0].id == "a::s2-10"
    assert out[0].member_ids == ("a:5-7", "a:3-5", "a:8-10")
    assert out[0].metadata["tag"] == "a5-7"
    assert (out[0].metadata["start_index"], out[0].metadata["end_index"]) == (start, end)


def test_zero_fine_max_only_removes_overlaps() -> None:
    items = [hit("a", 1, 3, 0.5), hit("a", 2, 4, 0.6), hit("a", 5, 6, 0.1)]
    out = promote_to_parents(items, TEXTS, fine_max_sentences=0)
    assert [p.id for p in out] == ["a:2-4", "a:5-6"]
    assert [p.promoted for p in out] == [False, False]
    assert out[0].member_ids == ("a:2-4", "a:1-3")
    union = promote_to_parents(items, TEXTS, fine_max_sentences=0, mode="union")
    assert [(p.sent_start, p.sent_end, p.promoted) for p in union] == [(1, 4, True), (5, 6, False)]


# ---------------------------------------------------------------------- pass-through


@pytest.mark.parametrize(
    ("doc_id", "start", "end"),
    [
        ("unknown", 0, 10),
        (None, 0, 10),
        ("a", None, 10),
        ("a", 0, None),
        ("a", -1, 10),
        ("a", 5, 2),
        ("a", 5, 5),
        ("a", 0, len(DOC_A) + 1),
        ("a", SENTS["a"][0][1], SENTS["a"][1][0]),  # only the space between two sentences
    ],
    ids=[
        "unknown doc",
        "no doc",
        "no start",
        "no end",
        "negative",
        "reversed",
        "empty",
        "past the end",
        "blank",
    ],
)
def test_unlocatable_items_pass_through_unchanged(
    doc_id: str | None, start: int | None, end: int | None
) -> None:
    item = PromotionItem(doc_id, start, end, 0.5, "as retrieved", {"k": 1}, id="x")
    twin = PromotionItem(doc_id, start, end, 0.9, "as retrieved", {"k": 2}, id="y")
    fine = hit("a", 0, 1, 0.7)
    out = promote_to_parents([item, twin, fine], TEXTS, parent_size=4)
    assert [p.id for p in out] == ["y", "a::s0-4", "x"]  # never merged, ordered by score
    p = out[2]
    assert (p.doc_id, p.start, p.end, p.sent_start, p.sent_end) == (doc_id, start, end, None, None)
    assert p.text == "as retrieved"
    assert p.promoted is False
    assert p.metadata == {"k": 1, "promoted": False, "merged_ids": ["x"]}


def test_items_without_ids_get_a_positional_key() -> None:
    item = PromotionItem("a", 0, 5, 1.0, DOC_A[:5])
    assert item.key == "a@0-5"
    (p,) = promote_to_parents([item, PromotionItem("zz", 1, 2, 0.1, "z")], TEXTS)[:1]
    assert p.member_ids == ("a@0-5",)


# ---------------------------------------------------------------------- ordering, validation


def test_results_are_ordered_by_score_then_input_position() -> None:
    items = [hit("b", 0, 1, 0.5), hit("a", 0, 1, 0.5), hit("a", 9, 10, 0.8), hit("c", 0, 1, math.nan)]
    out = promote_to_parents(items, TEXTS, parent_size=4, stride=4)
    assert [p.id for p in out] == ["a::s6-10", "b::s0-3", "a::s0-4", "c::s0-4"]


def test_empty_input() -> None:
    assert promote_to_parents([], TEXTS) == []
    assert promote_to_parents([], {}) == []


@pytest.mark.parametrize(
    ("kwargs", "exc", "message"),
    [
        ({"parent_size": 0}, ValueError, "parent_size must be >= 1"),
        ({"parent_size": 2.0}, TypeError, "parent_size must be an int"),
        ({"parent_size": True}, TypeError, "parent_size must be an int"),
        ({"stride": 0}, ValueError, "stride must be >= 1"),
        ({"parent_size": 4, "stride": 5}, ValueError, r"stride must be <= parent_size \(4\)"),
        ({"stride": "2"}, TypeError, "stride must be an int"),
        ({"fine_max_sentences": -1}, ValueError, "fine_max_sentences must be >= 0"),
        ({"mode": "merge"}, ValueError, "mode must be one of"),
    ],
    ids=str,
)
def test_bad_arguments(kwargs: dict[str, Any], exc: type[Exception], message: str) -> None:
    with pytest.raises(exc, match=message):
        promote_to_parents([hit("a", 0, 1, 1.0)], TEXTS, **kwargs)
    with pytest.raises(exc, match=message):
        promote_to_parents([], TEXTS, **kwargs)  # checked even with nothing to do


def test_deterministic_and_inputs_untouched() -> None:
    items = [hit("a", i, i + 1, 0.1 * (i % 4)) for i in range(10)] + [hit("b", 0, 2, 0.25)]
    before = copy.deepcopy(items)
    first = promote_to_parents(items, TEXTS, parent_size=4)
    assert items == before
    assert promote_to_parents(items, TEXTS, parent_size=4) == first
    assert promote_to_parents(list(items), dict(TEXTS), parent_size=4) == first


# ---------------------------------------------------------------------- against a reference


def reference(
    items: Sequence[PromotionItem],
    texts: Mapping[str, str],
    parent_size: int,
    stride: int | None,
    fine_max: int,
    mode: str,
) -> list[tuple[str | None, int | None, int | None, int, list[int]]]:
    """Plain-Python promotion: (doc, start, end, best index, member indices) per result."""
    spans: list[tuple[str, int, int] | None] = []
    for it in items:
        text = texts.get(it.doc_id) if it.doc_id is not None else None
        if text is None or it.start is None or it.end is None or not 0 <= it.start < it.end <= len(text):
            spans.append(None)
            continue
        sents = split_sentences(text)
        cov = [i for i, (s, e) in enumerate(sents) if s < it.end and it.start < e]
        if not cov:
            spans.append(None)
        elif cov[-1] + 1 - cov[0] <= fine_max:
            windows = sentence_windows(len(sents), parent_size, stride)
            ws, we = max(windows, key=lambda w: (min(cov[-1] + 1, w[1]) - max(cov[0], w[0]), -w[0]))
            spans.append((it.doc_id, sents[ws][0], sents[we - 1][1]))  # type: ignore[arg-type]
        else:
            spans.append((it.doc_id, it.start, it.end))  # type: ignore[arg-type]

    def overlap(a: tuple[str, int, int] | None, b: tuple[str, int, int] | None) -> bool:
        return a is not None and b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]

    order = sorted(range(len(items)), key=lambda i: (-items[i].score, i))
    groups: list[list[int]] = []
    for i in order:
        if mode == "keep_best":
            owner = next((g for g in groups if overlap(spans[g[0]], spans[i])), None)
        else:
            owners = [g for g in groups if any(overlap(spans[m], spans[i]) for m in g)]
            owner = owners[0] if owners else None
            for other in owners[1:]:  # i bridges several groups: merge them
                owners[0].extend(other)
                groups.remove(other)
        if owner is None:
            groups.append([i])
        else:
            owner.append(i)
    out = []
    for g in groups:
        members = sorted(g, key=lambda i: (-items[i].score, i))
        best = members[0]
        span = spans[best]
        if span is None:
            out.append((items[best].doc_id, items[best].start, items[best].end, best, members))
        elif mode == "union":
            all_spans = [s for s in (spans[m] for m in members) if s is not None]
            lo, hi = min(s[1] for s in all_spans), max(s[2] for s in all_spans)
            out.append((span[0], lo, hi, best, members))
        else:
            out.append((span[0], span[1], span[2], best, members))
    return sorted(out, key=lambda r: (-items[r[3]].score, r[3]))


@st.composite
def promotion_cases(draw: st.DrawFn) -> tuple[list[PromotionItem], dict[str, Any]]:
    items = []
    for i in range(draw(st.integers(0, 14))):
        doc_id = draw(st.sampled_from(["a", "b", "c", "unknown"]))
        text = TEXTS.get(doc_id, DOC_A)
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, min(len(text), start + 120)))
        score = draw(st.integers(0, 16)) / 8  # exact in float32: no rounding ties
        items.append(PromotionItem(doc_id, start, end, score, text[start:end], {"i": i}, id=f"h{i}"))
    parent_size = draw(st.integers(1, 6))
    kwargs = {
        "parent_size": parent_size,
        "stride": draw(st.one_of(st.none(), st.integers(1, parent_size))),
        "fine_max_sentences": draw(st.integers(0, 5)),
        "mode": draw(st.sampled_from(["keep_best", "union"])),
    }
    return items, kwargs


@given(promotion_cases())
def test_matches_the_reference(case: tuple[list[PromotionItem], dict[str, Any]]) -> None:
    items, kwargs = case
    out = promote_to_parents(items, TEXTS, **kwargs)
    expected = reference(
        items, TEXTS, kwargs["parent_size"], kwargs["stride"], kwargs["fine_max_sentences"], kwargs["mode"]
    )
    assert [(p.doc_id, p.start, p.end, p.index, [int(m[1:]) for m in p.member_ids]) for p in out] == expected
    for p in out:
        best = items[p.index]
        assert p.score == best.score
        assert p.metadata["i"] == best.metadata["i"]
        if p.promoted:
            assert p.text == TEXTS[p.doc_id or ""][p.start : p.end]
            assert p.id == f"{p.doc_id}::s{p.sent_start}-{p.sent_end}"
        else:
            assert p.text == best.text
            assert p.id == best.id
    # every input is the member of exactly one result
    assert sorted(m for p in out for m in p.member_ids) == sorted(it.key for it in items)
    # located results of one document never overlap
    located = [p for p in out if p.sent_start is not None]
    for x in located:
        for y in located:
            if x is not y and x.doc_id == y.doc_id:
                assert x.end <= y.start or y.end <= x.start  # type: ignore[operator]


# ---------------------------------------------------------------------- texts from pieces


def test_texts_from_spans_rebuilds_documents() -> None:
    pieces = [("a", 0, 20, DOC_A[:20]), ("a", 10, 40, DOC_A[10:40]), ("b", 5, 12, DOC_B[5:12])]
    texts = texts_from_spans(pieces)
    assert texts["a"] == DOC_A[:40]
    assert texts["b"] == " " * 5 + DOC_B[5:12]  # uncovered characters become spaces
    assert texts_from_spans([]) == {}
    with pytest.raises(ValueError, match="disagree at character 10"):
        texts_from_spans([("a", 0, 20, DOC_A[:20]), ("a", 10, 12, "##")])
    with pytest.raises(ValueError, match="offsets must match the text"):
        texts_from_spans([("a", 0, 20, "short")])
    with pytest.raises(ValueError, match="offsets must match the text"):
        texts_from_spans([("a", -2, 3, "abcde")])


def test_texts_from_store_reads_located_pieces() -> None:
    store = ChunkStore.ephemeral(unique_name("promo"))
    rows = [
        ("p1", DOC_C[:22], {"doc_id": "c", "start_index": 0, "end_index": 22}),
        ("p2", DOC_C[11:], {"doc_id": "c", "start_index": 11, "end_index": len(DOC_C)}),
        ("p3", DOC_B[:10], {"src": "b", "start_index": 0}),  # no doc_id: skipped
        ("p4", DOC_B, {"doc_id": "b", "start_index": 0}),  # no end: start + len(text)
    ]
    store.add(
        [r[0] for r in rows],
        [r[1] for r in rows],
        np.ones((len(rows), 2), dtype=np.float32),
        [r[2] for r in rows],
    )
    assert texts_from_store(store) == {"c": DOC_C, "b": DOC_B}
    assert texts_from_store(store, doc_id_key="src") == {"b": DOC_B[:10]}
