"""`gitfleet bench` without the `bench` extra stops before it starts anything, saying how to
install it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cli.main import main


def test_bench_without_matplotlib_fails_at_once_naming_the_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "loadtest.bench", None)  # any import of it fails, too
    code = main(["bench", "--preset", "small", "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert "bench extra (matplotlib not installed)" in err
    assert "pip install 'gitfleet[bench]'" in err
    assert not (tmp_path / "out").exists()
