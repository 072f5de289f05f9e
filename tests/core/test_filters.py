"""Metadata filters: validation, and the same answers as Chroma's own ``where`` on random data."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from core.filters import FilterError, MetadataColumns, parse_filter
from core.store import ChunkStore
from tests.core.conftest import unique_name
from tests.filter_cases import random_where


def _random_metadata(rng: random.Random, i: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"rank": i}
    for field in ("tenant", "year", "score", "public", "region"):
        r = rng.random()
        if r < 0.15:
            continue  # the field is missing
        if field in ("tenant", "region"):
            meta[field] = rng.choice(["acme", "globex", "initech", "eu", "us"]) if r < 0.9 else ["eu", "us"]
        elif field == "year":
            meta[field] = rng.randint(2014, 2025) if r < 0.8 else float(rng.randint(2014, 2025))
        elif field == "score":
            meta[field] = round(rng.uniform(0, 1), 2) if r < 0.9 else rng.choice(["high", True, 1])
        else:
            meta[field] = rng.random() < 0.5 if r < 0.9 else rng.choice([0, 1, "yes"])
    return meta


@pytest.fixture(scope="module")
def oracle() -> tuple[ChunkStore, list[dict[str, Any]]]:
    rng = random.Random(11)
    metas = [_random_metadata(rng, i) for i in range(300)]
    store = ChunkStore.ephemeral(unique_name("filters"))
    vectors = np.eye(300, 8, dtype=np.float32) + 0.01
    store.add([f"c{i}" for i in range(300)], [f"text {i}" for i in range(300)], vectors, metas)
    return store, metas


def test_random_filters_select_exactly_what_chroma_selects(
    oracle: tuple[ChunkStore, list[dict[str, Any]]],
) -> None:
    store, metas = oracle
    columns = MetadataColumns(lambda: metas)
    rng = random.Random(5)
    checked = 0
    for _ in range(600):
        where = random_where(rng, depth=3)
        try:
            expected = set(store.get(where=where, include_embeddings=False).ids)
        except ValueError:  # Chroma refuses it: so must we
            with pytest.raises(FilterError):
                parse_filter(where)
            continue
        flt = parse_filter(where)
        assert flt is not None
        got = {f"c{i}" for i in np.flatnonzero(columns.mask(flt))}
        assert got == expected, where
        assert {f"c{i}" for i, m in enumerate(metas) if flt.matches(m)} == expected, where
        checked += 1
    assert checked > 400


def test_columns_follow_appended_rows() -> None:
    metas: list[dict[str, Any]] = [{"t": "a"}, {"t": "b"}]
    columns = MetadataColumns(lambda: metas)
    flt = parse_filter({"t": "a"})
    assert flt is not None
    assert columns.mask(flt).tolist() == [True, False]
    metas.append({"t": "a"})
    assert columns.mask(flt).tolist() == [True, False, True]


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ({"tenant": {"$contains": "x"}}, "$contains"),
        ({"tenant": {"$exists": True}}, "$exists"),
        ({"$not": [{"a": 1}, {"b": 2}]}, "$not"),
        ({"$contains": "word"}, "$contains"),
        ({"a": 1, "b": 2}, "exactly one key"),
        ({"a": {"$eq": 1, "$ne": 2}}, "exactly one operator"),
        ({"$and": [{"a": 1}]}, "at least two"),
        ({"a": {"$in": []}}, "non-empty list"),
        ({"a": {"$in": [1, "x"]}}, "one type"),
        ({"a": {"$gt": "x"}}, "int or a float"),
        ({"a": {"$gt": True}}, "int or a float"),
        ({"a": None}, "str, int, float or bool"),
        ({"a": [1, 2]}, "str, int, float or bool"),
        ({1: "x"}, "non-string key"),
    ],
)
def test_a_filter_that_cannot_be_honoured_is_a_clear_error(where: Any, named: str) -> None:
    with pytest.raises(FilterError, match=named.replace("$", r"\$")):
        parse_filter(where)


def test_no_filter_and_wrong_types() -> None:
    assert parse_filter(None) is None
    assert parse_filter({}) is None
    with pytest.raises(FilterError, match="dict"):
        parse_filter("tenant = acme")  # type: ignore[arg-type]
    flt = parse_filter({"a": 1})
    assert parse_filter(flt) is flt
    assert flt is not None
    assert flt.where == {"a": {"$eq": 1}}
    assert flt.fields == {"a"}


def test_a_fractional_bound_compares_by_value_over_int_metadata(
    oracle: tuple[ChunkStore, list[dict[str, Any]]],
) -> None:
    """The one place this module parts from Chroma (1.5), on purpose: documented in core.filters.

    Chroma compares an int value with a fractional bound as if the bound were cut to an int
    (``1 >= 1.5`` holds there); here it compares the numbers.
    """
    metas = [{"level": 1}, {"level": 2.5}, {"level": 3.0}]
    columns = MetadataColumns(lambda: metas)
    for where, expected in (
        ({"level": {"$gte": 1.5}}, [1, 2]),
        ({"level": {"$lt": 1.5}}, [0]),
        ({"level": {"$gt": 0.5}}, [0, 1, 2]),
    ):
        flt = parse_filter(where)
        assert flt is not None
        assert np.flatnonzero(columns.mask(flt)).tolist() == expected, where
        assert [i for i, m in enumerate(metas) if flt.matches(m)] == expected, where
