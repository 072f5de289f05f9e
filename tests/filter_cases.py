"""Random tenants, documents and metadata filters for the filter property tests.

Every document gets metadata drawn from a seeded generator (a tenant, a year, a score, a
public flag, sometimes a region, sometimes nothing of one field) and every filter is a random
Chroma ``where`` tree over those fields with every operator bridge-rag honours. The oracle a
test compares against is Chroma's own ``get(where=...)`` on the strategy's collection.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from core.types import Document

TENANTS = ("acme", "globex", "initech", "umbrella", "stark")
REGIONS = ("eu", "us", "apac")


def tag_documents(docs: Sequence[Document], seed: int = 7) -> list[Document]:
    """Copies of ``docs`` with random tenant metadata (the same for the same seed)."""
    rng = random.Random(seed)
    out = []
    for i, d in enumerate(docs):
        meta: dict[str, Any] = dict(d.metadata)
        meta["tenant"] = TENANTS[rng.randrange(len(TENANTS))]
        meta["year"] = rng.randint(2015, 2024)
        meta["score"] = round(rng.uniform(0.0, 1.0), 3)
        meta["public"] = rng.random() < 0.5
        if rng.random() < 0.6:
            meta["region"] = REGIONS[rng.randrange(len(REGIONS))]
        meta["rank"] = i
        out.append(Document(text=d.text, id=d.id, metadata=meta))
    return out


def _leaf(rng: random.Random) -> dict[str, Any]:
    field = rng.choice(["tenant", "year", "score", "public", "region", "rank", "missing_field"])
    if field in ("tenant", "region", "missing_field"):
        pool = TENANTS if field != "region" else REGIONS
        op = rng.choice(["bare", "$eq", "$ne", "$in", "$nin"])
        if op in ("$in", "$nin"):
            return {field: {op: rng.sample(list(pool), rng.randint(1, 3))}}
        value = rng.choice(pool)
        return {field: value} if op == "bare" else {field: {op: value}}
    if field == "public":
        op = rng.choice(["bare", "$eq", "$ne"])
        value = rng.random() < 0.5
        return {field: value} if op == "bare" else {field: {op: value}}
    op = rng.choice(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"])
    if field == "score":
        value: Any = round(rng.uniform(0.0, 1.0), 2)
    elif field == "year":
        value = rng.randint(2014, 2025)
    else:
        value = rng.randint(0, 40)
    if op in ("$in", "$nin"):
        if field == "score":
            return {field: {op: [round(rng.uniform(0, 1), 3) for _ in range(3)]}}
        lo = value
        return {field: {op: [lo + d for d in rng.sample(range(6), 3)]}}
    if op in ("$gt", "$gte", "$lt", "$lte") and rng.random() < 0.3:
        value = float(value)  # an int field compared with a float
    return {field: {op: value}}


def random_where(rng: random.Random, depth: int = 2) -> dict[str, Any]:
    """A random Chroma ``where`` filter: a leaf, or $and / $or of 2-3 sub-filters."""
    if depth == 0 or rng.random() < 0.45:
        return _leaf(rng)
    op = rng.choice(["$and", "$or"])
    return {op: [random_where(rng, depth - 1) for _ in range(rng.randint(2, 3))]}
