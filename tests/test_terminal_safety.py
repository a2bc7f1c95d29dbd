"""Terminal safety on every channel (issue 16, item 4): a command's control characters (ESC
sequences, BEL, NUL, C1 controls, DEL) and bidi overrides (U+202E ...) never reach /metrics,
/status, the log or a Kubernetes Event raw. /metrics writes them as ``\\uXXXX`` text; the JSON
channels escape them, so their parsed values stay exactly the command."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess

import orjson
import pytest
from prometheus_client import generate_latest

from repeat_failure.sidecar import hook
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.config import AgentSpec
from repeat_failure.events import PodRef, event_body
from repeat_failure.sidecar.exporter import MetricsCollector, status_json
from repeat_failure.rules.terminal import json_bytes, json_text, label_value

T0 = 1_800_000_000.0
#: ESC (a colour sequence and a title-setting OSC ended by BEL), NUL, a C1 CSI, DEL, the bidi
#: override U+202E, a zero-width space and a right-to-left isolate (U+2067).
COMMAND = "printf '\x1b[31mred\x1b]0;title\x07 \x00 \x9b2J \x7f \u202etxt.exe \u200b \u2067x'"
UNSAFE = ["\x1b", "\x07", "\x00", "\x9b", "\x7f", "\u202e", "\u200b", "\u2067"]


@pytest.mark.parametrize("text, expected", [
    ("gh pr view 1", "gh pr view 1"),
    ("a\x1b[31mb", "a\\u001b[31mb"),
    ("bell\x07 nul\x00", "bell\\u0007 nul\\u0000"),
    ("\u202eevil", "\\u202eevil"),
    ("c1\x9b del\x7f", "c1\\u009b del\\u007f"),
    ("tag \U000e0041", "tag \\udb40\\udc41"),
    ("café ünïcode ✓ 日本", "café ünïcode ✓ 日本"),
])
def test_label_value_exact(text: str, expected: str) -> None:
    """Printable text is returned as it is (the same object); each unprintable character
    becomes the JSON escape of its code point (a surrogate pair above U+FFFF)."""
    assert label_value(text) == expected
    if text == expected:
        assert label_value(text) is text


def test_json_escapes_keep_the_value() -> None:
    """json_text/json_bytes change no JSON value, and leave no unprintable character raw."""
    data = {"command": COMMAND, "n": 1}
    for raw in (json.dumps(data, ensure_ascii=False), orjson.dumps(data).decode()):
        safe = json_text(raw)
        assert json.loads(safe) == data
        assert not any(c in safe for c in UNSAFE)
    safe_bytes = json_bytes(orjson.dumps(data))
    assert orjson.loads(safe_bytes) == data and safe_bytes.isascii()
    plain = orjson.dumps({"command": "ls"})
    assert json_bytes(plain) is plain


def _sidecar(tmp_path) -> Sidecar:
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  threshold: 2\n  collect_grace_s: 1\n")
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], config, clock=lambda: T0,
                 monotonic=itertools.count(0, 10).__next__)
    sc.registry.register(MetricsCollector(sc))
    records = b"".join(orjson.dumps({"v": 1, "ts": T0 - 10 + i, "agent": "a1", "backend": "bash",
                                     "route": "bash_env", "exit": 1, "cmd": COMMAND}) + b"\n"
                       for i in range(2))
    hook.records_path(sc.shared_dir, "a1").write_bytes(records)
    sc.run_once()
    sc.run_once()
    return sc


def test_no_control_character_reaches_any_channel_raw(tmp_path, log_stream) -> None:
    """The command fails twice and raises a note: /metrics holds none of the characters raw
    (its command label shows ``\\u001b`` ...), /status, the log line and the Event body neither,
    and the JSON channels still parse to the command itself."""
    sc = _sidecar(tmp_path)
    (note,) = sc.rows()[0].notes
    assert "\x1b" in note.command and "\u202e" in note.command  # the detector keeps the command
    metrics = generate_latest(sc.registry).decode()
    status = status_json(sc)
    log = log_stream.getvalue()
    event = orjson.dumps(event_body(PodRef("p", "ns"), note.message, T0)).decode()
    for name, text in (("metrics", metrics), ("status", status.decode()), ("log", log),
                       ("event", event)):
        assert [c for c in UNSAFE if c in text] == [], name
    # Prometheus' text format writes the label's backslash as "\\".
    assert 'command="printf \'\\\\u001b[31mred\\\\u001b]0;title\\\\u0007 \\\\u0000 \\\\u009b2J ' \
           '\\\\u007f \\\\u202etxt.exe \\\\u200b \\\\u2067x\'"' in metrics
    assert orjson.loads(status)["rows"][0]["notes"][0]["command"] == note.command
    (raised,) = [json.loads(line) for line in log.splitlines() if '"note_raised"' in line]
    assert raised["command"] == note.command
    assert orjson.loads(event)["message"].startswith("Repeating failure: printf '\\u001b[31mred")


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool missing (Debian package prometheus)")
def test_promtool_accepts_the_escaped_metrics(tmp_path) -> None:
    """promtool check metrics reads the exposition with the escaped labels without an error."""
    sc = _sidecar(tmp_path)
    proc = subprocess.run(["promtool", "check", "metrics"], input=generate_latest(sc.registry),
                          capture_output=True, timeout=60)
    assert b"error" not in proc.stderr.lower() and b"error" not in proc.stdout.lower(), proc


def test_escaped_label_stays_within_200_characters(tmp_path) -> None:
    """The escape comes before the 200-character cut (docs/metrics.md "Series"): sixty ESCs (360
    characters escaped) make a label of exactly 200 characters, the last one "…"."""
    import re

    from repeat_failure.rules.normalize import command_label

    command = "echo " + "\x1b" * 60
    label = command_label(label_value(command))
    assert len(label) == 200 and label.endswith("…") and "\x1b" not in label
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  threshold: 2\n  collect_grace_s: 1\n")
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], config, clock=lambda: T0,
                 monotonic=itertools.count(0, 10).__next__)
    sc.registry.register(MetricsCollector(sc))
    hook.records_path(sc.shared_dir, "a1").write_bytes(b"".join(
        orjson.dumps({"v": 1, "ts": T0 - 10 + i, "agent": "a1", "backend": "bash",
                      "route": "bash_env", "exit": 1, "cmd": command}) + b"\n" for i in range(2)))
    sc.run_once()
    metrics = generate_latest(sc.registry).decode()
    (value,) = re.findall(r'hive_repeat_failure_note\{[^}]*command="((?:\\.|[^"\\])*)"', metrics)
    assert value.replace("\\\\", "\\") == label
