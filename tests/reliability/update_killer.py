"""``bridge-rag index`` that kills itself with SIGKILL at a chosen stage, for the kill test.

``python -m tests.reliability.update_killer STAGE -- ARGS...`` runs ``bridge-rag ARGS`` in
this process with the fake embedder and the rule-based entity extractor (no model), and
sends itself SIGKILL when the run reaches STAGE (``none``: never):

* ``journal``: the pending journal is in ``sources.json``, nothing else changed yet;
* ``chroma-delete``: the first delete reached Chroma, the index does not know yet;
* ``delete-saved``: the index saved the deletes;
* ``chroma-add``: the new chunks are in Chroma, not yet in the index;
* ``add-saved``: the index saved the new chunks, the record still says "pending";
* ``record``: about to write the final record.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

STAGES = ("journal", "chroma-delete", "delete-saved", "chroma-add", "add-saved", "record")
_REPO = Path(__file__).resolve().parents[2]


def run_index(stage: str, docs: Path, index: Path, *more: str) -> subprocess.CompletedProcess[str]:
    """``bridge-rag index DOCS --index INDEX --no-progress MORE...`` in a new process killed at ``stage``."""
    argv = ["index", str(docs), "--index", str(index), "--no-progress", *more]
    return subprocess.run(
        [sys.executable, "-m", "tests.reliability.update_killer", stage, "--", *argv],
        cwd=_REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _after(stage: str, wanted: str, call: int, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, killing the process after its ``call``-th call when ``stage`` is the wanted one."""
    calls = [0]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        calls[0] += 1
        if stage == wanted and calls[0] == call:
            _die()
        return result

    return wrapper


@contextmanager
def offline_models() -> Iterator[None]:
    """The fake embedder and rule-based entities wherever the CLI would load a model, in the block."""
    from core.entities import RuleBasedEntityExtractor
    from core.strategies import lifecycle
    from core.strategies.bridge import strategy as bridge
    from core.strategies.umg import strategy as umg
    from tests.reliability.cases import wiring_embedder

    saved = [(m, "as_embedder", m.as_embedder) for m in (lifecycle, umg)]
    saved += [(m, "default_entity_extractor", m.default_entity_extractor) for m in (bridge, umg)]
    for module in (lifecycle, umg):  # where a strategy's embedder is made (umg: from_store)
        original = module.as_embedder
        module.as_embedder = lambda e, _o=original: _o(e if e is not None else wiring_embedder())
    for module in (bridge, umg):
        module.default_entity_extractor = RuleBasedEntityExtractor
    try:
        yield
    finally:  # a test process goes on with the real models
        for module, name, value in saved:
            setattr(module, name, value)


def main(argv: list[str]) -> int:
    """Runs the command; SIGKILLs itself at the stage named by ``argv[0]``."""
    stage, args = argv[0], argv[2:]
    if stage != "none" and stage not in STAGES:
        raise SystemExit(f"unknown stage {stage!r}; one of {', '.join(STAGES)} or none")
    from core.app import cli, indexing
    from core.store import ChunkStore
    from core.strategies import lifecycle

    writes = [0]
    write_sources = indexing.write_sources

    def record(*a: Any, **k: Any) -> Any:
        writes[0] += 1
        if stage == "record" and writes[0] == 2:
            _die()
        result = write_sources(*a, **k)
        if stage == "journal" and writes[0] == 1:
            _die()
        return result

    indexing.write_sources = record
    ChunkStore.delete = _after(stage, "chroma-delete", 1, ChunkStore.delete)
    ChunkStore.add = _after(stage, "chroma-add", 1, ChunkStore.add)
    saves: list[int] = [0]
    original = lifecycle.save_index

    def save(*a: Any, **k: Any) -> Any:
        result = original(*a, **k)
        saves[0] += 1
        if (stage == "delete-saved" and saves[0] == 1) or (stage == "add-saved" and saves[0] == 2):
            _die()
        return result

    lifecycle.save_index = save
    with offline_models():
        return cli.main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
