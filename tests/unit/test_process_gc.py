"""The collector setting every long-running process applies once it has started."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("busy, thresholds", [(False, [700, 10, 10]), (True, [50_000, 20, 20])])
def test_settle_freezes_what_the_process_holds(busy, thresholds) -> None:
    # In a process of its own: the setting is process-wide.
    out = subprocess.run(
        [sys.executable, "-c", "import gc, json\n"
         "before = (gc.get_threshold(), gc.get_freeze_count())\n"
         "from osmo import process_gc\n"
         "held = len(gc.get_objects())\n"
         f"process_gc.settle(busy={busy})\n"
         "print(json.dumps([before, [gc.get_threshold(), gc.get_freeze_count()], held]))"],
        capture_output=True, text=True, check=True).stdout
    import json

    (threshold_before, frozen_before), (threshold, frozen), held = json.loads(out)
    assert threshold_before == [700, 10, 10] and frozen_before == 0
    assert threshold == thresholds and frozen >= held > 0  # every object it held
