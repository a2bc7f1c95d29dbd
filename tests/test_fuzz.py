"""The atheris fuzz target (tests/fuzz/records.py) for a fixed, short time: no input makes the
parser, the scrubber, the normalizer or a session reader raise anything but its own error, and
memory stays under libFuzzer's RSS limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FUZZ_SECONDS = 15
TARGET = Path(__file__).resolve().parent / "fuzz" / "records.py"


def test_fuzz_records_for_a_fixed_time(tmp_path: Path) -> None:
    pytest.importorskip("atheris", reason="atheris is in the test extras")
    done = subprocess.run(
        [sys.executable, str(TARGET), f"-max_total_time={FUZZ_SECONDS}", "-rss_limit_mb=512",
         f"-artifact_prefix={tmp_path}/", "-print_final_stats=1"],
        capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
    tail = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0, tail
    assert "Done " in tail and list(tmp_path.iterdir()) == [], tail
