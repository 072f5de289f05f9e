from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

import core.persist
import core.store
from core import persist as index_dir
from core.persist import (
    CorruptIndexError,
    array_from_bytes,
    array_to_bytes,
    json_from_bytes,
    json_to_bytes,
    load_index,
    save_index,
)

KIND = "test"


def _save(root: Path, n: int = 1, **files: bytes) -> Path:
    payload = files or {"a.bin": b"alpha" * 100, "b.json": json_to_bytes({"n": n})}
    return save_index(root, payload, {"n": n}, kind=KIND, version=1)


def _gens(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("gen-"))


# ------------------------------------------------------------------ round trip and layout


def test_round_trip_and_layout(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    files = {"a.bin": os.urandom(1000), "empty": b"", "m.npy": array_to_bytes(np.eye(3))}
    gen = save_index(root, files, {"k": [1, "x"], "nested": {"y": None}}, kind=KIND, version=3)
    assert gen == root / "gen-000001"
    assert (root / "CURRENT").read_text() == "gen-000001\n"
    meta, loaded = load_index(root, kind=KIND, version=3)
    assert meta == {"k": [1, "x"], "nested": {"y": None}}
    assert loaded == files

    manifest = json.loads((gen / "manifest.json").read_text())
    assert manifest["format"] == "bridge-rag-index"
    assert (manifest["kind"], manifest["version"]) == (KIND, 3)
    assert datetime.fromisoformat(manifest["created"]).utcoffset() is not None
    assert manifest["files"]["a.bin"] == {"sha256": hashlib.sha256(files["a.bin"]).hexdigest(), "bytes": 1000}


def test_keeps_the_two_newest_generations(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    for n in range(1, 5):
        _save(root, n)
    assert _gens(root) == ["gen-000003", "gen-000004"]
    assert load_index(root, kind=KIND, version=1)[0] == {"n": 4}
    assert sorted(p.name for p in root.iterdir()) == ["CURRENT", "gen-000003", "gen-000004"]


def test_save_cleans_up_debris_of_crashed_saves(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    _save(root, 1)
    (root / "gen-000002.tmp-abcdef").mkdir()
    (root / "gen-000002.tmp-abcdef" / "half").write_bytes(b"x")
    (root / ".CURRENT.tmp-1-abcd").write_bytes(b"gen-0000")
    _save(root, 2)
    assert sorted(p.name for p in root.iterdir()) == ["CURRENT", "gen-000001", "gen-000002"]


def test_a_failed_save_leaves_the_previous_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "idx"
    _save(root, 1)
    calls = 0
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError("disk full")
        real_fsync(fd)

    monkeypatch.setattr(index_dir.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        _save(root, 2)
    monkeypatch.undo()
    assert _gens(root) == ["gen-000001"], "the temporary directory was removed"
    assert load_index(root, kind=KIND, version=1)[0] == {"n": 1}


# ------------------------------------------------------------------ save validation


@pytest.mark.parametrize("name", ["a/b", "..", ".", "", "/etc/passwd", "..\\x", "manifest.json", "a\x00b"])
def test_save_rejects_unsafe_file_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="invalid index file name"):
        save_index(tmp_path / "idx", {name: b"x"}, {}, kind=KIND, version=1)
    assert not (tmp_path / "idx").exists(), "nothing was written"


def test_save_rejects_bad_inputs(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    with pytest.raises(TypeError, match="must be bytes"):
        save_index(root, {"a": "text"}, {}, kind=KIND, version=1)  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        save_index(root, {}, {"x": object()}, kind=KIND, version=1)
    with pytest.raises(ValueError, match="Out of range float"):
        save_index(root, {}, {"x": float("nan")}, kind=KIND, version=1)
    with pytest.raises(ValueError, match="kind"):
        save_index(root, {}, {}, kind="", version=1)
    with pytest.raises(TypeError, match="version"):
        save_index(root, {}, {}, kind=KIND, version="1")  # type: ignore[arg-type]
    assert not root.exists()


# ------------------------------------------------------------------ load validation


def test_corrupted_byte_names_the_file(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    gen = _save(root)
    data = bytearray((gen / "a.bin").read_bytes())
    data[123] ^= 0x01
    (gen / "a.bin").write_bytes(bytes(data))
    with pytest.raises(CorruptIndexError, match=r"'a\.bin'.*truncated or corrupted"):
        load_index(root, kind=KIND, version=1)


def test_truncated_file(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    gen = _save(root)
    with open(gen / "b.json", "r+b") as fh:
        fh.truncate(3)
    with pytest.raises(ValueError, match=r"'b\.json'.*truncated or corrupted"):
        load_index(root, kind=KIND, version=1)


def test_missing_file(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    gen = _save(root)
    (gen / "a.bin").unlink()
    with pytest.raises(ValueError, match=r"'a\.bin'.*missing"):
        load_index(root, kind=KIND, version=1)


def test_corrupted_manifest(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    gen = _save(root)
    (gen / "manifest.json").write_bytes(b'{"format": "bridge-rag-in')
    with pytest.raises(ValueError, match=r"manifest\.json is truncated or corrupted"):
        load_index(root, kind=KIND, version=1)
    (gen / "manifest.json").write_bytes(b'["a list"]')
    with pytest.raises(ValueError, match="not a bridge-rag index"):
        load_index(root, kind=KIND, version=1)


def test_wrong_kind(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    _save(root)
    with pytest.raises(ValueError, match="this directory holds a test index, not bridge"):
        load_index(root, kind="bridge", version=1)


def test_wrong_version(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    _save(root)
    with pytest.raises(
        ValueError,
        match=r"index format version 1 is not supported by this bridge-rag "
        r"\(reads version 2\); rebuild the index",
    ):
        load_index(root, kind=KIND, version=2)


def test_missing_directory_says_how_to_build_one(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="build an index"):
        load_index(tmp_path / "nowhere", kind=KIND, version=1)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no saved index"):
        load_index(tmp_path / "empty", kind=KIND, version=1)


def test_current_naming_a_missing_generation_falls_back_with_a_warning(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    _save(root, 1)
    _save(root, 2)
    (root / "CURRENT").write_text("gen-000009\n")
    with pytest.warns(RuntimeWarning, match="gen-000009, which is missing"):
        meta, _ = load_index(root, kind=KIND, version=1)
    assert meta == {"n": 2}


def test_missing_current_uses_the_newest_complete_generation(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    _save(root, 1)
    _save(root, 2)
    (root / "CURRENT").unlink()
    (root / "gen-000003").mkdir()  # renamed by hand, never completed: no manifest
    assert load_index(root, kind=KIND, version=1)[0] == {"n": 2}
    (root / "gen-000002" / "a.bin").write_bytes(b"damaged")
    assert load_index(root, kind=KIND, version=1)[0] == {"n": 1}
    (root / "gen-000001" / "a.bin").unlink()
    with pytest.raises(CorruptIndexError):
        load_index(root, kind=KIND, version=1)


def test_garbage_current_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    _save(root, 1)
    (root / "CURRENT").write_text("../../etc\n")
    assert load_index(root, kind=KIND, version=1)[0] == {"n": 1}


@pytest.mark.parametrize("name", ["../escape", "/tmp/escape", "sub/../../escape"])
def test_manifest_naming_a_path_outside_is_rejected(tmp_path: Path, name: str) -> None:
    root = tmp_path / "idx"
    gen = _save(root)
    outside = tmp_path / "escape"
    outside.write_bytes(b"secret")
    manifest = json.loads((gen / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": hashlib.sha256(b"secret").hexdigest(), "bytes": 6}
    (gen / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="invalid index file name"):
        load_index(root, kind=KIND, version=1)


def test_symlink_pointing_outside_is_rejected(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    gen = _save(root)
    outside = tmp_path / "outside.bin"
    outside.write_bytes((gen / "a.bin").read_bytes())
    (gen / "a.bin").unlink()
    (gen / "a.bin").symlink_to(outside)
    with pytest.raises(ValueError, match="points outside"):
        load_index(root, kind=KIND, version=1)


def test_symlinked_generation_pointing_outside_is_rejected(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    gen = _save(root)
    elsewhere = tmp_path / "elsewhere"
    gen.rename(elsewhere)
    gen.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ValueError, match="outside the index directory"):
        load_index(root, kind=KIND, version=1)


# ------------------------------------------------------------------ crash safety

_WRITER = textwrap.dedent(
    """
    import sys
    from core.persist import json_to_bytes, save_index

    root, start, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    i = start
    while True:
        big = i.to_bytes(8, "little") * (size // 8)
        save_index(root, {"big.bin": big, "small.json": json_to_bytes({"i": i})}, {"i": i},
                   kind="crash", version=1)
        print(i, flush=True)
        i += 1
    """
)


def _check_generation(root: Path, size: int) -> int:
    meta, files = load_index(root, kind="crash", version=1)
    i = meta["i"]
    assert json_from_bytes(files["small.json"]) == {"i": i}
    assert files["big.bin"] == i.to_bytes(8, "little") * (size // 8)
    return int(i)


@pytest.mark.slow
def test_sigkill_during_saves_always_leaves_a_loadable_generation(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    size = 20 * 1024 * 1024
    rng = random.Random(1234)
    last = -1
    for round_ in range(5):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(root), str(round_ * 1000), str(size)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            if round_ == 0:
                assert proc.stdout is not None
                assert proc.stdout.readline().strip() == "0", "the first save completed"
            time.sleep(rng.uniform(0.05, 1.2))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL
        i = _check_generation(root, size)
        assert i >= last, "never an older generation than one already seen"
        last = i
    # The next clean save tidies up whatever the crashes left behind.
    save_index(root, {"big.bin": b""}, {"i": -1}, kind="crash", version=1)
    assert len(_gens(root)) == 2
    assert not [p for p in root.iterdir() if ".tmp-" in p.name]


# ------------------------------------------------------------------ byte helpers


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.array([], dtype=np.int64),
        np.array([[True, False]]),
        np.array(["ab", "c"]),
        np.asfortranarray(np.ones((2, 3))),
        np.array(3.5),
    ],
)
def test_array_round_trip(array: np.ndarray) -> None:
    back = array_from_bytes(array_to_bytes(array), dtype=array.dtype, ndim=array.ndim)
    np.testing.assert_array_equal(back, array)
    assert back.flags.writeable


def test_array_helpers_reject_pickle_and_garbage() -> None:
    with pytest.raises(ValueError, match="pickle"):
        array_to_bytes(np.array([{"a": 1}], dtype=object))
    with pytest.raises(TypeError):
        array_to_bytes([1, 2])  # type: ignore[arg-type]
    buffer = io.BytesIO()
    np.save(buffer, np.array([1, "x", None], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="malformed"):
        array_from_bytes(buffer.getvalue())
    good = array_to_bytes(np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match="malformed"):
        array_from_bytes(good[:-5])
    with pytest.raises(ValueError, match="trailing"):
        array_from_bytes(good + b"\x00")
    with pytest.raises(ValueError, match="magic"):
        array_from_bytes(b"PK\x03\x04 not an npz either")
    with pytest.raises(ValueError, match="magic"):
        array_from_bytes(b"")
    with pytest.raises(ValueError, match="dtype float64"):
        array_from_bytes(good, dtype=np.float64)
    with pytest.raises(ValueError, match="2-D"):
        array_from_bytes(array_to_bytes(np.ones(3)), ndim=2)


def test_json_helpers() -> None:
    assert json_to_bytes({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'.encode()
    assert json_from_bytes(json_to_bytes({"b": 1, "a": None})) == {"a": None, "b": 1}
    with pytest.raises(ValueError, match="Out of range float"):
        json_to_bytes({"x": float("inf")})
    for bad in (b"{", b"\xff\xfe", b"[NaN]", b'{"a": Infinity}', b""):
        with pytest.raises(ValueError, match="malformed JSON"):
            json_from_bytes(bad)


# ------------------------------------------------------------------ no code execution


@pytest.mark.parametrize("module", [core.persist, core.store])
def test_modules_never_pickle_or_eval(module: object) -> None:
    source = Path(str(getattr(module, "__file__", ""))).read_text()
    tree = ast.parse(source)
    forbidden_modules = {"pickle", "cPickle", "dill", "marshal", "shelve", "joblib", "cloudpickle"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not {a.name.split(".")[0] for a in node.names} & forbidden_modules
        if isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] not in forbidden_modules
        if isinstance(node, ast.Name):
            assert node.id not in {"eval", "exec", "compile", "__import__", "pickle"}
        if isinstance(node, ast.Attribute):
            assert node.attr not in {"loads_pickle", "Unpickler"}
        if isinstance(node, ast.keyword) and node.arg == "allow_pickle":
            assert isinstance(node.value, ast.Constant)
            assert node.value.value is False
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"load", "save", "read_array"}
        ):
            assert any(k.arg == "allow_pickle" for k in node.keywords), ast.unparse(node)
    assert "eval(" not in source
    assert "exec(" not in source


def test_a_damaged_dtype_naming_a_deprecated_alias_is_a_clear_error() -> None:
    from core.persist import array_from_bytes, array_to_bytes

    damaged = array_to_bytes(np.arange(3, dtype=np.int64)).replace(b"<i8", b"<a8")
    with pytest.raises(ValueError, match=r"malformed \.npy array"):
        array_from_bytes(damaged, dtype=np.int64, ndim=1)


# ====================================================================== memory-mapped loading


def test_large_arrays_are_mapped_and_small_files_read(tmp_path: Path) -> None:
    from core.persist import MAP_MIN_BYTES, IndexFiles, array_view

    big = np.arange(MAP_MIN_BYTES, dtype=np.float32).reshape(-1, 16)
    small = np.arange(10, dtype=np.int64)
    files = {"big.npy": array_to_bytes(big), "small.npy": array_to_bytes(small), "meta.json": b"{}"}
    save_index(tmp_path / "idx", files, {}, kind=KIND, version=1)
    _, loaded = load_index(tmp_path / "idx", kind=KIND, version=1)
    assert isinstance(loaded, IndexFiles)
    assert loaded.is_mapped("big.npy")
    assert not loaded.is_mapped("small.npy")
    assert not loaded.is_mapped("meta.json")
    view = array_view(loaded["big.npy"], dtype=np.float32, ndim=2)
    assert np.array_equal(view, big)
    assert not view.flags.writeable
    assert not view.flags.owndata
    assert np.array_equal(array_view(loaded["small.npy"]), small)
    assert loaded == files  # the same bytes either way
    _, copied = load_index(tmp_path / "idx", kind=KIND, version=1, memory_map=False)
    assert not any(copied.is_mapped(name) for name in copied)
    assert copied == files


def test_a_mapped_file_is_verified_and_its_replacement_detected(tmp_path: Path) -> None:
    from core.persist import MAP_MIN_BYTES

    big = np.ones(MAP_MIN_BYTES, dtype=np.float32)
    generation = save_index(tmp_path / "idx", {"big.npy": array_to_bytes(big)}, {}, kind=KIND, version=1)
    _, loaded = load_index(tmp_path / "idx", kind=KIND, version=1)
    fd = loaded.open_verified("big.npy")
    os.close(fd)
    target = generation / "big.npy"
    damaged = bytearray(target.read_bytes())
    damaged[-1] ^= 1
    replacement = generation / "other"
    replacement.write_bytes(bytes(damaged))
    os.replace(replacement, target)  # a new file under the verified name
    with pytest.raises(CorruptIndexError, match="replaced after it was verified"):
        loaded.open_verified("big.npy")
    assert float(np.frombuffer(loaded["big.npy"], dtype=np.float32)[-1]) == 1.0  # the map keeps the old file
    with pytest.raises(CorruptIndexError, match=r"big\.npy"):
        load_index(tmp_path / "idx", kind=KIND, version=1)


def test_array_view_rejects_what_array_from_bytes_rejects() -> None:
    from core.persist import array_view

    good = array_to_bytes(np.arange(6, dtype=np.int32))
    for bad in (good[:-2], good + b"\x00", b"not an array", b""):
        with pytest.raises(ValueError, match=r"\.npy"):
            array_view(bad)
    with pytest.raises(ValueError, match="dtype"):
        array_view(good, dtype=np.int64)


@pytest.mark.parametrize("hard_links", [True, False])
def test_an_exclusive_write_creates_a_file_only_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hard_links: bool
) -> None:
    if not hard_links:  # a file system without them: a check, then a rename

        def no_links(*_: object) -> None:
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr(os, "link", no_links)
    target = tmp_path / "record.json"
    index_dir.atomic_write_bytes(target, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        index_dir.atomic_write_bytes(target, b"second", exclusive=True)
    assert target.read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]  # no temporary file left
    index_dir.atomic_write_bytes(target, b"third")
    assert target.read_bytes() == b"third"
