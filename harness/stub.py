"""Stub model providers on 127.0.0.1 that script one agent turn.

One HTTP server answers the four wire APIs the agent CLIs speak: Anthropic Messages
(``POST /v1/messages``, SSE or JSON), OpenAI Responses (``POST /v1/responses``, SSE), OpenAI Chat
Completions (``POST /v1/chat/completions``, SSE or JSON) and Gemini
(``POST /v1beta/models/<m>:streamGenerateContent`` / ``:generateContent``).

The script is a list of steps (tool calls) and stateless, read from each request: a conversation
holding ``n`` tool results gets step ``n`` (``n`` counts from 0), and once every step has its result
the reply ends the turn with text. A ``shell`` step asks the CLI's shell tool to run a command (a
tool named like a shell tool, an argument named ``command`` or ``cmd``); a ``file`` step asks its
file-read tool to read a file (a tool named like a read tool, a path argument such as
``file_path``), or, when the request offers no read tool but Codex's freeform ``apply_patch`` edit
tool, asks that to append a line to the file. The tools and their arguments come from the tools the
request offers; a request whose tools do not include the step's kind gets the closing text. A
request that offers no tools (titles, routers, summaries) gets plain text (JSON for a request that
asks for JSON), except a Chat Completions request whose system prompt asks for shell commands in
fenced ```bash blocks (aider, which has no shell tool): it gets such a block with the script's
shell commands, one per line. Every request is logged, and so is every tool call the stub asks
for; an unknown path answers 404 with a JSON error naming the known ones.

The script's ``reply`` says how the model answers (:data:`REPLIES`), the same on all four APIs:

- ``"text"`` (the default): as above.
- ``"empty"``: where a request that offers tools would get the closing text, it gets a normal,
  well-formed completion with no content and no tool call, and usage as usual: Anthropic
  ``"content": []`` with ``stop_reason`` ``end_turn`` (streamed: ``message_start``,
  ``message_delta``, ``message_stop`` and no content block); Chat Completions ``"content": ""``
  with ``finish_reason`` ``stop``; Responses a ``completed`` response with ``"output": []`` (no
  output item; streamed: ``response.created`` then ``response.completed``); Gemini a candidate
  with ``"parts": []`` and ``finishReason`` ``STOP``. Tool steps still run first, and requests
  that offer no tools (titles, routers) still get their text.
- ``"error"``: every model request (``/messages`` and ``/messages/count_tokens``,
  ``/responses``, ``/chat/completions``, ``:generateContent`` / ``:streamGenerateContent``,
  stream or not) gets HTTP 400 with the provider's documented error body and
  :data:`ERROR_MESSAGE`: Anthropic ``{"type": "error", "error": {"type":
  "invalid_request_error", "message": ...}}``; OpenAI (Responses and Chat Completions)
  ``{"error": {"message": ..., "type": "invalid_request_error", "param": null, "code": null}}``;
  Gemini ``{"error": {"code": 400, "message": ..., "status": "INVALID_ARGUMENT"}}``. 400, not
  429 or 5xx, which CLIs retry with long backoffs. ``GET .../models`` still answers.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.stub_wire import (_anthropic_results, _anthropic_tools, _api_of,
                               _asks_for_fenced_shell, _chat_results, _chat_tools,
                               _gemini_results, _gemini_tools, _responses_results,
                               _responses_tools)

#: Tool names, tried in this order, and the parameter that takes the command (shell) or the
#: path (file): Claude Code's Bash and Read, Codex's exec_command (cmd), Gemini CLI's
#: run_shell_command and read_file, Copilot's bash and view (path), opencode's and Kilo's bash and
#: read (filePath), pi's and omp's bash and read (path); Cline's run_commands (``commands``: a
#: list of command strings, run side by side, so the step's command is its only item); Factory
#: Droid's Execute (command).
TOOL_NAMES = {
    "shell": ("Bash", "bash", "exec_command", "shell", "run_shell_command", "shell_command",
              "terminal", "execute_command", "run_commands", "Execute"),
    "file": ("Read", "read_file", "read", "view", "View", "ReadFile"),
}
TOOL_ARGS = {"shell": ("command", "cmd", "commands"),
             "file": ("file_path", "filePath", "absolute_path", "path")}
#: Codex's freeform edit tool (a Responses ``custom`` tool whose input is a patch), the file tool
#: of a CLI that offers no read tool.
PATCH_TOOL = "apply_patch"
PATCH_LINE = "appended by the harness through apply_patch"
FINAL_TEXT = "Done: the command ran."
#: The script's possible ``reply`` values (see the module docstring).
REPLIES = ("text", "empty", "error")
#: What the stub puts in a shell or file tool's other required string parameters
#: (:attr:`ToolChoice.required_text`).
REQUIRED_TEXT = "harness step"
#: The message of every error the ``"error"`` reply sends.
ERROR_MESSAGE = "harness: stub refused the request"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Step:
    """One tool call the stub asks for: ``kind`` ``"shell"`` runs ``arg`` (a command) with the
    shell tool; ``"file"`` reads ``arg`` (an absolute path) with the file tool."""

    kind: str
    arg: str


@dataclass(frozen=True)
class Script:
    """What the stub makes the CLI do: the tool calls of ``steps`` in order, then finish.

    ``reply`` (one of :data:`REPLIES`) is how the model answers: ``"text"`` (closing text),
    ``"empty"`` (an empty completion where the closing text would be) or ``"error"`` (every
    model request refused with HTTP 400)."""

    steps: tuple[Step, ...]
    reply: str = "text"

    def __post_init__(self) -> None:
        if self.reply not in REPLIES:
            raise ValueError(f"reply must be one of {REPLIES}, not {self.reply!r}")

    @classmethod
    def shell(cls, *commands: str, reply: str = "text") -> "Script":
        """A script that runs ``commands`` with the shell tool, one call each."""
        return cls(tuple(Step("shell", c) for c in commands), reply)

    def step(self, results: int) -> Step | None:
        """The step for a conversation holding ``results`` tool results; None when done."""
        return self.steps[results] if results < len(self.steps) else None


@dataclass
class ToolChoice:
    """The tool found in a request for a step: its name and how to pass the step's argument
    (``arg`` names the parameter; ``as_list``: a command as an argv list; ``freeform``: Codex's
    ``apply_patch``, whose whole input is a patch text; ``one_of_many``: a list of whole commands,
    Cline's ``run_commands``, given the step's command as its only item; ``fixed``: other
    parameters the tool's schema requires, passed as given: a required boolean as ``false``,
    e.g. Qwen Code 0.5.0's ``run_shell_command`` ``is_background``, which it refuses the call
    without: "params must have required property 'is_background'")."""

    name: str
    arg: str = ""
    as_list: bool = False
    freeform: bool = False
    one_of_many: bool = False
    #: The tool's other required free-text parameters (its schema's ``required``, of type
    #: ``string`` without an ``enum``), each given
    #: :data:`REQUIRED_TEXT`: Copilot CLI 1.0.11's ``bash`` refuses a call without
    #: ``description`` ("description": Required); 1.0.102's does not require it.
    required_text: tuple[str, ...] = ()
    #: Other required parameters given fixed values: each required boolean ``false``
    #: (Qwen Code 0.5.0-0.10.1 refuse a shell call without ``is_background``).
    fixed: dict[str, Any] = field(default_factory=dict)

    def arguments(self, value: str) -> Any:
        """The tool call's input for the step argument ``value``: an arguments object, or for a
        freeform tool the patch that appends :data:`PATCH_LINE` to the file ``value``."""
        if self.freeform:
            return (f"*** Begin Patch\n*** Update File: {value}\n@@\n+{PATCH_LINE}\n"
                    "*** End Patch\n")
        filled = {name: REQUIRED_TEXT for name in self.required_text}
        if self.one_of_many:
            return {self.arg: [value], **filled, **self.fixed}
        return {self.arg: ["bash", "-lc", value] if self.as_list else value, **filled,
                **self.fixed}

def _required_booleans(schema: dict[str, Any], arg: str) -> dict[str, Any]:
    """``{name: False}`` for each parameter besides ``arg`` that ``schema`` (a JSON Schema
    object) lists in ``required`` with ``type: boolean``; other required parameters are left
    out (none seen)."""
    props = schema.get("properties") or {}
    required = schema.get("required") or []
    return {k: False for k in required if isinstance(k, str) and k != arg
            and isinstance(props.get(k), dict) and props[k].get("type") == "boolean"}


def pick_tool(tools: list[dict[str, Any]], kind: str) -> ToolChoice | None:
    """The tool for a ``kind`` step (``shell`` or ``file``) among ``tools`` (each ``{"name",
    "schema"}``, ``"freeform": True`` for a Responses custom tool), or None."""
    by_name = {t["name"]: t for t in tools}
    for name in TOOL_NAMES[kind]:
        tool = by_name.get(name)
        if tool is None or tool.get("freeform"):
            continue
        schema = tool.get("schema") or {}
        props = schema.get("properties") or {}
        for arg in TOOL_ARGS[kind]:
            if arg in props:
                is_array = props[arg].get("type") == "array"
                required = schema.get("required") if isinstance(schema.get("required"), list) else []
                text = tuple(r for r in required if r != arg and isinstance(props.get(r), dict)
                             and props[r].get("type") == "string" and "enum" not in props[r])
                fixed = _required_booleans(schema, arg)
                if arg == "commands":
                    return ToolChoice(name, arg, one_of_many=is_array, required_text=text,
                                      fixed=fixed)
                return ToolChoice(name, arg, is_array, required_text=text, fixed=fixed)
    if kind == "file" and by_name.get(PATCH_TOOL, {}).get("freeform"):
        return ToolChoice(PATCH_TOOL, freeform=True)
    return None


@dataclass
class Stub:
    """The server state: the script, a log of every request (path, body, time), of every tool
    call the stub asked for (``{"t", "name", "input"}``) and the names of the tools offered."""

    script: Script
    requests: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    offered: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def log(self, path: str, body: Any) -> None:
        with self.lock:
            self.requests.append({"t": time.time(), "path": path, "body": body})

    def empty(self, tools: list[dict[str, Any]]) -> bool:
        """Whether a request offering ``tools`` that gets no tool call is answered with an empty
        completion (the ``"empty"`` reply; a request that offers no tools gets its text)."""
        return self.script.reply == "empty" and bool(tools)

    def tool_call(self, tools: list[dict[str, Any]], results: int) -> tuple[ToolChoice, Any] | None:
        """The tool call to answer a request offering ``tools`` whose conversation holds
        ``results`` tool results: the tool and its input (logged), or None to end the turn."""
        with self.lock:
            self.offered.update(t["name"] for t in tools if t["name"])
        step = self.script.step(results)
        tool = pick_tool(tools, step.kind) if step else None
        if tool is None:
            return None
        value = tool.arguments(step.arg)
        with self.lock:
            self.calls.append({"t": time.time(), "name": tool.name, "input": value})
        return tool, value


def error_body(api: str) -> dict[str, Any]:
    """The provider's documented HTTP 400 error body for ``api`` (``anthropic``, ``responses``,
    ``chat`` or ``gemini``), with :data:`ERROR_MESSAGE`: what the ``"error"`` reply sends."""
    if api == "anthropic":
        return {"type": "error",
                "error": {"type": "invalid_request_error", "message": ERROR_MESSAGE}}
    if api == "gemini":
        return {"error": {"code": 400, "message": ERROR_MESSAGE, "status": "INVALID_ARGUMENT"}}
    return {"error": {"message": ERROR_MESSAGE, "type": "invalid_request_error", "param": None,
                      "code": None}}



class _Handler(BaseHTTPRequestHandler):
    stub: Stub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str | None, Any]]) -> None:
        chunks = []
        for name, data in events:
            text = data if isinstance(data, str) else json.dumps(data)
            chunks.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
        payload = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        self.stub.log("GET " + path, None)
        if path.endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "stub-model", "object": "model"}],
                             "models": [{"name": "models/stub-model"}]})
        else:
            self._unknown()

    def do_HEAD(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _unknown(self) -> None:
        self._json(404, {"error": {"type": "not_found", "message": (
            f"stub provider: unknown path {self.path}; known: POST /v1/messages, /v1/responses, "
            "/v1/chat/completions, /v1beta/models/<m>:streamGenerateContent|generateContent")}})

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        body = self._body()
        self.stub.log("POST " + path, body)
        api = _api_of(path)
        if api is None:
            self._unknown()
        elif self.stub.script.reply == "error":
            self._json(400, error_body(api))
        elif path.endswith("/messages/count_tokens"):
            self._json(200, {"input_tokens": 10})
        elif api == "anthropic":
            self._anthropic(body)
        elif api == "responses":
            self._responses(body)
        elif api == "chat":
            self._chat(body)
        else:
            self._gemini(body, stream=":streamGenerateContent" in path)

    # Anthropic Messages ---------------------------------------------------------------------

    def _anthropic(self, body: dict) -> None:
        tools = _anthropic_tools(body)
        call = self.stub.tool_call(tools, _anthropic_results(body))
        msg_id = f"msg_stub{next(_ids)}"
        model = body.get("model", "stub-model")
        usage = {"input_tokens": 10, "output_tokens": 5}
        block: dict[str, Any] | None
        if call:
            tool, args = call
            block = {"type": "tool_use", "id": f"toolu_stub{next(_ids)}", "name": tool.name,
                     "input": args}
            stop = "tool_use"
        elif self.stub.empty(tools):
            block, stop = None, "end_turn"
        else:
            block = {"type": "text", "text": FINAL_TEXT}
            stop = "end_turn"
        if not body.get("stream"):
            self._json(200, {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                             "content": [block] if block else [], "stop_reason": stop,
                             "stop_sequence": None, "usage": usage})
            return
        start = {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 0}}}
        if call:
            events = [("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {**block, "input": {}}}),
                      ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                          "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})]
        elif block is None:
            events = []
        else:
            events = [("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}}),
                      ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": FINAL_TEXT}})]
        if events:
            events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        self._sse([("message_start", start), *events,
                   ("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": 5}}),
                   ("message_stop", {"type": "message_stop"})])

    # OpenAI Responses -------------------------------------------------------------------------

    def _responses(self, body: dict) -> None:
        tools = _responses_tools(body)
        call = self.stub.tool_call(tools, _responses_results(body))
        resp_id = f"resp_stub{next(_ids)}"
        model = body.get("model", "stub-model")
        item: dict[str, Any] | None
        if call:
            tool, value = call
            item = {"status": "completed", "call_id": f"call_stub{next(_ids)}", "name": tool.name}
            if tool.freeform:
                item.update(type="custom_tool_call", id=f"ctc_stub{next(_ids)}", input=value)
            else:
                item.update(type="function_call", id=f"fc_stub{next(_ids)}",
                            arguments=json.dumps(value))
        elif self.stub.empty(tools):
            item = None  # a completed response with no output item
        else:
            item = {"type": "message", "id": f"msg_stub{next(_ids)}", "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}]}
        response = {"id": resp_id, "object": "response", "created_at": int(time.time()),
                    "status": "completed", "model": model, "output": [item] if item else [],
                    "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                              "input_tokens_details": {"cached_tokens": 0},
                              "output_tokens_details": {"reasoning_tokens": 0}}}
        if not body.get("stream"):
            self._json(200, response)
            return
        created = ("response.created", {"type": "response.created", "sequence_number": 0,
                                        "response": {**response, "status": "in_progress",
                                                     "output": []}})
        if item is None:
            self._sse([created, ("response.completed", {"type": "response.completed",
                                                        "sequence_number": 1,
                                                        "response": response})])
            return
        pending = {**item, "status": "in_progress"}
        if item["type"] == "function_call":
            pending["arguments"] = ""
        elif item["type"] == "custom_tool_call":
            pending["input"] = ""
        events: list[tuple[str | None, Any]] = [
            created,
            ("response.output_item.added", {"type": "response.output_item.added",
                                            "sequence_number": 1, "output_index": 0,
                                            "item": pending})]
        if item["type"] == "function_call":
            events.append(("response.function_call_arguments.done", {
                "type": "response.function_call_arguments.done", "sequence_number": 2,
                "item_id": item["id"], "output_index": 0, "arguments": item["arguments"]}))
        elif item["type"] == "custom_tool_call":
            events.append(("response.custom_tool_call_input.done", {
                "type": "response.custom_tool_call_input.done", "sequence_number": 2,
                "item_id": item["id"], "output_index": 0, "input": item["input"]}))
        else:
            events.append(("response.output_text.delta", {
                "type": "response.output_text.delta", "sequence_number": 2, "item_id": item["id"],
                "output_index": 0, "content_index": 0, "delta": FINAL_TEXT}))
        events += [("response.output_item.done", {"type": "response.output_item.done",
                                                  "sequence_number": 3, "output_index": 0,
                                                  "item": item}),
                   ("response.completed", {"type": "response.completed", "sequence_number": 4,
                                           "response": response})]
        self._sse(events)

    # OpenAI Chat Completions ------------------------------------------------------------------

    def _chat(self, body: dict) -> None:
        tools = _chat_tools(body)
        call = self.stub.tool_call(tools, _chat_results(body))
        chat_id = f"chatcmpl-stub{next(_ids)}"
        model = body.get("model", "stub-model")
        created = int(time.time())
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if call:
            tool, args = call
            tc = {"id": f"call_stub{next(_ids)}", "type": "function",
                  "function": {"name": tool.name, "arguments": json.dumps(args)}}
            message = {"role": "assistant", "content": None, "tool_calls": [tc]}
            finish = "tool_calls"
        elif not body.get("tools") and _asks_for_fenced_shell(body):
            # A CLI with no shell tool that runs the commands it finds in fenced bash blocks of
            # the reply (aider): one block, the script's shell commands one per line.
            commands = "".join(f"{s.arg}\n" for s in self.stub.script.steps if s.kind == "shell")
            message = {"role": "assistant", "content": f"```bash\n{commands}```\n"}
            finish = "stop"
        elif self.stub.empty(tools):
            message = {"role": "assistant", "content": ""}
            finish = "stop"
        else:
            message = {"role": "assistant", "content": FINAL_TEXT}
            finish = "stop"
        if not body.get("stream"):
            self._json(200, {"id": chat_id, "object": "chat.completion", "created": created,
                             "model": model, "usage": usage,
                             "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
            return
        base = {"id": chat_id, "object": "chat.completion.chunk", "created": created, "model": model}
        if call:
            delta = {"role": "assistant", "content": None,
                     "tool_calls": [{"index": 0, **message["tool_calls"][0]}]}
        else:
            delta = {"role": "assistant", "content": message["content"]}
        self._sse([(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
                   (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                           "usage": usage}),
                   (None, "[DONE]")])

    # Gemini -----------------------------------------------------------------------------------

    def _gemini(self, body: dict, stream: bool) -> None:
        def instance(schema: Any) -> Any:
            # The smallest value that fits a Gemini/JSON schema (types may be upper case).
            if not isinstance(schema, dict):
                return "stub"
            if schema.get("enum"):
                return schema["enum"][0]
            kind = str(schema.get("type") or "").lower()
            if kind == "object" or "properties" in schema:
                return {k: instance(v) for k, v in (schema.get("properties") or {}).items()}
            if kind == "array":
                return [instance(schema.get("items"))] if schema.get("minItems") else []
            if kind in ("integer", "number"):
                return schema.get("minimum", 1)
            if kind == "boolean":
                return False
            return "stub"

        tools = _gemini_tools(body)
        call = self.stub.tool_call(tools, _gemini_results(body))
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if call:
            tool, args = call
            parts = [{"functionCall": {"name": tool.name, "args": args}}]
        elif self.stub.empty(tools):
            parts = []
        elif schema:
            parts = [{"text": json.dumps(instance(schema))}]
        elif config.get("responseMimeType") == "application/json":
            parts = [{"text": json.dumps({"reasoning": "stub", "model_choice": "flash"})}]
        else:
            parts = [{"text": FINAL_TEXT}]
        reply = {"candidates": [{"content": {"role": "model", "parts": parts},
                                 "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                                   "totalTokenCount": 15},
                 "modelVersion": "stub-model"}
        if stream:
            self._sse([(None, reply)])
        else:
            self._json(200, reply)


class StubServer:
    """A stub provider on 127.0.0.1 (a free port). Use as a context manager; ``url`` is its base.

    ``script`` says which tool calls the CLI is asked to make, and how the model replies."""

    def __init__(self, script: Script) -> None:
        self.stub = Stub(script)
        handler = type("Handler", (_Handler,), {"stub": self.stub})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        # A CLI that hangs up mid-request (or probes through a proxy setting) is not an error
        # worth a traceback on the harness's output.
        self._httpd.handle_error = lambda request, address: None
        # A short poll interval: shutting down (every test's and run's end) waits for one poll.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request received so far."""
        with self.stub.lock:
            return list(self.stub.requests)

    @property
    def calls(self) -> list[dict[str, Any]]:
        """Every tool call the stub asked for so far (``{"t", "name", "input"}``)."""
        with self.stub.lock:
            return list(self.stub.calls)

    @property
    def offered(self) -> set[str]:
        """The names of every tool the requests so far offered."""
        with self.stub.lock:
            return set(self.stub.offered)

    def __enter__(self) -> "StubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
