from __future__ import annotations

import random
import threading

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from core import CuckooFilter
from core import _native as native


def test_insert_append_lookup_and_get() -> None:
    f = CuckooFilter()
    assert f.insert("marie curie", [7, 3]) is True
    assert f.insert("marie curie", [1, 3]) is False
    assert f.lookup("marie curie") == [1, 3, 7]
    assert f.lookup("pierre curie") is None
    assert f.get("pierre curie", []) == []
    assert "marie curie" in f
    assert "pierre curie" not in f
    assert 42 not in f
    assert len(f) == 1


def test_remove_and_remove_ids() -> None:
    f = CuckooFilter()
    f.insert("a", [1, 2, 3])
    f.insert("b", [4])
    assert f.remove_ids("a", [2, 99]) == 1
    assert f.lookup("a") == [1, 3]
    assert f.remove_ids("a", [1, 3]) == 2
    assert f.lookup("a") is None, "an entity whose list empties is removed"
    assert f.remove("b") is True
    assert f.remove("b") is False
    assert f.remove_ids("missing", [1]) == 0
    assert len(f) == 0


def test_grows_instead_of_failing() -> None:
    f = CuckooFilter(capacity=8, max_kicks=10)
    start = f.num_buckets
    for i in range(5000):
        f.insert(f"entity {i}", [i])
    assert f.num_buckets > start
    assert len(f) == 5000
    assert all(f.lookup(f"entity {i}") == [i] for i in range(5000))
    assert 0 < f.load_factor() <= 1


def test_temperature_counts_and_reorder() -> None:
    f = CuckooFilter(reorder_every=0)
    for i in range(50):
        f.insert(f"k{i}", [i])
    for _ in range(7):
        f.lookup("k3")
    f.lookup_many(["k3", "k4", "absent"])
    f.lookup("k3", touch=False)
    assert f.get("k3") == [3]
    assert f.temperature("k3") == 8
    assert f.temperature("k4") == 1
    assert f.temperature("absent") == -1
    f.reorder()
    assert f.stats()["reorders"] == 1
    assert all(f.lookup(f"k{i}", touch=False) == [i] for i in range(50))


def test_automatic_reorder_every_n_lookups() -> None:
    f = CuckooFilter(reorder_every=10)
    f.insert("x", [1])
    for _ in range(25):
        f.lookup("x")
    assert f.stats()["reorders"] == 2
    f.lookup_many(["x"] * 10)
    assert f.stats()["reorders"] == 3


def test_reorder_puts_hot_entries_first_in_bucket() -> None:
    # Many keys in a tiny table share buckets; after reordering every bucket must list
    # its entries by descending temperature, which we observe through entry order in
    # serialised form being unchanged for lookups while the hottest stays reachable.
    f = CuckooFilter(capacity=16, reorder_every=0)
    keys = [f"key {i}" for i in range(60)]
    for i, k in enumerate(keys):
        f.insert(k, [i])
    hot = keys[17]
    for _ in range(100):
        f.lookup(hot)
    before = f.to_bytes()
    f.reorder()
    after = f.to_bytes()
    assert f.lookup(hot, touch=False) == [17]
    assert len(before) == len(after)
    assert all(f.lookup(k, touch=False) == [i] for i, k in enumerate(keys))


def test_lookup_many_csr_output() -> None:
    f = CuckooFilter()
    f.insert("a", [5, 1])
    f.insert("b", [2])
    offsets, ids = f.lookup_many(("a", "zzz", "b", "a"))
    assert offsets.dtype == np.int64
    assert ids.dtype == np.uint32
    assert offsets.tolist() == [0, 2, 2, 3, 5]
    assert ids.tolist() == [1, 5, 2, 1, 5]
    empty_offsets, empty_ids = f.lookup_many([])
    assert empty_offsets.tolist() == [0]
    assert empty_ids.size == 0
    gen_offsets, _ = f.lookup_many(k for k in ["a", "b"])
    assert gen_offsets.tolist() == [0, 2, 3]


def test_insert_many_matches_single_inserts() -> None:
    keys = [f"e{i % 37}" for i in range(200)]
    ids = list(range(200))
    a = CuckooFilter()
    for k, i in zip(keys, ids, strict=True):
        a.insert(k, [i])
    b = CuckooFilter()
    assert b.insert_many(keys, np.arange(201), ids) == 37
    assert a.to_bytes() == b.to_bytes()


def test_unicode_and_empty_keys() -> None:
    f = CuckooFilter()
    f.insert("", [1])
    f.insert("Škoda Müller 東京", [2])
    assert f.lookup("") == [1]
    assert f.lookup("Škoda Müller 東京") == [2]
    assert f.lookup("Skoda Muller") is None


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda f: f.insert("a", [-1]), ValueError, r"\[0, 2\^32 - 2\]"),
        (lambda f: f.insert("a", [2**32]), ValueError, "2\\^32"),
        (lambda f: f.insert("a", [1.5]), TypeError, "integers"),
        (lambda f: f.insert("a", [[1, 2]]), ValueError, "one-dimensional"),
        (lambda f: f.insert(3, [1]), TypeError, "incompatible function arguments"),
        (lambda f: f.lookup_many("abc"), TypeError, "single string"),
        (lambda f: f.lookup_many(["a", 3]), TypeError, "item 1"),
        (lambda f: f.insert_many(["a"], [0], [1]), ValueError, "offsets"),
        (lambda f: f.insert_many(["a"], [0, 5], [1]), ValueError, "offsets"),
    ],
)
def test_bad_input_raises_clear_errors(call, exc, match) -> None:  # type: ignore[no-untyped-def]
    f = CuckooFilter()
    f.insert("keep", [1])
    with pytest.raises(exc, match=match):
        call(f)
    assert f.lookup("keep", touch=False) == [1], "a rejected call leaves the filter intact"
    assert len(f) == 1


@pytest.mark.parametrize("bits", [7, 17, 0])
def test_fingerprint_bits_validated(bits: int) -> None:
    with pytest.raises(ValueError, match="fingerprint_bits"):
        CuckooFilter(fingerprint_bits=bits)


@pytest.mark.parametrize("bits", [8, 12, 16])
def test_all_fingerprint_widths_work(bits: int) -> None:
    f = CuckooFilter(fingerprint_bits=bits, capacity=64)
    for i in range(3000):
        f.insert(f"n{i}", [i, i + 1])
    assert f.fingerprint_bits == bits
    assert all(f.lookup(f"n{i}", touch=False) == [i, i + 1] for i in range(3000))
    assert all(f.lookup(f"absent {i}") is None for i in range(3000))


def test_determinism_same_inputs_same_bytes() -> None:
    def build() -> bytes:
        f = CuckooFilter(capacity=32, seed=7)
        rng = random.Random(3)
        for i in range(2000):
            f.insert(f"ent {rng.randrange(800)}", [rng.randrange(100)])
            if i % 7 == 0:
                f.remove(f"ent {rng.randrange(800)}")
        return f.to_bytes()

    assert build() == build()
    other = CuckooFilter(capacity=32, seed=8)
    other.insert("ent 1", [1])
    assert other.to_bytes() != build()


def test_round_trip_bytes_and_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = CuckooFilter(fingerprint_bits=10, reorder_every=5, seed=11)
    for i in range(500):
        f.insert(f"x{i}", list(range(i % 5 + 1)))
    for _ in range(3):
        f.lookup("x7")
    f.remove("x3")
    data = f.to_bytes()
    g = CuckooFilter.from_bytes(data)
    assert g.to_bytes() == data
    assert (g.fingerprint_bits, g.reorder_every, g.seed) == (10, 5, 11)
    assert g.temperature("x7") == 3
    assert g.lookup("x3") is None
    path = tmp_path / "filter.bin"
    f.save(path)
    h = CuckooFilter.load(path)
    assert h.to_bytes() == data
    assert sorted(e[2] for e in h.entries()) == sorted(e[2] for e in f.entries())
    # The loaded filter keeps working: inserts, growth, lookups.
    for i in range(500, 3000):
        h.insert(f"x{i}", [i])
    assert h.lookup("x2999", touch=False) == [2999]
    assert h.lookup("x499", touch=False) == [0, 1, 2, 3, 4]


def test_load_errors_are_clear(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FileNotFoundError, match="no cuckoo filter file"):
        CuckooFilter.load(tmp_path / "missing.bin")
    (tmp_path / "bad.bin").write_bytes(b"not a filter at all")
    with pytest.raises(ValueError, match=r"bad\.bin: .*checksum"):
        CuckooFilter.load(tmp_path / "bad.bin")
    with pytest.raises(TypeError, match="bytes"):
        CuckooFilter.from_bytes("text")  # type: ignore[arg-type]


def _resign(body: bytes, seed: int) -> bytes:
    return body + native.hash_bytes(body, seed).to_bytes(8, "little")


FILTER_CHECKSUM_SEED = 0x43554B4F4F2D3031


def test_checksum_seed_matches_format() -> None:
    data = CuckooFilter().to_bytes()
    assert _resign(data[:-8], FILTER_CHECKSUM_SEED) == data


def test_version_mismatch_is_reported() -> None:
    data = bytearray(CuckooFilter().to_bytes()[:-8])
    data[4] = 99
    with pytest.raises(ValueError, match="unsupported format version 99"):
        CuckooFilter.from_bytes(_resign(bytes(data), FILTER_CHECKSUM_SEED))


def test_mutated_and_truncated_buffers_raise_value_error() -> None:
    f = CuckooFilter(capacity=16)
    for i in range(40):
        f.insert(f"k{i}", list(range(i % 4 + 1)))
    good = f.to_bytes()
    rng = random.Random(1234)
    failures = 0
    for trial in range(3000):
        buf = bytearray(good)
        mode = trial % 4
        if mode == 0:
            buf = buf[: rng.randrange(len(buf))]
        else:
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(len(buf))
                buf[pos] = rng.randrange(256)
            if mode >= 2:  # re-sign so the structural checks, not the checksum, must catch it
                buf = bytearray(_resign(bytes(buf[:-8]), FILTER_CHECKSUM_SEED))
        try:
            g = CuckooFilter.from_bytes(bytes(buf))
        except ValueError:
            failures += 1
            continue
        # A mutation that still parses must give a consistent, usable filter.
        g.insert("fresh", [1])
        assert g.lookup("fresh", touch=False) == [1]
        for e in g.entries():
            assert e[2] == sorted(set(e[2]))
    assert failures > 2500


class FilterModel(RuleBasedStateMachine):
    """The filter against a dict model: no false negative and no wrong list, ever."""

    keys = Bundle("keys")

    @initialize(bits=st.sampled_from([8, 12, 16]), capacity=st.sampled_from([1, 8, 64]))
    def setup(self, bits: int, capacity: int) -> None:
        self.f = CuckooFilter(fingerprint_bits=bits, capacity=capacity, max_kicks=20, reorder_every=7)
        self.model: dict[str, set[int]] = {}

    @rule(target=keys, key=st.text(max_size=12))
    def new_key(self, key: str) -> str:
        return key

    @rule(key=keys, ids=st.lists(st.integers(0, 50), max_size=5))
    def insert(self, key: str, ids: list[int]) -> None:
        was_new = self.f.insert(key, ids)
        assert was_new == (key not in self.model)
        self.model.setdefault(key, set()).update(ids)

    @rule(key=keys)
    def lookup(self, key: str) -> None:
        got = self.f.lookup(key)
        if key in self.model:
            assert got == sorted(self.model[key])
        else:
            assert got is None

    @rule(key=keys)
    def remove(self, key: str) -> None:
        assert self.f.remove(key) == (key in self.model)
        self.model.pop(key, None)

    @rule(key=keys, ids=st.lists(st.integers(0, 50), max_size=5))
    def remove_ids(self, key: str, ids: list[int]) -> None:
        expected = len(self.model.get(key, set()) & set(ids))
        assert self.f.remove_ids(key, ids) == expected
        if key in self.model:
            self.model[key] -= set(ids)
            if not self.model[key]:
                del self.model[key]

    @rule(keys=st.lists(keys, max_size=6))
    def lookup_many(self, keys: list[str]) -> None:
        offsets, ids = self.f.lookup_many(keys)
        for i, k in enumerate(keys):
            assert ids[offsets[i] : offsets[i + 1]].tolist() == sorted(self.model.get(k, set()))

    @rule()
    def round_trip(self) -> None:
        data = self.f.to_bytes()
        self.f = CuckooFilter.from_bytes(data)
        assert self.f.to_bytes() == data

    @rule()
    def reorder(self) -> None:
        self.f.reorder()

    @invariant()
    def sizes_agree(self) -> None:
        if hasattr(self, "f"):
            assert len(self.f) == len(self.model)


TestFilterModel = FilterModel.TestCase


@pytest.mark.slow
def test_one_million_entities_no_false_negative_no_wrong_list() -> None:
    n = 1_000_000
    keys = [f"entity {i}" for i in range(n)]
    f = CuckooFilter()
    assert f.insert_many(keys, np.arange(n + 1), np.arange(n)) == n
    offsets, ids = f.lookup_many(keys, touch=False)
    assert np.array_equal(np.diff(offsets), np.ones(n, dtype=np.int64)), "every entity found"
    assert np.array_equal(ids, np.arange(n, dtype=np.uint32)), "every list is the entity's own"
    absent = [f"absent {i}" for i in range(n)]
    offsets, _ = f.lookup_many(absent, touch=False)
    assert offsets[-1] == 0, "no absent key returns a list"
    fp_stage = f.stats()["fingerprint_false_positives"]
    rate = fp_stage / n
    print(f"fingerprint-stage false positives: {fp_stage} of {n} absent keys ({rate:.4%}), wrong lists: 0")
    # 2 buckets x 4 slots at ~95% load with 12-bit fingerprints: about 8 * 0.95 / 4096 = 0.19%.
    assert 0.0005 < rate < 0.005


def test_concurrent_batch_lookups_keep_exact_temperatures() -> None:
    f = CuckooFilter(reorder_every=1000)
    keys = [f"t{i}" for i in range(2000)]
    for i, k in enumerate(keys):
        f.insert(k, [i])
    rounds, n_threads = 25, 6
    errors: list[str] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(rounds):
            _offsets, ids = f.lookup_many(keys)
            if not np.array_equal(ids, np.arange(2000, dtype=np.uint32)):
                errors.append("wrong ids")
            if f.lookup(keys[rng.randrange(2000)]) is None:
                errors.append("missing key")

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    total = sum(f.temperature(k) for k in keys)
    assert total == n_threads * rounds * (2000 + 1)
    assert f.stats()["reorders"] >= 1
