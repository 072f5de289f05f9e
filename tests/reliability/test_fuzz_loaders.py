"""Every loader survives 10,000 mutated inputs: rejected with ValueError or usable, never a crash or hang.

Each loader runs in its own subprocess (``python -m tests.reliability.fuzzing LOADER``), so a
segmentation fault in native code or an endless loop fails this test with a message instead
of taking pytest down. The mutations are seeded: a failure reproduces with the command shown.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.persist import array_from_bytes, array_to_bytes
from tests.reliability.fuzzing import LOADERS

INPUTS = 10_000
TIMEOUT_S = 300  # a hang, not slowness: each loader needs a few seconds
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_loader_survives_mutated_inputs(loader: str) -> None:
    command = [sys.executable, "-m", "tests.reliability.fuzzing", loader, "--inputs", str(INPUTS)]
    shown = " ".join(command[1:])
    try:
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {loader} fuzzer hung (no result in {TIMEOUT_S} s); reproduce with: python {shown}")
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        pytest.fail(f"the {loader} loader crashed the process ({name}); reproduce with: python {shown}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["inputs"] == INPUTS
    assert summary["unexpected"] == 0, json.dumps(summary["failures"], indent=1)
    assert summary["rejected"] + summary["accepted"] == INPUTS
    assert summary["rejected"] >= INPUTS // 4, "the mutations reach the loader's checks"


# --------------------------------------------------------------------------- inputs the fuzzer found


def test_npy_header_damage_is_a_value_error_without_allocation() -> None:
    good = array_to_bytes(np.ones((3, 4), np.float32))
    unterminated = good.replace(b"}", b" ", 1)  # numpy's header parser raised tokenize.TokenError
    with pytest.raises(ValueError, match=r"malformed \.npy array"):
        array_from_bytes(unterminated)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (2**40,)})
    with pytest.raises(ValueError, match="truncated"):  # was a 4 TiB allocation attempt
        array_from_bytes(header.getvalue() + b"\x00" * 16)


def test_splade_matrix_with_a_bad_index_pointer_is_refused() -> None:
    from scipy import sparse

    from core.strategies.umg.sparse import SpladeExpert

    expert = SpladeExpert.__new__(SpladeExpert)
    expert.matrix = sparse.csr_matrix(np.eye(4, 6, dtype=np.float32))
    files = expert.to_files()
    files["indptr.npy"] = array_to_bytes(np.array([0, 1, 2, 3, 0], dtype=np.int64))  # scipy crashed on it
    loaded = SpladeExpert.__new__(SpladeExpert)
    with pytest.raises(ValueError, match="indptr must be non-decreasing"):
        loaded.load_files(files)
    files["indptr.npy"] = array_to_bytes(np.array([0, 1, 2, 3, 4], dtype=np.int64))
    files["shape.json"] = b"[4, 1e30]"
    with pytest.raises(ValueError, match="shape must be two non-negative ints"):
        loaded.load_files(files)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("vocab.index.json", b'{"comet": 999}', "vocabulary must map tokens"),
        ("params.index.json", b"[]", "parameters must be a JSON object"),
        ("params.index.json", b'{"num_docs": 3, "backend": "numba"}', "backend must be one of"),
        ("params.index.json", b'{"num_docs": 3, "k1": [1]}', "k1 must be a finite number"),
        ("params.index.json", b'{"num_docs": 3, "surprise": 1}', "unknown parameters"),
        ("params.index.json", b'{"num_docs": 1}', "column indices must lie in"),
    ],
)
def test_bm25_files_are_validated(name: str, content: bytes, message: str) -> None:
    from core.strategies.umg.sparse import BM25Expert

    expert = BM25Expert()
    expert.index(["the comet of varga", "a lens for the observatory", "comet tails"])
    files = expert.to_files()
    assert BM25Expert.from_files(files).search("comet", 3)[0].tolist() == [0, 2]
    with pytest.raises(ValueError, match=message):
        BM25Expert.from_files({**files, name: content})
