"""A real Chroma server for the integration tests, started and stopped by the session.

The server is the ``chroma`` executable installed next to the running Python
(``chroma run --path DIR --host 127.0.0.1 --port PORT``) on a free loopback port, with its
data in a temporary directory. The fixture waits for its heartbeat and stops it at the end;
without the executable the tests are skipped with a message saying what to install.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.processes import stop

STARTUP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ChromaServer:
    """Where the test server listens."""

    host: str
    port: int
    data: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _heartbeat(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2) as response:
            return response.status == 200 and "nanosecond heartbeat" in json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    executable = Path(sys.executable).parent / "chroma"
    if not executable.exists():
        pytest.skip(
            f"no chroma executable at {executable}; install chromadb (pip install 'bridge-rag[store]')"
        )
    data = tmp_path_factory.mktemp("chroma-server")
    log_path = data.parent / "chroma-server.log"
    for _attempt in range(3):  # another process may take the free port before the server binds it
        server = ChromaServer("127.0.0.1", _free_port(), data)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [
                    str(executable),
                    "run",
                    "--path",
                    str(data),
                    "--host",
                    server.host,
                    "--port",
                    str(server.port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline and not _heartbeat(server.url):
            time.sleep(0.1)
        if proc.poll() is None and _heartbeat(server.url):
            break
        proc.kill()
        proc.wait(timeout=30)
    else:
        tail = log_path.read_text(errors="replace")[-2000:]
        pytest.fail(
            f"the Chroma server did not answer its heartbeat within {STARTUP_TIMEOUT_S:.0f} s:\n{tail}"
        )
    try:
        yield server
    finally:
        stop(proc)
