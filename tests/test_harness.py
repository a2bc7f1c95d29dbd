"""The harness's own parts (spec C4): the stub's multi-step script and tool choice, the SQLite
session-store copy, and the shape of the session-scenario evidence it wrote."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import string
import urllib.request
from pathlib import Path

import pytest

from harness.evidence import primary
from harness import capture
from harness import run as scenarios
from harness.backends import BACKENDS
from harness.install import HarnessError
from harness.stub import (FINAL_TEXT, PATCH_LINE, REQUIRED_TEXT, Script, Step, StubServer,
                          pick_tool)

EVIDENCE_DIR = primary()
SHELL = {"type": "object", "properties": {"command": {"type": "string"}}}


def schema(*names: str) -> dict:
    """A JSON schema with string properties ``names``."""
    return {"type": "object", "properties": {n: {"type": "string"} for n in names}}


@pytest.mark.parametrize("tools, name, arg", [
    ([{"name": "Bash", "schema": SHELL}, {"name": "Read", "schema": schema("file_path")}],
     "Read", "file_path"),  # Claude Code
    ([{"name": "read_file", "schema": schema("file_path", "start_line")}], "read_file",
     "file_path"),  # Gemini CLI
    ([{"name": "read", "schema": schema("filePath", "offset")}], "read", "filePath"),  # opencode
    ([{"name": "view", "schema": schema("path", "view_range")}], "view", "path"),  # Copilot
    ([{"name": "read", "schema": schema("i", "path")}], "read", "path"),  # omp
])
def test_file_tool_is_found_by_name_and_path_argument(tools: list, name: str, arg: str) -> None:
    """A file step uses the CLI's read tool and its path parameter, never the shell tool."""
    choice = pick_tool(tools, "file")
    assert (choice.name, choice.arg) == (name, arg)
    assert choice.arguments("/w/notes.txt") == {arg: "/w/notes.txt"}


def test_codex_apply_patch_is_the_file_tool_only_without_a_read_tool() -> None:
    """Codex offers no read tool; its freeform apply_patch gets a patch appending a line."""
    tools = [{"name": "exec_command", "schema": schema("cmd")},
             {"name": "apply_patch", "schema": None, "freeform": True}]
    choice = pick_tool(tools, "file")
    assert choice.freeform and choice.name == "apply_patch"
    assert choice.arguments("/w/notes.txt") == (
        f"*** Begin Patch\n*** Update File: /w/notes.txt\n@@\n+{PATCH_LINE}\n*** End Patch\n")
    assert pick_tool(tools, "shell").name == "exec_command"
    assert pick_tool([{"name": "exec_command", "schema": schema("cmd")}], "file") is None


def test_other_required_free_text_parameters_are_filled() -> None:
    """Copilot CLI 1.0.11's ``bash`` requires ``description`` beside ``command``: the shell call
    fills it (and any other required string without an ``enum``) with ``REQUIRED_TEXT``; a
    required boolean is ``false`` (Qwen Code 0.5.0-0.10.1's ``is_background``); an enum string
    and optional strings are left out."""
    bash = {"type": "object", "required": ["command", "description", "mode", "async"],
            "properties": {"command": {"type": "string"}, "description": {"type": "string"},
                           "mode": {"type": "string", "enum": ["sync", "async"]},
                           "async": {"type": "boolean"}, "note": {"type": "string"}}}
    choice = pick_tool([{"name": "bash", "schema": bash}], "shell")
    assert choice.required_text == ("description",)
    assert choice.arguments("ls /nonexistent") == {"command": "ls /nonexistent",
                                                   "description": REQUIRED_TEXT, "async": False}
    plain = pick_tool([{"name": "bash", "schema": SHELL}], "shell")
    assert plain.arguments("ls /nonexistent") == {"command": "ls /nonexistent"}


def test_a_release_runs_with_the_settings_its_backend_module_gives() -> None:
    """``Backend.at_release``: the pin's settings with the version changed, then the module's
    ``release_settings`` (pi: releases up to 0.73.1 from the old package; copilot: an extra
    flag; opencode and kilo: no ``--pure``); a backend without one only changes the
    version."""
    pi = BACKENDS["pi"]
    assert (pi.at_release("0.27.9").package, pi.at_release("0.73.1").package,
            pi.at_release("0.74.0").package) == ("@mariozechner/pi-coding-agent",
                                                 "@mariozechner/pi-coding-agent", pi.package)
    assert pi.at_release("0.27.9").version == "0.27.9"
    assert "--allow-all-paths" in BACKENDS["copilot"].at_release("1.0.62").argv("c", "p")
    assert BACKENDS["opencode"].at_release("1.2.1").argv("o", "p") == [
        "o", "run", "--model", "stub/stub-model", "p"]
    assert "--pure" not in BACKENDS["kilo"].at_release("7.0.33").argv("k", "p")
    qwen = BACKENDS["qwen"].at_release("0.15.10")
    assert (qwen.version, qwen.argv, qwen.package) == (
        "0.15.10", BACKENDS["qwen"].argv, BACKENDS["qwen"].package)


def _post(url: str, body: dict) -> dict:
    """POST ``body`` as JSON to ``url``; the JSON reply."""
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def test_stub_walks_the_steps_by_counting_tool_results() -> None:
    """Chat Completions: a conversation with n tool results gets step n, then the closing text;
    every call the stub asks for is logged with the tools offered."""
    tools = [{"type": "function", "function": {"name": "bash", "parameters": SHELL}},
             {"type": "function", "function": {"name": "read", "parameters": schema("filePath")}}]
    script = Script((Step("shell", "ls /nonexistent"), Step("file", "/w/notes.txt")))
    messages = [{"role": "user", "content": "go"}]
    with StubServer(script) as stub:
        replies = []
        for _ in range(3):
            reply = _post(f"{stub.url}/v1/chat/completions",
                          {"model": "m", "messages": messages, "tools": tools})
            message = reply["choices"][0]["message"]
            replies.append(message)
            messages = messages + [message, {"role": "tool", "content": "ok"}]
        calls, offered = stub.calls, stub.offered
    first, second, last = replies
    assert first["tool_calls"][0]["function"] == {
        "name": "bash", "arguments": json.dumps({"command": "ls /nonexistent"})}
    assert second["tool_calls"][0]["function"] == {
        "name": "read", "arguments": json.dumps({"filePath": "/w/notes.txt"})}
    assert last["content"] == FINAL_TEXT
    assert [(c["name"], c["input"]) for c in calls] == [
        ("bash", {"command": "ls /nonexistent"}), ("read", {"filePath": "/w/notes.txt"})]
    assert offered == {"bash", "read"}


def test_stub_answers_a_freeform_tool_with_a_custom_tool_call() -> None:
    """OpenAI Responses: Codex's apply_patch (a ``custom`` tool) gets a ``custom_tool_call``."""
    body = {"model": "m", "input": [], "tools": [
        {"type": "function", "name": "exec_command", "parameters": schema("cmd")},
        {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}]}
    with StubServer(Script((Step("file", "/w/notes.txt"),))) as stub:
        (item,) = _post(f"{stub.url}/v1/responses", body)["output"]
    assert item["type"] == "custom_tool_call" and item["name"] == "apply_patch"
    assert item["input"].startswith("*** Begin Patch\n*** Update File: /w/notes.txt\n")


def _digest(path: Path) -> str:
    """The SHA-256 of the file at ``path``."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sqlite_copy_of_a_live_wal_database(tmp_path: Path) -> None:
    """The copy of a database still open in its writer holds the rows that are only in the
    write-ahead log, leaves the writer's database and log byte for byte as they were, is in
    rollback-journal mode, and has its text values scrubbed."""
    source = tmp_path / "cli" / "store.db"
    source.parent.mkdir()
    token = "ghp_" + "".join(string.ascii_letters[i % 52] for i in range(36))
    writer = sqlite3.connect(source)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # every row stays in the log
    writer.execute("CREATE TABLE part (id INTEGER PRIMARY KEY, data TEXT, raw BLOB)")
    writer.execute("INSERT INTO part (data, raw) VALUES (?, ?)",
                   (json.dumps({"tool": "bash", "command": f"echo {token}"}), b"\x00\x01"))
    writer.commit()
    wal = Path(f"{source}-wal")
    before = (_digest(source), _digest(wal))
    target = tmp_path / "evidence" / "store.db"
    try:
        rows = capture._sqlite_copy(source, target)
        assert (_digest(source), _digest(wal)) == before
    finally:
        writer.close()
    (line,) = rows.splitlines()
    assert json.loads(json.loads(line)["row"]["data"])["tool"] == "bash"
    copy = sqlite3.connect(target)
    try:
        assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        (data, raw), = copy.execute("SELECT data, raw FROM part").fetchall()
    finally:
        copy.close()
    assert token not in data and json.loads(data)["tool"] == "bash"
    assert raw == b"\x00\x01"
    assert token.encode() not in target.read_bytes()
    assert sorted(p.name for p in target.parent.iterdir()) == ["store.db"]


def test_sqlite_copy_names_a_key_that_scrubbing_would_collapse(tmp_path: Path) -> None:
    """Every text column is scrubbed, keys too; where scrubbing makes two values of a unique
    column one (opencode 1.18's event.id in a CI run: the copy failed on an IntegrityError), the
    run fails with a message naming the table and column, and keeps nothing unscrubbed."""
    token = "ghp_" + "".join(string.ascii_letters[i % 52] for i in range(36))
    other = "ghp_" + "".join(string.ascii_letters[(i + 7) % 52] for i in range(36))
    source = tmp_path / "store.db"
    db = sqlite3.connect(source)
    db.execute("CREATE TABLE event (id TEXT PRIMARY KEY, data TEXT)")
    db.executemany("INSERT INTO event VALUES (?, ?)", [(token, "a"), (other, "b")])
    db.commit()
    db.close()
    with pytest.raises(HarnessError, match=r"store.db: scrubbing event\.id made two values one"):
        capture._sqlite_copy(source, tmp_path / "copy" / "store.db")


EVIDENCE = {name: json.loads((EVIDENCE_DIR / f"{name}.json").read_text())
            for name in BACKENDS if (EVIDENCE_DIR / f"{name}.json").exists()}


@pytest.mark.parametrize("backend", sorted(EVIDENCE))
def test_session_scenarios_kept_apart_from_the_shell_runs(backend: str) -> None:
    """The session scenarios are in "scenarios", not "runs"; every session file they list was
    copied under harness/evidence/<backend>/<scenario>/ (a SQLite store as the database copy and
    its JSON lines); a snapshot scenario that ran says whether its copy shows the running call
    (a CLI that had written no session file yet shows it not, with the finding)."""
    evidence = EVIDENCE[backend]
    assert [(r["command"], r["repeat"]) for r in evidence["runs"]] == list(scenarios.SCENARIOS)
    assert set(evidence["scenarios"]) == set(evidence["scenario_sessions"]) == \
        set(scenarios.SESSION_SCENARIOS)
    for name, files in evidence["scenario_sessions"].items():
        scenario = evidence["scenarios"][name]
        snapshots = any("{marker}" in arg for _, arg in scenarios.SESSION_SCENARIOS[name])
        if "skipped" in scenario:
            assert not files
            continue
        if snapshots:
            snapshot = scenario["snapshot"]
            if "skipped" in snapshot:
                assert not files, name
            elif not files:  # no session file yet while the command ran (Continue CLI 1.5.47)
                assert snapshot["running_command_logged"] is False and snapshot["finding"], name
            assert "skipped" in snapshot or isinstance(snapshot["running_command_logged"], bool)
        for rel in files:
            copy = EVIDENCE_DIR / backend / name / rel
            assert copy.is_file(), copy
            if copy.suffix == ".db":
                assert copy.stat().st_size < 1 << 20
                assert copy.with_name(copy.name + ".jsonl").is_file()


@pytest.mark.parametrize("backend", ["bash", "claude", "omp"])
def test_failing_command_recorded_by_the_backends_route(backend: str) -> None:
    """The harness judges a run by the backend's own route: the hook's records for bash_env
    backends, the session-log reader's finished calls for omp (route omp_session_log), whose
    hook records nothing."""
    from harness.__main__ import _failing_recorded

    evidence = json.loads((EVIDENCE_DIR / f"{backend}.json").read_text())
    assert _failing_recorded(evidence) is True
    first = evidence["runs"][0]
    if backend == "omp":
        assert first["records"] == []
        assert [(r["command"], r["exit"], r["failed"]) for r in first["session_records"]] == [
            ("ls /nonexistent", 2, True)]


def test_scrubbed_session_copies_and_transcripts_stay_json() -> None:
    """The harness scrubs what it keeps so that JSON stays JSON (the scrubber writes a quoted
    secret as a bare [REDACTED]): each JSON line is scrubbed value by value with its key as
    context, an unchanged line keeps its bytes, and other text is scrubbed as a whole."""
    from harness.capture import scrub_json
    from repeat_failure.rules.scrub import scrub

    token = "ghp_" + "Ab3" * 12
    lines = ['{"type":"x", "note": "unchanged \\u00e9"}',
             json.dumps({"password": "hunter" + "2hunter2", "n": 1}),
             json.dumps({"message": {"content": [{"text": f"curl -H 'Authorization: token {token}'"}]}}),
             ""]
    out = scrub_json("\n".join(lines)).split("\n")
    assert out[0] == lines[0] and out[3] == ""
    assert json.loads(out[1]) == {"password": "[REDACTED]", "n": 1}
    text = json.loads(out[2])["message"]["content"][0]["text"]
    assert token not in text and text.startswith("curl -H 'Authorization: ")
    assert scrub(lines[1]) != lines[1] and "hunter" not in out[1]
    plain = f"not json: export GITHUB_TOKEN={token}\n{{broken"
    assert scrub_json(plain) == scrub(plain)
    assert json.loads(scrub_json(json.dumps({"api_key": "k" * 20})))["api_key"] == "[REDACTED]"


def test_a_release_other_than_the_pin_writes_under_versions(tmp_path) -> None:
    """``run --release V`` (issue 26) writes ``versions/<backend>/<V>/`` of the evidence
    directory, the layout :func:`harness.evidence.versions` reads; a version that could name a
    path is refused, and ``--release`` needs exactly one backend."""
    from harness import __main__ as harness_main
    from harness import evidence as evidence_dirs

    assert evidence_dirs.release_dir(tmp_path, "codex", "0.98.0") == \
        tmp_path / "versions" / "codex" / "0.98.0"
    for bad in ("../x", "a/b", "", ".hidden", "1..2"):
        with pytest.raises(ValueError, match="not a release name"):
            evidence_dirs.release_dir(tmp_path, "codex", bad)
    with pytest.raises(SystemExit) as exc:
        harness_main.main(["run", "--release", "0.98.0"])
    assert exc.value.code == 2


def test_a_snapshot_mentions_the_running_command_only_by_its_marker_path(tmp_path: Path) -> None:
    """Codex 0.64.0's ``ghost_snapshot`` lists the work dir's untracked files, so a snapshot taken
    just after the command's ``touch`` names ``.harness-running`` while the call is not logged;
    the harness must not read that as "the running command is logged" (a CI run failed on it)."""
    marker = tmp_path / "work" / scenarios.MARKER
    dest = tmp_path / "copies"
    (dest / "s").mkdir(parents=True)
    log = dest / "s" / "rollout.jsonl"
    log.write_text(json.dumps({"type": "response_item", "payload": {
        "type": "ghost_snapshot", "ghost_commit": {
            "preexisting_untracked_files": ["notes.txt", scenarios.MARKER]}}}) + "\n")
    assert capture._mentions_command(dest, marker) is False
    call = {"type": "function_call", "arguments": json.dumps(
        {"command": f"touch {marker} && sleep 8"})}
    log.write_text(log.read_text() + json.dumps({"payload": call}) + "\n")
    assert capture._mentions_command(dest, marker) is True
    log.write_text(str(marker).replace("/", "\\/"))
    assert capture._mentions_command(dest, marker) is True
