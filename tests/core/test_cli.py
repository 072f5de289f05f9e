from __future__ import annotations

import argparse
import json
import shlex

import pytest

from core.app.cli import main


def test_bench_filter_prints_figures_and_ratios(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "bf.json"
    assert main(["bench-filter", "--sizes", "2000,3000", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| 2,000 |" in text
    assert "filter/dict batch" in text
    rows = json.loads(out.read_text())
    assert [r["entities"] for r in rows] == [2000, 3000]
    assert all(r["wrong_lists"] == 0 for r in rows)
    assert all(r["filter_batch_lookups"] > 0 for r in rows)
    assert all(r["bfs_lookups"] > 0 for r in rows)


@pytest.mark.parametrize("sizes", ["0", "abc", "-5", ""])
def test_bench_filter_rejects_bad_sizes(sizes: str, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:
        main(["bench-filter", "--sizes", sizes])
    assert exc.value.code == 2
    assert "integers" in capsys.readouterr().err


def test_unknown_command_exits_2(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_every_command_help_shows_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    from core.app.cli import EXAMPLES, build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(commands) == set(EXAMPLES), "every command has examples, and only real commands do"
    for name in commands:
        with pytest.raises(SystemExit) as stop:
            build_parser().parse_args([name, "--help"])
        assert stop.value.code == 0
        shown = capsys.readouterr().out
        assert "examples:" in shown
        for example in EXAMPLES[name]:
            assert example in shown
            assert example.startswith(f"bridge-rag {name} ") or example == f"bridge-rag {name}"
            args = build_parser().parse_args(shlex.split(example)[1:])  # the flags exist and parse
            assert args.command == name


def test_bench_help_names_every_registered_strategy(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.evaluation.registry import STRATEGIES

    monkeypatch.setenv("COLUMNS", "2000")  # argparse would wrap the list inside hyphenated names
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    listed = capsys.readouterr().out
    for name in STRATEGIES:
        assert f" {name}," in listed or f" {name}\n" in listed, name
