"""Oh My Pi (omp): its session-log reader, which is omp's record route.

omp 18.2.3 (``harness/evidence/omp.json``) runs its ``bash`` tool's commands in an embedded
in-process shell, never in a real bash, so the neutral route records nothing for it
(``tests/test_backend_omp.py``). Its session log does carry each call's command and exit code,
so :class:`OmpSessionReader` sets ``route_records``: its ``shell_end`` events are omp's records.

The log is pi's format (:mod:`repeat_failure.backends.pi`) with more entry types, as the harness's
real file shows: ``~/.omp/agent/sessions/<cwd-slug>/<ISO time>_<session id>.jsonl`` (the agent
directory moves with ``PI_CODING_AGENT_DIR``), whose first line is a fixed-width ``title`` slot
that omp rewrites in place (same length) when the session gets a title; then the ``session``
header and the entries. Per shell call::

    message    {"role": "assistant", "content": [{"type": "toolCall", "id", "name": "bash",
                "arguments": {"command": ...}}], "stopReason": "toolUse"}   the call (full command)
    custom     {"customType": "tool_execution_start", "data": {"toolCallId", "toolName",
                "args": {"command": ...}}}        execution starts (command cut to a summary)
    message    {"role": "toolResult", "toolCallId", "toolName": "bash", "isError": true,
                "details": {"exitCode": 2, ...}}  it ends; ``exitCode`` only for a non-zero exit

omp may also write ``custom_message`` entries mid-turn (the real run has a
``tool-call-loop-redirect`` after the fifth identical call) and a ``custom`` ``session_exit``
entry when the CLI exits.
"""

from __future__ import annotations

from typing import Any, ClassVar

from repeat_failure.backends import TURN_START, ReaderFormatError, SessionEvent, register_reader
from repeat_failure.backends.pi import PiSessionReader


class OmpSessionReader(PiSessionReader):
    """omp's session log (omp 18.2.3: its real file, and its ``session-entries.ts``,
    ``messages.ts`` and ``pi-ai`` ``types.ts`` for the entry types and roles the run did not
    write). Events, shapes and errors are :class:`~repeat_failure.backends.pi.PiSessionReader`'s,
    except:

    - ``shell_end``'s ``exit`` is ``details.exitCode`` (an integer; omp writes it only for a
      non-zero exit, so a success, a timeout or an abort leaves ``exit`` ``None``); a present
      ``exitCode`` that is not an integer raises ``bad_exit``;
    - a ``toolResult`` whose ``details`` say ``executed: false`` (omp's placeholder for a call it
      never ran, after an aborted or failed model reply) gives no event: no command ran;
    - omp runs the tool calls of an assistant message only when it stopped with ``toolUse`` or
      ``stop`` (omp 18.2.3 ``agent-loop.ts``); others give no event. The message ends the turn
      when it stopped with ``error`` / ``aborted``, or has no tool call and is not a ``stop``
      whose ``stopDetails.type`` is ``pause_turn`` (omp asks the model to go on then); after
      ``length`` with tool calls omp asks the model again, so the turn goes on;
    - a user message with ``steering: true`` (typed while the agent works) does not start a turn;
      a ``developer`` message with ``synthetic: true`` (an automatic continuation, which omp
      documents as starting a fresh run) does.

    ``command`` at ``shell_end`` comes from the ``toolCall`` this file's state kept; the
    ``tool_execution_start`` entry's command is a cut summary and is not used.
    """

    backend: ClassVar[str] = "omp"
    globs: ClassVar[tuple[str, ...]] = ("$PI_CODING_AGENT_DIR/sessions/*/*.jsonl",)
    env_defaults: ClassVar[dict[str, str]] = {"PI_CODING_AGENT_DIR": ".omp/agent"}
    route_records: ClassVar[bool] = True
    signal: ClassVar[str] = ("~/.omp/agent/sessions/*/*.jsonl: an assistant toolCall named bash "
                             "starts a call, its toolResult (isError, details.exitCode) ends it")

    quiet_types: ClassVar[frozenset[str]] = PiSessionReader.quiet_types | frozenset({
        "title", "title_change", "model_usage", "service_tier_change", "reset_boundary",
        "ttsr_injection", "credential_pin", "session_init", "mode_change"})
    quiet_roles: ClassVar[frozenset[str]] = PiSessionReader.quiet_roles | frozenset({
        "pythonExecution", "hookMessage", "fileMention"})
    #: Only the provider's error is the turn's terminal error: omp 18.2.3 writes no aborted
    #: reply when killed (its ``killed`` capture), so pi 1.6.0's aborted-is-an-error rule is
    #: not carried over without a capture that shows it.
    error_stops: ClassVar[frozenset[str]] = frozenset({"error"})

    def _other_role(self, role: str, message: dict[str, Any],
                    ts: float | None) -> list[SessionEvent]:
        """A ``developer`` message starts a turn when it is ``synthetic``."""
        if role == "developer":
            return [SessionEvent(TURN_START, ts)] if message.get("synthetic") is True else []
        return super()._other_role(role, message, ts)

    def _runs_calls(self, message: dict[str, Any]) -> bool:
        """omp 18.2.3 ``agent-loop.ts`` runs the tool calls of a reply that stopped with
        ``toolUse`` or ``stop`` only."""
        return message.get("stopReason") in ("toolUse", "stop")

    def _ends_turn(self, message: dict[str, Any], has_calls: bool) -> bool:
        """A reply that stopped with ``error`` / ``aborted`` ends the run; one with tool calls
        does not (they run, or after ``length`` the model is asked again); a ``stop`` whose
        ``stopDetails.type`` is ``pause_turn`` is asked to go on (omp 18.2.3
        ``agent-loop.ts``); any other reply ends the turn."""
        stop = message.get("stopReason")
        if stop in ("error", "aborted"):
            return True
        if has_calls:
            return False
        details = message.get("stopDetails")
        return not (stop == "stop" and isinstance(details, dict)
                    and details.get("type") == "pause_turn")

    def _user(self, message: dict[str, Any], ts: float | None) -> list[SessionEvent]:
        """A user message starts a turn unless it steers the running one."""
        return [] if message.get("steering") is True else [SessionEvent(TURN_START, ts)]

    def _ran(self, message: dict[str, Any]) -> bool:
        details = message.get("details")
        return not (isinstance(details, dict) and details.get("executed") is False)

    def _exit(self, message: dict[str, Any]) -> int | None:
        """``details.exitCode`` (omp 18.2.3); when absent, the result text's last line
        ``Command exited with code N`` as pi writes it (omp 14.9.9 writes ``details: {}`` and
        only that line: its real capture); ``None`` when neither is there. Raises ``bad_exit``
        when ``exitCode`` is present and not an integer, or that line's code is not one."""
        details = message.get("details")
        if not isinstance(details, dict) or details.get("exitCode") is None:
            return super()._exit(message)
        code = details["exitCode"]
        if not isinstance(code, int) or isinstance(code, bool):
            raise ReaderFormatError("bad_exit")
        return code


register_reader(OmpSessionReader())
