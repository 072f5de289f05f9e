"""The documentation site: a strict build, a complete API reference, guides that run, no tracker talk."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.docs_blocks import DOCS, ROOT, code_blocks, run_page

#: The packages the project installs, and the modules the API reference documents whole.
PACKAGES = ("core", "langchain_bridge", "llama_index_bridge")
WHOLE_MODULES = ("core.filters", "core.entity_hop", "core.confidence_fusion", "core.evaluation")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built once with ``mkdocs build --strict`` (a warning fails the build)."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def test_the_docs_build_strictly(site: Path) -> None:
    pages = {p.relative_to(site).as_posix() for p in site.rglob("index.html")}
    for page in ("index.html", "guides/choosing-a-strategy/index.html", "api/core/index.html"):
        assert page in pages


def _resolve(path: str) -> Any:
    """The object an API anchor such as ``core.store.ChunkStore.add`` names, or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return None
        return obj
    return None


def test_every_public_name_is_in_the_api_reference(site: Path) -> None:
    anchors: dict[str, list[str]] = {}
    for html in (site / "api").rglob("*.html"):
        for anchor in re.findall(r'id="([A-Za-z_][\w.]*)"', html.read_text(encoding="utf-8")):
            anchors.setdefault(anchor.rsplit(".", 1)[-1], []).append(anchor)
    missing = []
    for module_name in (*PACKAGES, *WHOLE_MODULES):
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if name.startswith("_"):
                continue
            target = getattr(module, name)
            documented = any(
                _resolve(anchor) is target or anchor == f"{module_name}.{name}"
                for anchor in anchors.get(name, [])
            )
            if not documented:
                missing.append(f"{module_name}.{name}")
    assert not missing, f"public names missing from docs/api: {missing}"


def _tracker_reference() -> re.Pattern[str]:
    word = "iss" + "ue"  # spelled apart so this file does not match itself
    return re.compile(rf"\b{word}s?\s+#?\d+|\b{word}\s+#\d+", re.I)


def test_no_internal_issue_numbers_anywhere() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    if not tracked:  # not a git checkout: read the usual places
        tracked = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file()]
    found = []
    pattern = _tracker_reference()
    for rel in tracked:
        if not rel.endswith((".md", ".py", ".toml", ".yml", ".yaml", ".ipynb", ".txt", ".cpp", ".hpp")):
            continue
        text = (ROOT / rel).read_text(encoding="utf-8", errors="replace")
        found += [f"{rel}: {m.group(0)}" for m in pattern.finditer(text)]
    assert not found, f"internal tracker references: {found}"


def test_the_readme_is_a_landing_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    for name in PACKAGES:
        assert f"`{name}`" in readme, f"the README names the import package {name}"
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).exists(), f"README links to a missing file: {link}"


# deployment.md and distributed.md show servers and clusters; tests/integration runs their calls
GUIDES = sorted(
    p for p in (DOCS / "guides").glob("*.md") if p.name not in ("deployment.md", "distributed.md")
)


@pytest.mark.parametrize("page", GUIDES, ids=[p.stem for p in GUIDES])
def test_the_guide_examples_run(page: Path, tmp_path: Path) -> None:
    assert code_blocks(page, "python") or code_blocks(page, "bash"), f"{page.name} has no runnable example"
    run_page(page, tmp_path)
