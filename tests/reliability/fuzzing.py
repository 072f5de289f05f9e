"""Mutation fuzzing of every loader, run in a subprocess so a crash or a hang is caught, not fatal.

Each :class:`Loader` takes valid serialised samples, mutates them (bit flips, interesting
integers over length fields, truncation, insertion, deletion, splicing, and for JSON
structural edits of the parsed value), and feeds them to the loader. A loader may reject an
input only with ``ValueError`` (clear message, as documented); an input it accepts must give
a structure that works (queries run, results stay in range). Binary formats with a trailing
checksum are re-signed for half the inputs, so the structural checks behind the checksum
are exercised too.

Run ``python -m tests.reliability.fuzzing LOADER [--inputs N] [--seed S]``; it prints one JSON
line with the counts and the first unexpected failures. The pytest side
(``test_fuzz_loaders.py``) runs every loader with 10,000 inputs and a timeout. The mutations
are seeded, so a failure reproduces exactly. (Hypothesis would spend about a millisecond per
example in its own engine; 10,000 inputs per loader this way cost about a second each.)
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Blob = bytes
Files = dict[str, bytes]
Sample = Blob | Files

FILTER_CHECKSUM_SEED = 0x43554B4F4F2D3031
FOREST_CHECKSUM_SEED = 0x464F524553543031
GRAPH_CHECKSUM_SEED = 0x4B47524150483031  # "KGRAPH01", csrc/include/bridge/graph.hpp
_INTERESTING = (
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    255,
    256,
    0x7FFF,
    0xFFFF,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFF,
    2**63,
    2**64 - 1,
)
_JSON_VALUES: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    1,
    2**31,
    2**63,
    10**30,
    1.5,
    -0.0,
    1e308,
    "",
    "x",
    "../escape",
    "/etc/passwd",
    "gen-000001",
    "a" * 300,
    [],
    [1, 2],
    [[[]]],
    {},
    {"a": 1},
)


# --------------------------------------------------------------------------- mutations


def _le(value: int, width: int) -> bytes:
    return (value % (1 << (8 * width))).to_bytes(width, "little")


def mutate_bytes(rng: random.Random, data: bytes, other: bytes) -> tuple[bytes, str]:
    """One to three random byte-level edits of ``data`` (``other`` is a splice donor)."""
    buf = bytearray(data)
    names = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        op = rng.randrange(9)
        pos = rng.randrange(len(buf)) if buf else 0
        if op == 0 and buf:
            buf[pos] ^= 1 << rng.randrange(8)
            names.append("bitflip")
        elif op == 1 and buf:
            buf[pos] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
            names.append("byte")
        elif op == 2 and len(buf) >= 4:
            width = rng.choice((2, 4, 8))
            pos = rng.randrange(max(1, len(buf) - width + 1))
            buf[pos : pos + width] = _le(rng.choice(_INTERESTING), width)[: len(buf) - pos]
            names.append(f"int{8 * width}")
        elif op == 3:
            del buf[rng.randrange(len(buf) + 1) :]
            names.append("truncate")
        elif op == 4:
            buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
            names.append("insert")
        elif op == 5 and buf:
            del buf[pos : pos + rng.randint(1, 16)]
            names.append("delete")
        elif op == 6 and buf:
            end = min(len(buf), pos + rng.randint(1, 32))
            buf[pos:pos] = buf[pos:end]
            names.append("duplicate")
        elif op == 7 and other:
            cut = rng.randrange(len(other) + 1)
            buf = buf[:pos] + bytearray(other[cut:])
            names.append("splice")
        else:
            buf += bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            names.append("append")
    return bytes(buf), "+".join(names)


def _mutate_value(rng: random.Random, value: Any, depth: int = 0) -> Any:
    """Replaces one random node of a parsed JSON value."""
    if isinstance(value, dict) and value and depth < 6 and rng.random() < 0.8:
        key = rng.choice(sorted(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.1:
            del out[key]
        elif roll < 0.2:
            out[rng.choice(("../x", "/abs", "", "extra", key + "_"))] = out[key]
        else:
            out[key] = _mutate_value(rng, value[key], depth + 1)
        return out
    if isinstance(value, list) and value and depth < 6 and rng.random() < 0.8:
        out_list = list(value)
        i = rng.randrange(len(out_list))
        roll = rng.random()
        if roll < 0.15:
            del out_list[i]
        elif roll < 0.25:
            out_list.append(out_list[i])
        else:
            out_list[i] = _mutate_value(rng, out_list[i], depth + 1)
        return out_list
    if isinstance(value, bool | int | float) and not isinstance(value, bool) and rng.random() < 0.5:
        return rng.choice((value + 1, value - 1, -value, value * 1000, 2**32 + value))
    return rng.choice(_JSON_VALUES)


def mutate_json(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A structural edit of JSON ``data`` (parsed, one node replaced, serialised again)."""
    try:
        value = json.loads(data)
    except ValueError:
        return data, "json-unparsable"
    return json.dumps(_mutate_value(rng, value)).encode(), "json-node"


# --------------------------------------------------------------------------- loaders


@dataclass(frozen=True)
class Loader:
    """A loader under fuzz.

    Attributes:
        name: Loader name (the command-line argument).
        samples: Builds the valid inputs to mutate.
        load: Loads one (mutated) input; must raise ``ValueError`` to reject it.
        check: Exercises what an accepted input loaded into; must not raise.
        resign: Recomputes a trailing checksum (binary formats), or None.
        json_files: Names of inputs (or ``""`` for a single blob) that hold JSON.
    """

    name: str
    samples: Callable[[], list[Sample]]
    load: Callable[[Sample], Any]
    check: Callable[[Any], None]
    resign: Callable[[bytes], bytes] | None = None
    json_files: frozenset[str] = frozenset()


def _resigner(seed: int) -> Callable[[bytes], bytes]:
    def resign(data: bytes) -> bytes:
        from core import _native

        body = data[:-8] if len(data) >= 8 else data
        return body + _native.hash_bytes(body, seed).to_bytes(8, "little")

    return resign


# ---- cuckoo filter


def _filter_samples() -> list[Sample]:
    from core import CuckooFilter

    out: list[Sample] = [CuckooFilter().to_bytes()]
    for bits, n in ((12, 40), (8, 25), (16, 60)):
        f = CuckooFilter(fingerprint_bits=bits, capacity=16)
        for i in range(n):
            f.insert(f"entity {i}", list(range(i % 4 + 1)))
        f.lookup("entity 3")
        out.append(f.to_bytes())
    return out


def _filter_load(data: Sample) -> Any:
    from core import CuckooFilter

    assert isinstance(data, bytes)
    return CuckooFilter.from_bytes(data)


def _filter_check(f: Any) -> None:
    for e in f.entries():
        assert e[2] == sorted(set(e[2])), "an entry's ids are sorted and unique"
    offsets, ids = f.lookup_many([f"entity {i}" for i in range(70)], touch=False)
    assert len(offsets) == 71
    assert offsets[-1] == len(ids)
    f.insert("fresh entity", [1, 2])
    assert f.lookup("fresh entity", touch=False) == [1, 2]
    f.reorder()
    type(f).from_bytes(f.to_bytes())


# ---- abstract forest


def _forest_samples() -> list[Sample]:
    from core import AbstractForest

    out: list[Sample] = [AbstractForest().to_bytes()]
    rng = random.Random(5)
    for n_leaves in (6, 30):
        f = AbstractForest()
        begins = []
        chunk = 0
        for _ in range(n_leaves):
            size = rng.randint(0, 5)
            begins.append((chunk, chunk + size))
            chunk += size
        f.add_nodes([0] * n_leaves, [b for b, _ in begins], [e for _, e in begins], [-1] * n_leaves)
        level_nodes, level = list(range(n_leaves)), 0
        while len(level_nodes) > 1:
            level += 1
            groups = [level_nodes[i : i + 3] for i in range(0, len(level_nodes), 3)]
            first = f.add_nodes(
                [level] * len(groups), [0] * len(groups), [0] * len(groups), [-1] * len(groups)
            )
            f.set_parents(
                [c for g in groups for c in g], [first + j for j, g in enumerate(groups) for _ in g]
            )
            level_nodes = list(range(first, first + len(groups)))
        out.append(f.to_bytes())
    return out


def _forest_load(data: Sample) -> Any:
    from core import AbstractForest

    assert isinstance(data, bytes)
    return AbstractForest.from_bytes(data)


def _forest_check(f: Any) -> None:
    n = len(f)
    if not n:
        return
    nodes, hops = f.expand(list(range(n)), 3)
    assert nodes.size == 0 or int(nodes.min()) >= 0
    assert nodes.size == 0 or int(nodes.max()) < n
    assert len(hops) == len(nodes)
    arrays = f.arrays()
    owned = int((arrays["chunk_end"].astype(np.int64) - arrays["chunk_begin"]).clip(min=0).sum())
    if owned < 1_000_000:  # a re-signed mutation may declare billions of chunks: valid, just big
        assert f.chunk_ids(list(range(n))).size <= owned
    for v in range(min(n, 20)):
        f.parent(v), f.level(v), f.children(v)


# ---- BubbleRAG's knowledge graph (core.native.graph.Graph)


def _graph_samples() -> list[Sample]:
    from core.native.graph import Graph

    rng = random.Random(11)
    out: list[Sample] = [Graph(0, [], []).to_bytes(), Graph(1, [0], [0]).to_bytes()]
    for nodes, edges in ((6, 8), (40, 90)):
        heads = [rng.randrange(nodes) for _ in range(edges)]
        tails = [rng.randrange(nodes) for _ in range(edges)]
        out.append(Graph(nodes, heads, tails).to_bytes())
    return out


def _graph_load(data: Sample) -> Any:
    from core.native.graph import Graph

    assert isinstance(data, bytes)
    return Graph.from_bytes(data)


def _graph_check(g: Any) -> None:
    n = g.num_nodes
    if not n:
        return
    seeds = list(range(min(n, 50)))
    reached = g.localize(seeds, 2, max_nodes=10_000)
    assert reached.size == 0 or (int(reached.min()) >= 0 and int(reached.max()) < n)
    for v in seeds[:10]:
        neighbours, edges = g.neighbors(v)
        assert len(neighbours) == len(edges)
        assert all(0 <= int(e) < g.num_edges for e in edges)
    type(g).from_bytes(g.to_bytes())


# ---- the vector index (core.vector_index.VectorIndex: Bridge-RAG's dense pool, BubbleRAG's anchors)

_VECTOR_DIM, _VECTOR_ROWS = 8, 300


def _vector_matrix() -> npt.NDArray[np.float32]:
    rng = np.random.default_rng(4)
    m = rng.normal(size=(_VECTOR_ROWS, _VECTOR_DIM)).astype(np.float32)
    return np.ascontiguousarray(m / np.linalg.norm(m, axis=1, keepdims=True))


def _vector_samples() -> list[Sample]:
    from core.vector_index import HnswSettings, VectorIndex

    m = _vector_matrix()
    small = HnswSettings(m=4, ef_construction=16)
    return [
        VectorIndex.build(m, np.arange(0, _VECTOR_ROWS, 2), exact_below=1000).to_files("v."),
        VectorIndex.build(m, exact_below=10, settings=small).to_files("v."),
        VectorIndex.build(m, np.arange(40), exact_below=10, settings=small).to_files("v."),
        VectorIndex.build(
            m, exact_below=10, settings=HnswSettings(m=4, ef_construction=16, shard_rows=120)
        ).to_files("v."),
    ]


def _vector_load(files: Sample) -> Any:
    import hashlib

    from core.vector_index import ENGINE_FILE, HEADER_FILE, VectorIndex

    assert isinstance(files, dict)
    blob = files.get(f"v.{ENGINE_FILE}")
    if blob is not None and len(blob) % 2 == 0:  # about half: a valid digest, so the walk is what checks
        try:
            header = json.loads(files[f"v.{HEADER_FILE}"])
        except (KeyError, ValueError):
            header = None
        if isinstance(header, dict):
            shards = header.get("shards")
            if isinstance(shards, list) and shards and isinstance(shards[0], dict):
                shards[0].update(bytes=len(blob), sha256=hashlib.sha256(blob).hexdigest())
            files = {**files, f"v.{HEADER_FILE}": json.dumps(header).encode()}
    return VectorIndex.from_files(files, _vector_matrix(), "v.")


def _vector_check(index: Any) -> None:
    from core.vector_index import VectorIndex

    m = _vector_matrix()
    allowed = np.zeros(_VECTOR_ROWS, dtype=bool)
    allowed[::3] = True
    for mask in (None, allowed):
        ids, scores = index.search(m[:3], m, 4, allowed=mask)
        assert ids.shape == scores.shape == (3, 4)
        assert all(-1 <= int(i) < _VECTOR_ROWS for i in ids.ravel())
        assert mask is None or all(mask[i] for i in ids.ravel() if i >= 0)
    VectorIndex.from_files(index.to_files("v."), m, "v.")


# ---- sparse indexes


def _bm25_samples() -> list[Sample]:
    from core.strategies.umg.sparse import BM25Expert

    out: list[Sample] = []
    for n in (1, 12, 40):
        e = BM25Expert()
        e.index([f"passage {i} about the marrowick comet and varga {i % 5} observatory" for i in range(n)])
        out.append(e.to_files())
    return out


def _bm25_load(files: Sample) -> Any:
    from core.strategies.umg.sparse import BM25Expert

    assert isinstance(files, dict)
    return BM25Expert.from_files(files)


def _bm25_check(expert: Any) -> None:
    for query in ("marrowick comet", "passage 3", "nothing matches this"):
        ids, scores = expert.search(query, 5)
        assert len(ids) == len(scores) <= 5
        assert all(0 <= int(i) < expert.size for i in ids)


def _splade_samples() -> list[Sample]:
    from scipy import sparse

    from core.strategies.umg.sparse import SpladeExpert

    out: list[Sample] = []
    rng = np.random.default_rng(3)
    for rows, cols in ((1, 30), (6, 50), (20, 120)):
        dense = rng.random((rows, cols)).astype(np.float32)
        dense[dense < 0.8] = 0
        expert = SpladeExpert.__new__(SpladeExpert)  # the loader needs no model
        expert.matrix = sparse.csr_matrix(dense)
        out.append(expert.to_files())
    return out


def _splade_load(files: Sample) -> Any:
    from core.strategies.umg.sparse import SpladeExpert

    assert isinstance(files, dict)
    expert = SpladeExpert.__new__(SpladeExpert)
    expert.load_files(files)
    return expert


def _splade_check(expert: Any) -> None:
    m = expert.matrix
    rows, cols = m.shape
    assert min(rows, cols) >= 0
    if rows * cols and cols < 10_000_000:
        q = np.ones((1, cols), dtype=np.float32)
        scores = (m @ q.T).ravel()
        assert scores.shape == (rows,)


# ---- index directory manifest (and CURRENT)


class _ManifestDir:
    """A scratch index directory whose manifest and CURRENT are overwritten per input."""

    def __init__(self) -> None:
        from core.persist import json_to_bytes, save_index

        shm = Path("/dev/shm")  # a memory file system makes the 20,000 small writes cheap
        scratch = tempfile.mkdtemp(prefix="fuzz-manifest-", dir=shm if shm.is_dir() else None)
        self.root = Path(scratch) / "idx"
        files = {"a.bin": b"alpha" * 40, "b.json": json_to_bytes({"n": [1, 2, 3]})}
        self.generation = save_index(self.root, files, {"n": 1, "store": {"kind": "x"}}, kind="fz", version=1)
        self.files = {"manifest.json": (self.generation / "manifest.json").read_bytes()}
        self.files["CURRENT"] = (self.root / "CURRENT").read_bytes()
        self._written = dict(self.files)

    def load(self, files: Sample) -> Any:
        from core.persist import load_index

        assert isinstance(files, dict)
        for name, path in (
            ("manifest.json", self.generation / "manifest.json"),
            ("CURRENT", self.root / "CURRENT"),
        ):
            if files[name] != self._written[name]:
                path.write_bytes(files[name])
                self._written[name] = files[name]
        return load_index(self.root, kind="fz", version=1)

    def close(self) -> None:
        shutil.rmtree(self.root.parent, ignore_errors=True)


_manifest_dir: _ManifestDir | None = None


def _manifest() -> _ManifestDir:
    global _manifest_dir
    if _manifest_dir is None:
        _manifest_dir = _ManifestDir()
    return _manifest_dir


def _manifest_check(result: Any) -> None:
    meta, files = result
    assert isinstance(meta, dict)
    for name, data in files.items():
        assert "/" not in name
        assert name not in {"", ".", ".."}
        assert isinstance(data, bytes)


# ---- the array and JSON byte helpers every strategy's restore uses


def _npy_samples() -> list[Sample]:
    from core.persist import array_to_bytes

    return [
        array_to_bytes(np.arange(24, dtype=np.float32).reshape(6, 4)),
        array_to_bytes(np.zeros((0, 8), dtype=np.float32)),
        array_to_bytes(np.ones((3, 384), dtype=np.float32)),
    ]


def _npy_load(data: Sample) -> Any:
    from core.persist import array_from_bytes

    assert isinstance(data, bytes)
    return array_from_bytes(data, dtype=np.float32, ndim=2)


def _npy_check(a: Any) -> None:
    assert a.dtype == np.float32
    assert a.ndim == 2
    assert a.flags.writeable
    float(a.sum()) if a.size < 10_000_000 else None


def _json_samples() -> list[Sample]:
    from core.persist import json_to_bytes

    return [
        json_to_bytes({"ids": ["a::0", "a::1"], "doc_ids": ["a", "a"], "alive": [1, 1], "abstract": [0, 0]}),
        json_to_bytes({"level": [0, 1], "summary": ["s", ""], "entities": [["x"], []], "alive": [1, 0]}),
    ]


def _json_load(data: Sample) -> Any:
    from core.persist import json_from_bytes

    assert isinstance(data, bytes)
    return json_from_bytes(data)


LOADERS: dict[str, Loader] = {
    loader.name: loader
    for loader in (
        Loader("filter", _filter_samples, _filter_load, _filter_check, _resigner(FILTER_CHECKSUM_SEED)),
        Loader("forest", _forest_samples, _forest_load, _forest_check, _resigner(FOREST_CHECKSUM_SEED)),
        Loader("graph", _graph_samples, _graph_load, _graph_check, _resigner(GRAPH_CHECKSUM_SEED)),
        Loader(
            "vector_index",
            _vector_samples,
            _vector_load,
            _vector_check,
            json_files=frozenset({"v.vector_index.json"}),
        ),
        Loader(
            "bm25",
            _bm25_samples,
            _bm25_load,
            _bm25_check,
            json_files=frozenset({"params.index.json", "vocab.index.json"}),
        ),
        Loader("splade", _splade_samples, _splade_load, _splade_check, json_files=frozenset({"shape.json"})),
        Loader(
            "manifest",
            lambda: [_manifest().files],
            lambda files: _manifest().load(files),
            _manifest_check,
            json_files=frozenset({"manifest.json"}),
        ),
        Loader("npy", _npy_samples, _npy_load, _npy_check),
        Loader("json", _json_samples, _json_load, lambda value: None, json_files=frozenset({""})),
    )
}


# --------------------------------------------------------------------------- the run


def _mutate(loader: Loader, rng: random.Random, samples: list[Sample]) -> tuple[Sample, str]:
    sample = rng.choice(samples)
    donor = rng.choice(samples)
    if isinstance(sample, bytes):
        assert isinstance(donor, bytes)
        return _mutate_blob(loader, rng, "", sample, donor)
    assert isinstance(donor, dict)
    out = dict(sample)
    names = sorted(out)
    labels = []
    for name in rng.sample(names, k=1 if rng.random() < 0.85 else min(2, len(names))):
        out[name], label = _mutate_blob(loader, rng, name, out[name], donor.get(name, b""))
        labels.append(f"{name}:{label}")
    return out, ",".join(labels)


def _mutate_blob(
    loader: Loader, rng: random.Random, name: str, data: bytes, donor: bytes
) -> tuple[bytes, str]:
    if name in loader.json_files and rng.random() < 0.5:
        return mutate_json(rng, data)
    mutated, label = mutate_bytes(rng, data, donor)
    if loader.resign is not None and rng.random() < 0.5:
        return loader.resign(mutated), label + "+resigned"
    return mutated, label


def run(name: str, inputs: int, seed: int) -> dict[str, Any]:
    """Fuzzes one loader; returns the counts and the first unexpected failures."""
    loader = LOADERS[name]
    rng = random.Random(seed)
    samples = loader.samples()
    for sample in samples:  # the valid inputs load and work
        loader.check(loader.load(sample))
    counts = {"rejected": 0, "accepted": 0, "unexpected": 0}
    unexpected: list[dict[str, Any]] = []
    for i in range(inputs):
        data, label = _mutate(loader, rng, samples)
        try:
            result = loader.load(data)
        except ValueError:
            counts["rejected"] += 1
            continue
        except Exception as exc:
            counts["unexpected"] += 1
            if len(unexpected) < 5:
                unexpected.append({"input": i, "mutation": label, "stage": "load", "error": repr(exc)[:400]})
            continue
        counts["accepted"] += 1
        try:
            loader.check(result)
        except Exception as exc:
            counts["unexpected"] += 1
            if len(unexpected) < 5:
                unexpected.append({"input": i, "mutation": label, "stage": "check", "error": repr(exc)[:400]})
    if _manifest_dir is not None:
        _manifest_dir.close()
    return {"loader": name, "inputs": inputs, "seed": seed, **counts, "failures": unexpected}


def main(argv: list[str] | None = None) -> int:
    """Command line: fuzz one loader and print the JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("loader", choices=sorted(LOADERS))
    parser.add_argument("--inputs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-memory-gb", type=float, default=4.0, help="address-space limit")
    args = parser.parse_args(argv)
    limit = int(args.max_memory_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))  # a runaway allocation fails, not the machine
    warnings.simplefilter("ignore")  # e.g. the CURRENT fallback warning; only exceptions count
    print(json.dumps(run(args.loader, args.inputs, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
