"""The code blocks of a documentation page, and a runner that executes them as a user would.

A page's ``python`` blocks run in order as one script, its ``bash`` blocks in order as one
``bash -euo pipefail`` script, each in a fresh process whose working directory is a temporary
folder and whose ``PATH`` starts with this interpreter's ``bin`` (so ``bridge-rag`` is the
installed command). Blocks fenced as ``console`` or ``text`` show output and are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUN_TIMEOUT_S = 900

_FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.M | re.S)


def code_blocks(page: Path, language: str) -> list[str]:
    """The bodies of ``page``'s fenced blocks in ``language``, in page order."""
    return [body for lang, body in _FENCE.findall(page.read_text(encoding="utf-8")) if lang == language]


def run_page(page: Path, workdir: Path, env: Mapping[str, str] | None = None) -> str:
    """Runs ``page``'s python and bash blocks in ``workdir``; returns what they printed.

    Raises:
        AssertionError: A block failed; the message holds the page, the script and its output.
    """
    environ = dict(os.environ)
    environ.update(
        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", ANONYMIZED_TELEMETRY="False", RAGAS_DO_NOT_TRACK="true"
    )
    environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}"
    environ.update(env or {})
    printed = []
    for command, blocks in (
        ([sys.executable, "-c"], code_blocks(page, "python")),
        (["bash", "-euo", "pipefail", "-c"], code_blocks(page, "bash")),
    ):
        if not blocks:
            continue
        script = "\n".join(blocks)
        done = subprocess.run(
            [*command, script],
            cwd=workdir,
            env=environ,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, (
            f"{page.relative_to(ROOT)}: the {command[0]} blocks failed (exit {done.returncode})\n"
            f"--- script ---\n{script}\n--- output ---\n{output}"
        )
        printed.append(done.stdout)
    return "".join(printed)
