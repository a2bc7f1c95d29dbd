"""Everything a real sidecar shows after failing commands: the shared run of the two
value-leak tests on the sidecar's channels (``tests/test_scrub_values.py``, planted values
judged by value; ``tests/test_scrub_gitleaks.py``, gitleaks as the judge).

:func:`sidecar_channels` writes each command ``failures`` times as a failing record in the hook's
format (:func:`record`), through a real :class:`~repeat_failure.sidecar.app.Sidecar` with
threshold ``failures`` and Kubernetes Events on, sent over HTTP to a fake Events API on
127.0.0.1 (``test_events.FakeApiServer``), and returns the text of every channel: ``metrics``
(``/metrics``), ``status`` (``/status``), ``log`` (the JSON log), ``state/<agent>`` (the state
files) and ``event/<n>`` (each Event body the API received). It asserts the run itself went as
it should, so that a channel with nothing in it never passes for a clean one: one note per
distinct scrubbed, normalized command of an agent, one Event per note and none invalid, one
``note_raised`` log line per note.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest
from prometheus_client import generate_latest

from repeat_failure.config import AgentSpec
from repeat_failure.events import RateLimit
from repeat_failure.rules.normalize import normalize
from repeat_failure.rules.scrub import scrub
from repeat_failure.sidecar import hook
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.sidecar.exporter import MetricsCollector, status_json

#: The sidecar's wall clock for the whole run (records are stamped just before it).
T0 = 1_800_000_000.0
#: Commands per agent: every note of an agent is on /metrics and /status (they show an agent's
#: newest 100), and its notes fit the Events queue, which drains before the next agent.
PER_AGENT = 100


def record(agent: str, cmd: str, ts: float) -> bytes:
    """A failing record (exit 1) in the hook's format, one JSON line."""
    return orjson.dumps({"v": 1, "ts": ts, "agent": agent, "backend": "bash",
                         "route": "bash_env", "exit": 1, "cmd": cmd}) + b"\n"


def sidecar_channels(commands: Sequence[str], failures: int, tmp_path: Path,
                     log_stream: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Each of ``commands`` failing ``failures`` times (the threshold) through a real sidecar
    (agents ``a000``, ``a001``, ... of :data:`PER_AGENT` commands each, under ``tmp_path``);
    ``log_stream`` is conftest's captured log, ``monkeypatch`` sets the pod's name and namespace
    (``agent-pod-1`` in ``agents``). Returns ``{channel: text}`` (the module's docstring)."""
    from test_events import FakeApiServer

    parts = [list(commands[i:i + PER_AGENT]) for i in range(0, len(commands), PER_AGENT)]
    agents = [f"a{n:03d}" for n in range(len(parts))]
    config = tmp_path / "config.yaml"
    config.write_text(f"repeat_failure:\n  enabled: true\n  threshold: {failures}\n"
                      "  top_commands: 1000\n  collect_grace_s: 1\n  events: true\n")
    monkeypatch.setenv("POD_NAME", "agent-pod-1")
    monkeypatch.setenv("POD_NAMESPACE", "agents")
    api = FakeApiServer()
    sc = Sidecar(tmp_path / "shared", [AgentSpec(a, "bash") for a in agents], config,
                 clock=lambda: T0, monotonic=itertools.count(0, 10).__next__,
                 events_configuration=api.configuration)
    try:
        sc.registry.register(MetricsCollector(sc))
        assert sc.events is not None
        sc.events.limit = RateLimit(burst=10 * len(commands))
        # An agent at a time: its at most 100 notes fit the Events queue, which then drains.
        for agent, part in zip(agents, parts):
            lines = [record(agent, cmd, T0 - 100 + k + i * 1e-3)
                     for i, cmd in enumerate(part) for k in range(failures)]
            hook.records_path(sc.shared_dir, agent).write_bytes(b"".join(lines))
            sc.run_once()
            sc.run_once()
            assert sc.events.wait_idle(60)
        # One note per distinct scrubbed, normalized command of an agent (the commands of one
        # shape that differ only in their secret merge).
        notes = sum(len(r.notes) for r in sc.rows())
        assert notes == sum(len({normalize(scrub(cmd), "bash") for cmd in part})
                            for part in parts)
        outputs = {"metrics": generate_latest(sc.registry).decode(),
                   "status": status_json(sc).decode(), "log": log_stream.getvalue()}
    finally:
        if sc.events is not None:
            sc.events.close(timeout=5)
        api.stop()
    assert len(api.events) == notes and api.invalid == []
    outputs.update({f"state/{a}": (sc.shared_dir / "state" / f"{a}.json").read_text()
                    for a in agents})
    outputs.update({f"event/{i}": body.decode() for i, (_, _, _, body) in enumerate(api.requests)})
    assert outputs["log"].count('"note_raised"') == notes
    return outputs
