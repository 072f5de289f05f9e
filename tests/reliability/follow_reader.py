"""A reader process for the refresh tests: queries a loaded index while its writer changes it.

``python -m tests.reliability.follow_reader STRATEGY INDEX_DIR INTERVAL SECONDS`` loads the
index (fake embedder; the Chroma the manifest names), prints ``ready``, then for SECONDS
queries it in a loop with a k above the corpus size and prints one JSON line per query:
``{"t": wall-clock time, "docs": [document ids returned], "generation": ..., "error": ...}``.
"""

from __future__ import annotations

import json
import sys
import time

from tests.reliability.cases import case_named, wiring_embedder


def main(argv: list[str]) -> int:
    """Runs one reader; see the module docstring."""
    name, directory, interval, seconds = argv[0], argv[1], float(argv[2]), float(argv[3])
    case = case_named(name)
    strategy = case.load(
        directory, embedder=wiring_embedder(), refresh_interval=interval, **case.wiring_kwargs()
    )
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        record: dict[str, object] = {"t": time.time()}
        try:
            results = strategy.retrieve("Who founded the guild in the harbour town?", k=200)
            record["docs"] = sorted({str(r.metadata.get("doc_id")) for r in results})
        except Exception as exc:  # reported, and the test fails on it
            record["error"] = f"{type(exc).__name__}: {exc}"
        record["generation"] = strategy.generation
        print(json.dumps(record), flush=True)
        time.sleep(0.02)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
