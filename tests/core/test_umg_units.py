"""UMG-RAG's sentence-window units (core.strategies.umg.units)."""

from __future__ import annotations

import pytest

from core.strategies.umg.units import build_units


def test_windows_cover_every_sentence_and_share_spans() -> None:
    text = "One. Two. Three. Four. Five."
    units = build_units([("d", text)], [2, 4])
    spans = list(zip(units.sent_start, units.sent_end, strict=True))
    assert spans == sorted(spans)
    assert {s for a, b in spans for s in range(a, b)} == set(range(5))
    assert all(units.texts[u] == text[units.char_start[u] : units.char_end[u]] for u in range(len(units)))
    assert units.rows(4).tolist() == [u for u in range(len(units)) if 4 in units.granularities[u]]


def test_windows_never_cross_a_heading() -> None:
    text = "Falcon\nFalcon is a rocket. It flies. It lands.\n\nZeta\nZeta is a project. It costs money."
    units = build_units([("d", text)], [2, 8])
    for u in range(len(units)):
        assert not ("Falcon" in units.texts[u] and "Zeta" in units.texts[u]), units.texts[u]
    assert any(t.startswith("Zeta\nZeta is") for t in units.texts), "a section's windows start at its heading"


def test_bad_granularities() -> None:
    with pytest.raises(ValueError, match="distinct positive ints"):
        build_units([("d", "x.")], [2, 2])


def test_rows_are_kept_until_their_list_grows_and_cannot_be_changed() -> None:
    units = build_units([("d", "One. Two. Three. Four. Five.")], [2, 4])
    first = units.rows(2)
    assert units.rows(2) is first  # the same array while the list is unchanged
    with pytest.raises(ValueError, match="read-only"):
        first[0] = 99
    units.by_granularity[2].append(7)
    assert units.rows(2).tolist() == [*first.tolist(), 7]
    units.by_granularity[2] = [1]  # a new list of another length
    assert units.rows(2).tolist() == [1]
    units.by_granularity[2] = [3]  # a new list of the same length
    assert units.rows(2).tolist() == [3]
