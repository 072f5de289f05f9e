from __future__ import annotations

import numpy as np
import pytest

from core.packed_strings import PackedJson, PackedStrings
from core.persist import array_to_bytes

TEXTS = ["", "plain", "Tromsø ❄ Ωmega", "line\nbreak", "x" * 1000]


def test_strings_round_trip_without_a_copy() -> None:
    files = PackedStrings.to_files(TEXTS, "t")
    packed = PackedStrings.from_files(files, "t")
    assert len(packed) == len(TEXTS)
    assert list(packed) == TEXTS
    assert packed == TEXTS
    assert packed[-1] == TEXTS[-1]
    assert packed[1:3] == TEXTS[1:3]
    with pytest.raises(IndexError):
        packed[len(TEXTS)]


def test_extended_shares_the_packed_part_and_leaves_the_original() -> None:
    packed = PackedStrings.from_files(PackedStrings.to_files(TEXTS[:2], "t"), "t")
    grown = packed.extended(TEXTS[2:])
    assert list(grown) == TEXTS
    assert len(packed) == 2
    again = PackedStrings.from_files(PackedStrings.to_files(grown, "t"), "t")
    assert again == TEXTS


def test_bad_offsets_are_a_clear_error() -> None:
    files = PackedStrings.to_files(TEXTS, "t")
    for offsets in ([1, 2], [0, 5, 3, 20], [0, 10_000]):
        bad = {**files, "t_offsets.npy": array_to_bytes(np.asarray(offsets, dtype=np.int64))}
        with pytest.raises(ValueError, match="offsets"):
            PackedStrings.from_files(bad, "t")
    with pytest.raises(KeyError):
        PackedStrings.from_files({"t.npy": files["t.npy"]}, "t")


def test_json_objects_round_trip_and_each_access_is_a_new_dict() -> None:
    metas = [{"doc_id": "a", "n": 1, "ok": True, "x": None}, {"title": "Ørsted", "year": 2020.5}]
    packed = PackedJson.from_files(PackedJson.to_files(metas, "m"), "m")
    assert list(packed) == metas
    first = packed[0]
    first["doc_id"] = "changed"
    assert packed[0]["doc_id"] == "a"
    grown = packed.extended([{"doc_id": "c"}])
    assert grown[2] == {"doc_id": "c"}
    assert len(packed) == 2
    not_objects = PackedStrings.to_files(["[1, 2]"], "m")
    with pytest.raises(ValueError, match="does not start with"):
        PackedJson.from_files(not_objects, "m")


def test_damaged_strings_are_refused_at_load_or_read_harmlessly(caplog: pytest.LogCaptureFixture) -> None:
    files = PackedStrings.to_files(TEXTS, "t")
    blob = bytearray(files["t.npy"])
    blob[-5] = 0xFF  # not UTF-8
    with pytest.raises(ValueError, match="UTF-8"):
        PackedStrings.from_files({**files, "t.npy": bytes(blob)}, "t")
    split = {**files, "t_offsets.npy": array_to_bytes(np.asarray([0, 0, 5, 11, 33, 1033], dtype=np.int64))}
    with pytest.raises(ValueError, match="inside a character"):  # offset 11 splits "ø"
        PackedStrings.from_files(split, "t")
    inside = PackedStrings.to_files(['{"a": 1}', '{"b" 2}'], "m")  # damaged inside, right ends
    packed = PackedJson.from_files(inside, "m")
    assert packed[0] == {"a": 1}
    assert packed[1] == {}
    assert "damaged" in caplog.text
