"""Which embedded broker a command beside `osmo standalone` joins: the one its standalone names
in the data folder, only while it answers."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from osmo.embedded import broker_address_file, free_port, running_broker_url


def _name(directory: Path, address: str) -> None:
    broker_address_file(directory).parent.mkdir(parents=True)
    broker_address_file(directory).write_text(address + "\n")


def test_a_named_broker_that_answers_is_joined(tmp_path: Path, broker_url: str):
    running = urlsplit(broker_url)
    _name(tmp_path, f"{running.hostname}:{running.port}")
    assert running_broker_url(tmp_path) == f"redis://{running.hostname}:{running.port}/0"


def test_no_name_or_a_stale_one_joins_nothing(tmp_path: Path):
    assert running_broker_url(tmp_path) is None
    _name(tmp_path, f"127.0.0.1:{free_port()}")  # a killed standalone's: nothing answers there
    assert running_broker_url(tmp_path) is None


def test_a_garbled_name_joins_nothing(tmp_path: Path):
    _name(tmp_path, "127.0.0.1:not-a-port")
    assert running_broker_url(tmp_path) is None
