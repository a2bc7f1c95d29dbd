"""What a model request says, per wire API: the tools it offers, the tool results it holds, and
which API a path speaks.

For each of the four APIs the stub answers (:mod:`harness.stub`: Anthropic Messages, OpenAI
Responses, OpenAI Chat Completions, Gemini): ``_<api>_tools(body)`` lists the offered tools as
``{"name", "schema"}`` (``"freeform": True`` for a Responses custom tool) and
``_<api>_results(body)`` counts the tool results in the conversation (the step the script is at);
:func:`_api_of` names the API of a POST path. Pure functions over the parsed JSON body.
"""

from __future__ import annotations



def _anthropic_tools(body: dict) -> list[dict]:
    return [{"name": t.get("name"), "schema": t.get("input_schema")} for t in body.get("tools") or []]


def _anthropic_results(body: dict) -> int:
    return sum(1 for m in body.get("messages") or [] if isinstance(m.get("content"), list)
               for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result")


def _responses_tools(body: dict) -> list[dict]:
    out = []
    for t in body.get("tools") or []:
        if t.get("type") == "function":
            out.append({"name": t.get("name"), "schema": t.get("parameters")})
        elif t.get("type") == "custom":
            out.append({"name": t.get("name"), "schema": None, "freeform": True})
    return out


def _responses_results(body: dict) -> int:
    items = body.get("input") if isinstance(body.get("input"), list) else []
    return sum(1 for i in items if isinstance(i, dict)
               and i.get("type") in ("function_call_output", "custom_tool_call_output",
                                     "local_shell_call_output"))


def _chat_tools(body: dict) -> list[dict]:
    return [{"name": (t.get("function") or {}).get("name"),
             "schema": (t.get("function") or {}).get("parameters")} for t in body.get("tools") or []]


def _chat_results(body: dict) -> int:
    return sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")


def _asks_for_fenced_shell(body: dict) -> bool:
    """A request whose system prompt asks for shell commands in fenced ```bash blocks (aider's
    wording: "suggest any shell commands ... in ```bash blocks")."""
    return any(m.get("role") == "system" and isinstance(m.get("content"), str)
               and "in ```bash blocks" in m["content"] for m in body.get("messages") or [])


def _gemini_tools(body: dict) -> list[dict]:
    out = []
    for t in body.get("tools") or []:
        for f in t.get("functionDeclarations") or []:
            out.append({"name": f.get("name"),
                        "schema": f.get("parameters") or f.get("parametersJsonSchema")})
    return out


def _gemini_results(body: dict) -> int:
    return sum(1 for c in body.get("contents") or [] for p in c.get("parts") or []
               if isinstance(p, dict) and "functionResponse" in p)


def _api_of(path: str) -> str | None:
    """The wire API a POST to ``path`` speaks, or None for an unknown path."""
    if path.endswith(("/messages", "/messages/count_tokens")):
        return "anthropic"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/chat/completions"):
        return "chat"
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return "gemini"
    return None
