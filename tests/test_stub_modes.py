"""The stub provider's reply modes (``Script.reply``) over real HTTP on 127.0.0.1, on each of the
four wire APIs, streamed and not: ``"text"`` (the closing text), ``"empty"`` (a well-formed
completion with no content and no tool call) and ``"error"`` (the provider's documented HTTP 400
error body); and the shape of the evidence the harness's turn-verdict scenarios, which use those
modes with the real CLIs, wrote (``"verdict_scenarios"`` in ``harness/evidence/<backend>.json``)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from harness.evidence import primary
from harness import run as scenarios
from harness.backends import BACKENDS
from harness.stub import ERROR_MESSAGE, FINAL_TEXT, Script, Step, StubServer

SHELL = {"type": "object", "properties": {"command": {"type": "string"}}}
GEMINI_SHELL = {"type": "object", "properties": {"command": {"type": "string"}}}

#: One request per API that offers a shell tool and holds no tool result: (path, body).
ANTHROPIC = ("/v1/messages", {
    "model": "claude-stub", "max_tokens": 100, "messages": [{"role": "user", "content": "go"}],
    "tools": [{"name": "Bash", "input_schema": SHELL}]})
RESPONSES = ("/v1/responses", {
    "model": "stub-model", "input": [{"role": "user", "content": "go"}],
    "tools": [{"type": "function", "name": "exec_command", "parameters": {
        "type": "object", "properties": {"cmd": {"type": "string"}}}}]})
CHAT = ("/v1/chat/completions", {
    "model": "stub-model", "messages": [{"role": "user", "content": "go"}],
    "tools": [{"type": "function", "function": {"name": "bash", "parameters": SHELL}}]})
GEMINI = ("/v1beta/models/stub-model:generateContent", {
    "contents": [{"role": "user", "parts": [{"text": "go"}]}],
    "tools": [{"functionDeclarations": [{"name": "run_shell_command",
                                         "parameters": GEMINI_SHELL}]}]})
GEMINI_STREAM = ("/v1beta/models/stub-model:streamGenerateContent?alt=sse", GEMINI[1])


def post(url: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
    """POST ``body`` as JSON; the status, the Content-Type and the raw reply body (an HTTP
    error's too)."""
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.headers["Content-Type"], reply.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.headers["Content-Type"], exc.read()


def sse(raw: bytes) -> list[tuple[str | None, Any]]:
    """The events of an SSE body: ``(event name or None, data parsed as JSON, or the text)``."""
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        name, data = None, ""
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = line[len("data: "):]
        events.append((name, data if data == "[DONE]" else json.loads(data)))
    return events


def ok_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    status, kind, raw = post(url, body)
    assert (status, kind) == (200, "application/json")
    return json.loads(raw)


def ok_sse(url: str, body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    status, kind, raw = post(url, body)
    assert (status, kind) == (200, "text/event-stream")
    return sse(raw)


# -- "error" ----------------------------------------------------------------------------------

ANTHROPIC_ERROR = {"type": "error",
                   "error": {"type": "invalid_request_error", "message": ERROR_MESSAGE}}
OPENAI_ERROR = {"error": {"message": ERROR_MESSAGE, "type": "invalid_request_error",
                          "param": None, "code": None}}
GEMINI_ERROR = {"error": {"code": 400, "message": ERROR_MESSAGE, "status": "INVALID_ARGUMENT"}}


@pytest.mark.parametrize("request_, stream, expected", [
    (ANTHROPIC, False, ANTHROPIC_ERROR), (ANTHROPIC, True, ANTHROPIC_ERROR),
    (("/v1/messages/count_tokens", ANTHROPIC[1]), False, ANTHROPIC_ERROR),
    (RESPONSES, False, OPENAI_ERROR), (RESPONSES, True, OPENAI_ERROR),
    (CHAT, False, OPENAI_ERROR), (CHAT, True, OPENAI_ERROR),
    (GEMINI, False, GEMINI_ERROR), (GEMINI_STREAM, False, GEMINI_ERROR),
], ids=["anthropic", "anthropic-stream", "anthropic-count-tokens", "responses",
        "responses-stream", "chat", "chat-stream", "gemini", "gemini-stream"])
def test_error_reply_is_the_providers_400(request_: tuple[str, dict], stream: bool,
                                          expected: dict) -> None:
    """Every model request, streamed or not, with or without tools, gets HTTP 400 with the
    provider's documented error body, exactly; the request is still logged and no tool call is
    asked for."""
    path, body = request_
    body = {**body, "stream": True} if stream else body
    with StubServer(Script((Step("shell", "echo hi"),), reply="error")) as stub:
        status, kind, raw = post(stub.url + path, body)
        no_tools = post(stub.url + path, {k: v for k, v in body.items() if k != "tools"})
        requests, calls = stub.requests, stub.calls
    assert (status, kind) == (400, "application/json")
    assert json.loads(raw) == expected
    assert no_tools == (400, "application/json", raw)
    assert [r["path"] for r in requests] == ["POST " + path.split("?")[0]] * 2
    assert calls == []


def test_error_reply_leaves_model_lists_and_unknown_paths_alone() -> None:
    """A model list still answers 200 and an unknown path 404 in the ``"error"`` mode."""
    with StubServer(Script((), reply="error")) as stub:
        with urllib.request.urlopen(f"{stub.url}/v1/models", timeout=10) as reply:
            assert reply.status == 200
            assert json.loads(reply.read())["data"][0]["id"] == "stub-model"
        status, _, raw = post(f"{stub.url}/v1/nothing", {})
    assert status == 404 and json.loads(raw)["error"]["type"] == "not_found"


# -- "empty" ----------------------------------------------------------------------------------

USAGE_ANTHROPIC = {"input_tokens": 10, "output_tokens": 5}
USAGE_OPENAI = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
USAGE_GEMINI = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}


def test_empty_anthropic() -> None:
    """Anthropic Messages: ``content: []``, ``stop_reason: end_turn``, usage; streamed, no
    content block between ``message_start`` and ``message_delta``."""
    with StubServer(Script((), reply="empty")) as stub:
        message = ok_json(stub.url + ANTHROPIC[0], ANTHROPIC[1])
        events = ok_sse(stub.url + ANTHROPIC[0], {**ANTHROPIC[1], "stream": True})
    assert {k: message[k] for k in ("type", "role", "content", "stop_reason", "stop_sequence",
                                    "usage")} == {
        "type": "message", "role": "assistant", "content": [], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": USAGE_ANTHROPIC}
    assert [name for name, _ in events] == ["message_start", "message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in events)
    assert events[0][1]["message"]["content"] == []
    assert events[1][1]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert events[1][1]["usage"] == {"output_tokens": 5}


def test_empty_responses() -> None:
    """OpenAI Responses: a ``completed`` response with no output item and usage; streamed,
    ``response.created`` then ``response.completed`` carrying that response."""
    with StubServer(Script((), reply="empty")) as stub:
        response = ok_json(stub.url + RESPONSES[0], RESPONSES[1])
        events = ok_sse(stub.url + RESPONSES[0], {**RESPONSES[1], "stream": True})
    assert (response["object"], response["status"], response["output"]) == (
        "response", "completed", [])
    assert response["usage"]["output_tokens"] == 5
    assert [name for name, _ in events] == ["response.created", "response.completed"]
    assert all(name == data["type"] for name, data in events)
    assert [data["sequence_number"] for _, data in events] == [0, 1]
    assert events[0][1]["response"]["status"] == "in_progress"
    done = events[1][1]["response"]
    assert (done["status"], done["output"], done["id"]) == (
        "completed", [], events[0][1]["response"]["id"])
    assert done["usage"] == response["usage"] | {}  # same shape as the JSON reply


def test_empty_chat() -> None:
    """Chat Completions: ``content: ""``, no ``tool_calls``, ``finish_reason: stop``, usage;
    streamed, a ``""`` content delta, then the finish chunk with usage, then ``[DONE]``."""
    with StubServer(Script((), reply="empty")) as stub:
        completion = ok_json(stub.url + CHAT[0], CHAT[1])
        events = ok_sse(stub.url + CHAT[0], {**CHAT[1], "stream": True})
    assert completion["object"] == "chat.completion" and completion["usage"] == USAGE_OPENAI
    assert completion["choices"] == [{"index": 0, "message": {"role": "assistant", "content": ""},
                                      "finish_reason": "stop"}]
    first, last, done = events
    assert first[1]["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                    "finish_reason": None}]
    assert last[1]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert last[1]["usage"] == USAGE_OPENAI
    assert done == (None, "[DONE]")


@pytest.mark.parametrize("request_", [GEMINI, GEMINI_STREAM], ids=["json", "stream"])
def test_empty_gemini(request_: tuple[str, dict]) -> None:
    """Gemini: one candidate with ``parts: []`` and ``finishReason: STOP``, usage metadata."""
    path, body = request_
    with StubServer(Script((), reply="empty")) as stub:
        if "alt=sse" in path:
            ((name, reply),) = ok_sse(stub.url + path, body)
            assert name is None
        else:
            reply = ok_json(stub.url + path, body)
    assert reply["candidates"] == [{"content": {"role": "model", "parts": []},
                                    "finishReason": "STOP", "index": 0}]
    assert reply["usageMetadata"] == USAGE_GEMINI


def test_empty_runs_the_steps_first_and_spares_requests_without_tools() -> None:
    """The ``"empty"`` reply replaces only the closing text: a script's tool call still comes
    first, and a request offering no tools (a title, a router) still gets its text."""
    with StubServer(Script((Step("shell", "echo hi"),), reply="empty")) as stub:
        first = ok_json(stub.url + CHAT[0], CHAT[1])
        after = ok_json(stub.url + CHAT[0], {**CHAT[1], "messages": CHAT[1]["messages"] + [
            first["choices"][0]["message"], {"role": "tool", "content": "hi"}]})
        title = ok_json(stub.url + CHAT[0], {"model": "m", "messages": CHAT[1]["messages"]})
        anthropic_title = ok_json(stub.url + ANTHROPIC[0],
                                  {k: v for k, v in ANTHROPIC[1].items() if k != "tools"})
    assert first["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
    assert after["choices"][0]["message"] == {"role": "assistant", "content": ""}
    assert title["choices"][0]["message"]["content"] == FINAL_TEXT
    assert anthropic_title["content"] == [{"type": "text", "text": FINAL_TEXT}]


# -- "text" (the default) ---------------------------------------------------------------------

def test_text_reply_is_the_default_on_every_api() -> None:
    """Without a ``reply``, each API's closing reply is :data:`FINAL_TEXT`."""
    assert Script(()).reply == "text"
    with StubServer(Script(())) as stub:
        anthropic = ok_json(stub.url + ANTHROPIC[0], ANTHROPIC[1])
        responses = ok_json(stub.url + RESPONSES[0], RESPONSES[1])
        chat = ok_json(stub.url + CHAT[0], CHAT[1])
        gemini = ok_json(stub.url + GEMINI[0], GEMINI[1])
    assert anthropic["content"] == [{"type": "text", "text": FINAL_TEXT}]
    assert responses["output"][0]["content"][0]["text"] == FINAL_TEXT
    assert chat["choices"][0]["message"]["content"] == FINAL_TEXT
    assert gemini["candidates"][0]["content"]["parts"] == [{"text": FINAL_TEXT}]


def test_unknown_reply_is_refused() -> None:
    with pytest.raises(ValueError, match="reply must be one of"):
        Script((), reply="silence")


# -- the harness's verdict scenarios: the evidence they wrote -----------------------------------

EVIDENCE_DIR = primary()
VERDICT_EVIDENCE = {
    name: json.loads((EVIDENCE_DIR / f"{name}.json").read_text())
    for name in BACKENDS if (EVIDENCE_DIR / f"{name}.json").exists()}


def test_exit_status_in_the_shells_convention() -> None:
    """A CLI ended by signal N (Popen's ``-N``) is reported as ``128 + N`` with the signal."""
    assert scenarios._exit_status(-15) == (143, 15)
    assert scenarios._exit_status(143) == (143, None)
    assert scenarios._exit_status(0) == (0, None)
    assert scenarios._exit_status(None) == (None, None)


#: Verdict scenarios after which a CLI had written no session file: Continue CLI 1.5.47 saves
#: its session only when a turn ends normally (not on an API error, not when killed).
NO_SESSION_FILE = {("continue", "error"), ("continue", "killed")}


@pytest.mark.parametrize("backend", sorted(VERDICT_EVIDENCE))
def test_verdict_scenarios_evidence(backend: str) -> None:
    """Every verdict scenario of a backend with session files ran with its reply mode; what it
    lists was copied under harness/evidence/<backend>/verdict/<scenario>/, with the scrubbed
    stream-JSON transcript for a backend that has a transcript invocation; the killed scenario
    was signalled while its command ran."""
    evidence = VERDICT_EVIDENCE[backend]
    verdicts = evidence.get("verdict_scenarios")
    assert verdicts is not None, "harness evidence from before the verdict scenarios: re-run it"
    assert set(verdicts) == set(scenarios.VERDICT_SCENARIOS)
    spec = BACKENDS[backend]
    for name, run in verdicts.items():
        if not spec.session_globs:
            assert "skipped" in run
            continue
        scenario = scenarios.VERDICT_SCENARIOS[name]
        assert run["reply"] == scenario.reply
        assert isinstance(run["cli_exit"], int), (name, run["cli_exit"])
        assert run["cli_signal"] is None or run["cli_exit"] == 128 + run["cli_signal"]
        assert any(p.startswith("POST ") for p in run["stub_requests"]), name
        where = EVIDENCE_DIR / backend / "verdict" / name
        assert bool(run["session_files"]) != ((backend, name) in NO_SESSION_FILE), name
        for rel in run["session_files"]:
            copy = where / rel
            assert copy.is_file(), copy
            if copy.suffix == ".db":
                assert copy.with_name(copy.name + ".jsonl").is_file()
        if spec.transcript_argv is not None:
            lines = (where / "transcript.jsonl").read_text().splitlines()
            assert len(lines) == run["transcript"]["lines"] > 0
            assert lines[-1] == run["transcript"]["last_line"]
        else:
            assert "transcript" not in run and not (where / "transcript.jsonl").exists()
        if scenario.kill:
            assert "skipped" not in run["kill"], run["kill"]
            assert run["kill"]["sigterm_at_s"] <= run["seconds"]
        if scenario.reply == "error":
            assert not run["tool_calls"]
