"""Crash safety of every strategy's index directory.

- A writer process saving the index over and over is killed with SIGKILL at random moments
  (during its start, its first save or any later one): the directory always loads, and what
  loads is one complete state the writer saved, never a mix.
- Truncating or flipping one bit of any file of a saved index (the manifest included) gives a
  clear error naming the file; putting the file back makes the index load again.
- A damaged file whose checksum in the manifest is updated to match (so the per-file parsers,
  not the checksum, must catch it) is rejected with ``ValueError`` or loads into an index
  that still answers queries: never another exception.

The raw ``save_index`` / ``load_index`` crash test lives in tests/core/test_index_dir.py;
these tests go through each strategy's own ``save`` and ``load``.
"""

from __future__ import annotations

import hashlib
import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.persist import CorruptIndexError
from core.store import ChunkStore
from tests.core.conftest import unique_name
from tests.reliability.cases import StrategyCase, synthetic_documents, wiring_embedder
from tests.reliability.fuzzing import mutate_bytes, mutate_json

ROOT = Path(__file__).resolve().parents[2]
WRITER_DOCS = 200
ROUNDS = 3


def _current_generation(index_dir: Path) -> Path:
    return index_dir / (index_dir / "CURRENT").read_text().strip()


def _load(case: StrategyCase, path: Path, store: ChunkStore) -> Any:
    return case.load(path, embedder=wiring_embedder(), store=store, **case.wiring_kwargs())


# --------------------------------------------------------------------------- SIGKILL


def _kill_round(case: StrategyCase, path: Path, rng: random.Random, wait_ready: bool) -> int:
    """Starts the writer, kills it at a random moment, returns how many deletes it reported saved."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.crash_writer", case.name, str(path), str(WRITER_DOCS)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        if wait_ready:
            assert proc.stdout.readline().strip() == "ready", "the first save completed"
            time.sleep(rng.uniform(0.0, 1.5))
        else:
            time.sleep(rng.uniform(0.5, 3.5))  # during start-up, the first save or the deletes
    finally:
        proc.send_signal(signal.SIGKILL)
        output = proc.communicate(timeout=60)[0]
    assert proc.returncode in (-signal.SIGKILL, 0)
    saved = [int(line) for line in output.split() if line.isdigit()]
    return max(saved, default=0)


def test_sigkill_during_saves_leaves_a_loadable_intact_index(case: StrategyCase, tmp_path: Path) -> None:
    docs = synthetic_documents(WRITER_DOCS)
    reference = case.build(
        docs,
        embedder=wiring_embedder(),
        store=ChunkStore.ephemeral(unique_name("ref")),
        **case.wiring_kwargs(),
    )
    order = [d.id for d in docs]
    path = tmp_path / "index"
    rng = random.Random(20261130)
    for round_ in range(ROUNDS):
        reported = _kill_round(case, path, rng, wait_ready=round_ == 0)
        loaded = _load(case, path, reference.store)  # the reference collection holds every chunk
        live = case.live_documents(loaded)
        deleted = len(order) - len(live)
        assert live == set(order[deleted:]), "one complete saved state: the first `deleted` documents gone"
        if round_ == 0 or reported:
            assert deleted >= reported, "every save the writer reported is on disk"
        if live:
            results = loaded.retrieve("Who founded the guild?", k=3)
            assert results
            assert all(r.metadata["doc_id"] in live for r in results)


# --------------------------------------------------------------------------- damaged files


@pytest.fixture
def saved(case: StrategyCase, wiring_build: Callable[..., Any], tmp_path: Path) -> tuple[Any, Path]:
    strategy = wiring_build(10)
    path = tmp_path / "index"
    strategy.save(path)
    return strategy, path


def _file_names(path: Path) -> list[str]:
    return sorted(p.name for p in _current_generation(path).iterdir())


def test_every_index_file_is_covered(case: StrategyCase, saved: tuple[Any, Path]) -> None:
    _, path = saved
    names = _file_names(path)
    listed = set(json.loads((_current_generation(path) / "manifest.json").read_text())["files"])
    assert set(names) == listed | {"manifest.json"}
    assert len(names) >= 3


@pytest.mark.parametrize("damage", ["truncate", "bitflip"])
def test_damaged_files_give_a_clear_error_and_the_index_recovers(
    case: StrategyCase, saved: tuple[Any, Path], damage: str
) -> None:
    strategy, path = saved
    expected = [r.id for r in strategy.retrieve("salt and copper", k=3)]
    generation = _current_generation(path)
    for name in _file_names(path):
        target = generation / name
        good = target.read_bytes()
        if damage == "truncate":
            target.write_bytes(good[: len(good) // 2])
        else:
            flipped = bytearray(good)
            flipped[len(flipped) // 3] ^= 0x10
            target.write_bytes(bytes(flipped))
        with pytest.raises(ValueError, match=r"truncated|corrupted|malformed") as info:
            _load(case, path, strategy.store)
        message = str(info.value)
        if name == "manifest.json":
            assert "manifest.json" in message
        else:
            assert isinstance(info.value, CorruptIndexError)
            assert f"'{name}'" in message
            assert "truncated or corrupted" in message
        target.write_bytes(good)
        assert [r.id for r in _load(case, path, strategy.store).retrieve("salt and copper", k=3)] == expected


def test_resigned_damage_is_rejected_or_harmless(case: StrategyCase, saved: tuple[Any, Path]) -> None:
    strategy, path = saved
    generation = _current_generation(path)
    manifest_path = generation / "manifest.json"
    manifest_good = manifest_path.read_bytes()
    names = sorted(json.loads(manifest_good)["files"])
    rng = random.Random(7)
    outcomes = {"rejected": 0, "loaded": 0}
    for trial in range(150):
        name = names[trial % len(names)]
        target = generation / name
        good = target.read_bytes()
        if name.endswith(".json") and rng.random() < 0.6:
            bad, _ = mutate_json(rng, good)
        else:
            bad, _ = mutate_bytes(rng, good, good)
        manifest = json.loads(manifest_good)
        manifest["files"][name] = {"sha256": hashlib.sha256(bad).hexdigest(), "bytes": len(bad)}
        target.write_bytes(bad)
        manifest_path.write_text(json.dumps(manifest))
        try:
            loaded = _load(case, path, strategy.store)
        except ValueError:
            outcomes["rejected"] += 1
        else:
            outcomes["loaded"] += 1
            loaded.retrieve("Who founded the guild?", k=3)  # whatever loads must answer
        finally:
            target.write_bytes(good)
            manifest_path.write_bytes(manifest_good)
    assert outcomes["rejected"] >= 50, outcomes
    _load(case, path, strategy.store).retrieve("salt and copper", k=3)
