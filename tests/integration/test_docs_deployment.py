"""The deployment guide's examples run against a real Chroma server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs_blocks import DOCS, run_page
from tests.integration.conftest import ChromaServer

pytestmark = pytest.mark.integration


def test_the_deployment_guide_runs_against_a_server(chroma_server: ChromaServer, tmp_path: Path) -> None:
    printed = run_page(
        DOCS / "guides" / "deployment.md",
        tmp_path,
        env={
            "CHROMA_HOST": chroma_server.host,
            "CHROMA_PORT": str(chroma_server.port),
            "INDEX_DIR": str(tmp_path / "shared_index"),
        },
    )
    assert "'varga'" in printed.splitlines()[0], printed
    assert "['ferries']" in printed, "the worker sees the writer's new document after refresh()"
