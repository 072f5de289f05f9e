"""A writer process for the writer-lock tests.

``python -m tests.reliability.lock_writer STRATEGY INDEX_DIR DOC_ID GO_FILE HOLD_S`` loads the
index under INDEX_DIR (fake embedder, the embedded Chroma beside it), waits until GO_FILE
exists (so several writers start together), adds one document with id DOC_ID and prints
``added``, then keeps the lock for HOLD_S seconds (``inf``: until killed) before exiting 0.
When another writer holds the lock it prints ``locked: <message>`` and exits 3.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from core.types import Document
from core.writer_lock import IndexLockedError
from tests.reliability.cases import case_named, wiring_embedder


def main(argv: list[str]) -> int:
    """Runs one writer; see the module docstring."""
    name, directory, doc_id, go, hold = argv[0], argv[1], argv[2], Path(argv[3]), float(argv[4])
    case = case_named(name)
    strategy = case.load(directory, embedder=wiring_embedder(), **case.wiring_kwargs())
    print("loaded", flush=True)
    while not go.exists():
        time.sleep(0.01)
    doc = Document(f"{doc_id} founded the Ortolan Guild in Brackwater in 1830.", id=doc_id)
    try:
        strategy.add_documents([doc])
    except IndexLockedError as exc:
        print(f"locked: {exc}", flush=True)
        return 3
    print("added", flush=True)
    deadline = time.monotonic() + hold
    while time.monotonic() < deadline:
        time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
