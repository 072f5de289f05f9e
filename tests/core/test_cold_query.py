"""``bridge-rag query`` at the library's speed: the ONNX copy of the model, many questions on one load.

Each strategy is built once with ``bridge-rag index``; the command's answers (which embed with
the index's ONNX copy and never import torch) must equal the library's (which loads the
sentence-transformers model): the same ids in the same order, the same scores to 1e-5.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.embed import CallableEmbedder, SentenceTransformerEmbedder
from core.onnx_embed import EMBEDDER_DIR, MAX_DIFFERENCE, export_onnx, load_onnx_embedder
from core.strategies.registry import get_strategy
from tests.core.test_cli_index import REPO, cli, query_json, summary_of, write_corpus

STRATEGIES = ("bridge", "umg", "bubble")
QUESTIONS = (
    "Which astronomer discovered the comet Varga-Lind?",
    "Who restored the Aurelio violin?",
    "What did the Kestrel Robotics board chair design?",
)
PROVENANCE = {
    "bridge": {"found_by"},
    "umg": {"granularity", "expert_scores"},
    "bubble": {"found_by", "covered_concepts"},
}


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One index directory per strategy, built by the command over the same small corpus."""
    base = tmp_path_factory.mktemp("cold-query")
    corpus = write_corpus(base / "docs", bad_file=False, pdf=False)
    built = {}
    for name in STRATEGIES:
        index = base / name
        result = cli(
            "index", str(corpus), "--strategy", name, "--index", str(index), "--collection", f"c_{name}"
        )
        assert result.returncode == 0, result.stderr
        assert summary_of(result)["added"] == 5
        built[name] = index
    return built


def _library_results(
    index: Path, name: str, embedder: SentenceTransformerEmbedder, question: str
) -> list[Any]:
    rag = get_strategy(name).load(index / name, embedder=embedder, refresh_interval=None)
    try:
        return list(rag.retrieve(question, k=4))
    finally:
        rag.close()


@pytest.mark.parametrize("name", STRATEGIES)
def test_command_answers_equal_the_librarys(
    indexes: dict[str, Path], name: str, st_embedder: SentenceTransformerEmbedder
) -> None:
    index = indexes[name]
    assert (index / EMBEDDER_DIR / "model.onnx").is_file()
    for question in QUESTIONS:
        data = query_json(index, question, "-k", "4")
        assert data["strategy"] == name
        got = data["results"]
        want = _library_results(index, name, st_embedder, question)
        assert [r["id"] for r in got] == [r.id for r in want], question
        np.testing.assert_allclose([r["score"] for r in got], [r.score for r in want], atol=1e-5, rtol=0)
    top = query_json(index, QUESTIONS[0], "-k", "2")["results"][0]
    assert top["metadata"]["source"] == "notes/varga.md"
    assert PROVENANCE[name] <= set(top["metadata"]), sorted(top["metadata"])


@pytest.mark.parametrize("name", ["bridge", "bubble"])
def test_a_query_imports_neither_torch_nor_sentence_transformers(indexes: dict[str, Path], name: str) -> None:
    code = (
        "import sys\n"
        "from core.app.cli import main\n"
        f"main(['query', {str(indexes[name])!r}, {QUESTIONS[0]!r}, '--json'])\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout[-500:]


def _query_stdin(index: Path, lines: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``bridge-rag query INDEX ARGS`` with ``lines`` on its standard input (checked to succeed)."""
    result = subprocess.run(
        [sys.executable, "-m", "core.app.cli", "query", str(index), *args],
        input=lines,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_questions_on_standard_input_get_one_json_line_each(indexes: dict[str, Path]) -> None:
    index = indexes["bridge"]
    lines = f"{QUESTIONS[0]}\n\n   \n{QUESTIONS[1]}\n{QUESTIONS[2]}"  # blank lines skipped, no final newline
    result = _query_stdin(index, lines, "--json", "-k", "3")
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a["query"] for a in answers] == list(QUESTIONS)
    for answer in answers:
        alone = query_json(index, answer["query"], "-k", "3")
        assert [r["id"] for r in answer["results"]] == [r["id"] for r in alone["results"]]


def test_questions_on_standard_input_for_a_person(indexes: dict[str, Path]) -> None:
    result = _query_stdin(indexes["umg"], f"{QUESTIONS[0]}\n{QUESTIONS[1]}\n", "-k", "1")
    assert result.stdout.count("1 result from umg for") == 2, result.stdout
    assert "varga.md" in result.stdout
    assert "Aurelio" in result.stdout


def test_a_damaged_copy_is_not_used_and_update_writes_it_again(
    indexes: dict[str, Path], tmp_path: Path
) -> None:
    index = tmp_path / "bridge"
    shutil.copytree(indexes["bridge"], index)
    before = query_json(index, QUESTIONS[1], "-k", "3")
    model = index / EMBEDDER_DIR / "model.onnx"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="fails its checksum"):
        assert load_onnx_embedder(index) is None
    result = cli("query", str(index), QUESTIONS[1], "--json", "-k", "3")
    assert result.returncode == 0, result.stderr
    assert "fails its checksum" in result.stderr
    again = json.loads(result.stdout)
    assert [r["id"] for r in again["results"]] == [r["id"] for r in before["results"]]
    update = cli("index", "--update", "--index", str(index))
    assert update.returncode == 0, update.stderr
    assert load_onnx_embedder(index) is not None


def test_the_copy_embeds_as_the_model_does(
    indexes: dict[str, Path], st_embedder: SentenceTransformerEmbedder
) -> None:
    copy = load_onnx_embedder(indexes["bridge"])
    assert copy is not None
    assert copy.name == st_embedder.name
    assert copy.dimension == st_embedder.dimension
    texts = [
        "Marco Ferro restored the Aurelio violin in Cremona.",
        "   spaces around   ",
        "",
        "A very long text. " * 300,
        "Zürich, Kraków, 東京, and an emoji 🚀.",
    ]
    got = copy.embed_documents(texts)
    want = st_embedder.embed_documents(texts)
    assert float(np.max(np.abs(got - want))) <= MAX_DIFFERENCE
    assert (
        float(np.max(np.abs(copy.embed_query(texts[0]) - st_embedder.embed_query(texts[0]))))
        <= MAX_DIFFERENCE
    )


def test_a_copy_of_another_version_is_not_used(indexes: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / EMBEDDER_DIR
    shutil.copytree(indexes["bridge"] / EMBEDDER_DIR, folder)
    manifest = json.loads((folder / "embedder.json").read_text())
    manifest["version"] = 999
    (folder / "embedder.json").write_text(json.dumps(manifest))
    with pytest.warns(RuntimeWarning, match="version 999"):
        assert load_onnx_embedder(tmp_path) is None


def test_an_export_is_reused_for_the_next_index_and_a_damaged_one_made_again(
    tmp_path: Path, st_embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert export_onnx(st_embedder, tmp_path / "one") is None
    (cached,) = (tmp_path / "cache" / "bridge-rag" / "onnx").glob("*.onnx")
    whole = cached.read_bytes()
    assert (tmp_path / "one" / EMBEDDER_DIR / "model.onnx").read_bytes() == whole
    assert export_onnx(st_embedder, tmp_path / "two") is None  # copied from the cache
    assert (tmp_path / "two" / EMBEDDER_DIR / "model.onnx").read_bytes() == whole
    cached.write_bytes(whole[: len(whole) // 3])  # damaged: onnxruntime cannot read it
    assert export_onnx(st_embedder, tmp_path / "three") is None  # exported again, and cached again
    assert cached.stat().st_size > len(whole) // 3
    assert load_onnx_embedder(tmp_path / "three") is not None
    assert export_onnx(st_embedder, tmp_path / "four") is None  # the new cached copy is whole


def test_only_sentence_transformers_models_are_exported(tmp_path: Path) -> None:
    embedder = CallableEmbedder(lambda texts: np.ones((len(texts), 3), dtype=np.float32), name="ones")
    why = export_onnx(embedder, tmp_path)
    assert why is not None
    assert "not a sentence-transformers model" in why
    assert not (tmp_path / EMBEDDER_DIR).exists()
