"""Stopping the servers the integration tests start."""

from __future__ import annotations

import subprocess
from typing import Any


def stop(proc: subprocess.Popen[Any], timeout: float = 30) -> None:
    """Asks ``proc`` to end (SIGTERM), and kills it when it has not ended within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)
