"""The robustness table built from saved bench runs (core.evaluation.robustness, bridge-rag bench-table)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.app.cli import main
from core.evaluation.robustness import kept_gains, load_runs, robustness_table


def _run(dataset: str, titles: str, documents: str, dense: float, bridge: float) -> dict[str, object]:
    shape = {"titles": titles, "documents": documents, **({"sections": 20} if documents == "grouped" else {})}
    return {
        "dataset": dataset,
        "shape": shape,
        "rows": [
            {"strategy": "dense", "recall@5": dense, "family": "baseline"},
            {"strategy": "bridge", "recall@5": bridge, "family": "ours"},
            {"strategy": "hybrid", "recall@5": dense + 0.01, "family": "baseline"},
        ],
    }


def test_table_and_kept_gains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [
        _run("wiki", "meta", "passages", 0.6, 0.9),
        _run("wiki", "none", "passages", 0.5, 0.74),
        _run("wiki", "text", "grouped", 0.6, 0.8),
        _run("wiki/singlehop", "meta", "passages", 0.8, 0.81),
    ]
    table = robustness_table(runs)
    assert table.splitlines()[0] == "| dataset | shape | dense | bridge | hybrid |"
    assert "| wiki | no titles | 50.0 | 74.0 (+24.0) | 51.0 (+1.0) |" in table
    assert "| wiki | 20-section documents, title as first line | 60.0 | 80.0 (+20.0) |" in table
    assert "| wiki | titles in metadata, singlehop questions | 80.0 | 81.0 (+1.0) |" in table
    kept = kept_gains(runs)
    assert "- wiki, no titles: bridge +24.0 of +30.0 (80 %)" in kept
    assert "hybrid" not in kept, "only the strategies of the family 'ours'"
    files = []
    for i, run in enumerate(runs):
        files.append(tmp_path / f"r{i}.json")
        files[-1].write_text(json.dumps(run))
    assert main(["bench-table", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert table in out
    assert "gain over dense kept" in out
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(ValueError, match="not the JSON of a bridge-rag bench run"):
        load_runs([tmp_path / "bad.json"])
    assert main(["bench-table", str(tmp_path / "bad.json")]) == 2
