"""The embedded data folder is the checkout's `.osmo` wherever a command runs from."""

from __future__ import annotations

from pathlib import Path

from osmo import embedded

ROOT = Path(__file__).resolve().parents[2]


def test_the_checkout_folder_wherever_the_command_runs(monkeypatch, tmp_path):
    monkeypatch.delenv("OSMO_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert embedded.data_dir() == ROOT / ".osmo"


def test_the_variable_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("OSMO_DATA_DIR", str(tmp_path / "elsewhere"))
    assert embedded.data_dir() == tmp_path / "elsewhere"
