"""Secrets end to end (issue 6, C-AC13): a corpus of token-shaped commands, built here and in
test_scrub (never a real token), goes through real record files into a running pipeline; not
one token, nor its tail, shows in `/metrics`, `/status`, the log or the state file. Kubernetes
Events carry the same scrubbed note text (issue 7 adds them)."""

from __future__ import annotations

import io
import itertools
import string

import orjson
import pytest
from prometheus_client import generate_latest

from repeat_failure.sidecar import hook
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.config import AgentSpec
from repeat_failure.sidecar.exporter import MetricsCollector, status_json
from test_scrub import ALNUM, MORE_TOKENS, TOKENS, rand

T0 = 1_800_000_000.0


def _pem(kind: str) -> str:
    body = "\n".join(rand(ALNUM + "+/", 64) for _ in range(4))
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----"


def _corpus() -> list[tuple[str, str]]:
    """(command, secret) pairs: every issuer-prefixed token kind, then secrets recognised by
    where they stand (headers, URLs, flags, assignments, key blocks)."""
    pairs = [(f"gh api /user --header x={token}", token)
             for token in [*TOKENS.values(), *MORE_TOKENS.values()]]
    s = iter(rand(ALNUM, 20) for _ in range(40))
    for template in [
        "curl -H 'Authorization: Bearer {}' https://api.example.com",
        "curl -H 'Authorization: token {}' https://api.example.com",
        "curl -H 'authorization:{}' https://api.example.com",
        "git clone https://deploy:{}@git.example.com/o/r.git",
        "psql postgres://app:{}@db:5432/app -c 'select 1'",
        "mysql --password={} -h db app",
        "mysql -u root -p{} app",
        "sshpass -p {} ssh host true",
        "tool --api-key {} --verbose",
        "GITHUB_TOKEN={} gh pr list",
        "export AWS_SECRET_ACCESS_KEY={}",
        "curl -d '{{\"password\": \"{}\"}}' https://x",
        "curl 'https://x/cb?access_token={}&state=1'",
        "docker login -u me -p {} registry.example.com",
    ]:
        secret = next(s)
        pairs.append((template.format(secret), secret))
    for kind in ("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK",
                 "PRIVATE KEY"):
        block = _pem(kind)
        pairs.append((f"printf '%s' '{block}' > key && ssh-add key", block.split("\n")[2]))
    return pairs


def _record(cmd: str, ts: float, escape: bool = False) -> bytes:
    """A hook record line; ``escape`` writes every letter of the command as a JSON \\u escape,
    so a token is split across escape sequences in the raw file."""
    line = orjson.dumps({"v": 1, "ts": ts, "agent": "a1", "backend": "bash",
                         "route": "bash_env", "exit": 1, "cmd": cmd})
    if escape:
        encoded = "".join(f"\\u{ord(c):04x}" if c in string.ascii_letters
                          else orjson.dumps(c).decode()[1:-1] for c in cmd)
        line = line.replace(orjson.dumps(cmd), f'"{encoded}"'.encode())
        assert orjson.loads(line)["cmd"] == cmd
    return line + b"\n"


def _pipeline(tmp_path, backend: str, settings: str, records: bytes,
              log_stream: io.StringIO | None = None) -> tuple[Sidecar, dict[str, str]]:
    """A sidecar for agent ``a1`` on ``backend`` (config ``repeat_failure:`` plus ``settings``)
    that collects ``records`` in two passes; returns it and every output: metrics, status,
    the log (when ``log_stream`` captures it) and the state file."""
    config = tmp_path / "config.yaml"
    config.write_text(f"repeat_failure:\n  enabled: true\n{settings}")
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", backend)], config, clock=lambda: T0,
                 monotonic=itertools.count(0, 10).__next__)
    sc.registry.register(MetricsCollector(sc))
    hook.records_path(sc.shared_dir, "a1").write_bytes(records)
    sc.run_once()
    sc.run_once()
    return sc, {"metrics": generate_latest(sc.registry).decode(),
                "status": status_json(sc).decode(),
                "log": log_stream.getvalue() if log_stream is not None else "",
                "state": (sc.shared_dir / "state" / "a1.json").read_text()}


def test_no_token_survives_in_any_output(tmp_path, log_stream) -> None:
    """Every corpus command fails twice (threshold 2: a note each), once written plainly and once
    with its letters as JSON escapes; then every output is searched for each secret and for its
    last 10 characters."""
    corpus = _corpus()
    assert len(corpus) == 42
    data = b"".join(_record(cmd, T0 - 100 + i, escape) for i, (escape, (cmd, _)) in
                    enumerate(itertools.product((False, True), corpus)))
    sc, outputs = _pipeline(tmp_path, "bash", "  threshold: 2\n  top_commands: 1000\n"
                            "  collect_grace_s: 1\n", data, log_stream)
    notes = sc.rows()[0].notes  # scrubbed commands that differed only in a secret merge
    assert sum(n.count for n in notes) == 2 * len(corpus)
    assert outputs["log"].count('"note_raised"') == len(notes)
    assert list((sc.shared_dir / "records").iterdir()) == []
    leaks = [(name, secret[-10:]) for name, text in outputs.items()
             for _, secret in corpus if secret in text or secret[-10:] in text]
    assert leaks == []
    assert all(outputs[name].count("[REDACTED]") >= len(notes) for name in outputs)


@pytest.mark.parametrize("command", [
    "git push origin main", "npm ci --no-audit", "gh pr view 1234 --json title",
    "git checkout 3f2c9a1b7e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b", "ls /var/lib/app/data",
])
def test_plain_commands_reach_every_output_unchanged(tmp_path, command: str) -> None:
    """The false-positive side end to end: a plain command is shown as typed."""
    sc, outputs = _pipeline(tmp_path, "bash", "  threshold: 2\n",
                            _record(command, T0 - 2) + _record(command, T0 - 1))
    assert [n.command for n in sc.rows()[0].notes] == [command]
    assert f'command="{command}"' in outputs["metrics"]
    assert "[REDACTED]" not in outputs["status"]


@pytest.mark.parametrize("template", [
    "curl -fsS -u 'admin:{pw}' https://api.example.com",
    "curl --user 'admin:{pw}' https://api.example.com",
    "python3 -c \"d={{'password': '{pw}'}}\"",
])
def test_secret_hidden_by_the_wrapper_quoting_is_scrubbed(tmp_path, log_stream,
                                                           template: str) -> None:
    """Claude Code wraps the command in a single-quoted `eval '…'` (each ' becomes '"'"'), so
    the scrubber does not see `-u 'admin:PW'` in the raw record; the wrapper stripper unquotes
    it, and the pipeline scrubs again after normalizing: the password reaches no output."""
    from test_backend_claude import wrap

    pw = rand(ALNUM, 20)
    command = template.format(pw=pw)
    raw = wrap(command)
    assert "'\"'\"'" in raw and len(raw) < 4000
    records = b"".join(
        orjson.dumps({"v": 1, "ts": T0 - 3 + i, "agent": "a1", "backend": "claude",
                      "route": "bash_env", "exit": 1, "cmd": raw}) + b"\n" for i in range(3))
    sc, outputs = _pipeline(tmp_path, "claude", "  threshold: 3\n", records, log_stream)
    (note,) = sc.rows()[0].notes
    assert pw not in note.command and "[REDACTED]" in note.command
    assert [pw in text for text in outputs.values()] == [False] * 4
