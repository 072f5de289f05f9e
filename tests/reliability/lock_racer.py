"""A bare lock taker for the writer-lock race tests.

``python -m tests.reliability.lock_racer INDEX_DIR GO_FILE STOP_FILE`` prints ``ready``, waits
until GO_FILE exists (so several takers start together), tries to take the writer lock of
INDEX_DIR and prints ``won`` (exit 0 later) or ``locked: <message>`` (exit 3 later), then keeps
whatever it holds until STOP_FILE exists (at most a minute), so a winner still holds the lock
while the others try.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from core.writer_lock import IndexLockedError, WriterLock


class _Owner:
    """The stand-in writer that owns the lock for the life of the process."""


def main(argv: list[str]) -> int:
    """Runs one taker; see the module docstring."""
    directory, go, stop = Path(argv[0]), Path(argv[1]), Path(argv[2])
    owner = _Owner()
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    try:
        WriterLock.acquire(directory, owner)
    except IndexLockedError as exc:
        print(f"locked: {exc}", flush=True)
        code = 3
    else:
        print("won", flush=True)
        code = 0
    deadline = time.monotonic() + 60.0
    while not stop.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
