"""What an agent's own session log (in its home) feeds the sidecar, beside the hook's records.

A poll of the agent's :class:`~repeat_failure.sessions.tail.SessionTail` gives session events;
the log is read while the check is on (``enabled``) or turn health is (``turn_health``, issue
31), and each event goes to

- (check on) the C12 timer (:class:`~repeat_failure.sessions.activity.Activity`): shell calls seen with no
  record make the row say "not receiving data";
- (turn health on) the turn tracker (:mod:`repeat_failure.turns.verdict`): a finished turn gets a verdict, a failed
  one is logged as ``turn_failed``, and one that edited files has the agent's preview probed
  (:mod:`repeat_failure.turns.probe`, seed ard-0038);
- (check on) the record pipeline (:mod:`repeat_failure.sidecar.records`): where the session log is a route
  (C3) a finished shell call is a record; else a failed call's output digest goes to the hook's
  record of the same call (issue 19).

A session file the tail finds unrecognised (:mod:`repeat_failure.sessions.unrecognized`: the
shell tool called, no shell call read) is counted, logged once and shown on the row (issue 26).

:class:`SessionFeed` does this for one agent's poll result; the caller holds the sidecar's lock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from repeat_failure.backends import SHELL_END, session_reader
from repeat_failure.config import AgentSpec, Config
from repeat_failure.events import PREVIEW_REASON
from repeat_failure.sessions.tail import PollResult, SessionTail
from repeat_failure.sessions.unrecognized import Unrecognized
from repeat_failure.sidecar.agent import AgentState
from repeat_failure.rules.pipeline import failure_output
from repeat_failure.sidecar.records import RecordPipeline
from repeat_failure.rules.scrub import scrub
from repeat_failure.rules.terminal import label_value
from repeat_failure.turns.probe import OK as PROBE_OK, PREVIEW_ERROR, PreviewProber, ProbeResult
from repeat_failure.turns.verdict import OK, Turn

log = logging.getLogger("repeat_failure")


def session_tail(spec: AgentSpec, clock: Callable[[], float],
                 backfill_s: float) -> SessionTail | None:
    """The agent's session-log tail, or None (no reader for its backend, or no home). Files
    last changed more than ``backfill_s`` seconds before ``clock()`` (epoch seconds) start at
    their end: the agent's history from before the sidecar ran is not replayed."""
    reader = session_reader(spec.backend)
    if reader is None or spec.home is None:
        return None
    return SessionTail(reader, spec.home, env=dict(spec.session_env), backfill_s=backfill_s,
                       clock=clock)


def describe_sessions(states: list[AgentState]) -> None:
    """Log, for each agent, where its session log is looked for, warning when that cannot work
    (no home given, or a home that is not a directory the sidecar can read); then warn once per
    home that several agents share."""
    for state in states:
        _describe(state)
    homes = [s.spec.home for s in states if s.tail is not None]
    for home in {h for h in homes if homes.count(h) > 1}:
        log.warning("agents share one home: each reads the other's session logs, so one "
                    "agent's shell calls count as the other's activity; give each agent its "
                    "own home", extra={"home": home})


def _describe(state: AgentState) -> None:
    spec = state.spec
    if not state.route_available:
        log.error("no agent home given, and this backend is recorded from its own session "
                  "log: nothing is recorded and the row says not available; pass "
                  "--agent-home DIR (or `home:` in repeat_failure.agents)",
                  extra={"agent": spec.name, "backend": spec.backend})
        return
    if state.tail is None and spec.preview_url:
        log.warning("preview URL given, but the agent's session log is not read (no home, "
                    "or no session-log reader for this backend): no turn is seen, so no "
                    "preview probe runs and no turn verdict is given",
                    extra={"agent": spec.name, "backend": spec.backend})
    if state.tail is None:
        if spec.home is not None:
            log.info("no session-log reader for this backend: the home is not read",
                     extra={"agent": spec.name, "backend": spec.backend})
        elif session_reader(spec.backend) is not None:
            log.info("no agent home given: the 'not receiving data' safeguard is off "
                     "(--agent-home)", extra={"agent": spec.name, "backend": spec.backend})
        return
    home = Path(spec.home)  # type: ignore[arg-type]
    usable = home.is_dir() and os.access(home, os.R_OK | os.X_OK)
    (log.info if usable else log.warning)(
        "session log read from the agent's home" if usable else
        "agent home is not a readable directory: its session log cannot be read until it is",
        extra={"agent": spec.name, "backend": spec.backend, "home": str(home),
               "globs": [str(base / pattern) for base, pattern in state.tail.globs]})


def what_runs(config: Config, states: list[AgentState]) -> dict:
    """What runs under ``config`` (one dict, for the start-up and reload log line): ``check``
    (the repeat-failure check, ``enabled``), ``turn_health``, and the agents whose turns get
    verdicts (``turn_verdicts``: turn health on and the session log read) and whose preview is
    probed (``preview_probe``: those with a preview URL)."""
    verdicts = sorted(s.spec.name for s in states if config.turn_health and s.tail is not None)
    return {"check": config.enabled, "turn_health": config.turn_health,
            "turn_verdicts": verdicts,
            "preview_probe": sorted(s.spec.name for s in states
                                    if s.spec.name in verdicts and s.spec.preview_url)}


def log_what_runs(config: Config, states: list[AgentState]) -> None:
    """Log what runs (:func:`what_runs`) as one ``what_runs`` line saying it in words, e.g.
    ``repeat-failure check off (repeat_failure.enabled); turn verdicts on for a1; preview probe
    on for a1``; a warning naming the agents whose preview URL is not probed because
    ``turn_health`` is off (issue 31: before, nothing said why)."""
    runs = what_runs(config, states)
    words = [f"repeat-failure check {'on' if runs['check'] else 'off'} (repeat_failure.enabled)"]
    if not runs["turn_health"]:
        words.append("turn verdicts and preview probe off (repeat_failure.turn_health)")
    else:
        words.append(f"turn verdicts on for {', '.join(runs['turn_verdicts'])}"
                     if runs["turn_verdicts"] else "turn verdicts: no agent's session log is read")
        words.append(f"preview probe on for {', '.join(runs['preview_probe'])}"
                     if runs["preview_probe"] else "preview probe: no agent with a preview URL")
    log.info("; ".join(words), extra={"event": "what_runs", **runs})
    unprobed = sorted(s.spec.name for s in states if s.spec.preview_url)
    if unprobed and not config.turn_health:
        log.warning("preview URL given, but turn health is off (repeat_failure.turn_health: "
                    "false): no preview probe runs and no turn verdict is given",
                    extra={"event": "preview_probe_off", "agents": unprobed})


def log_receiving(state: AgentState, receiving: bool) -> None:
    """Log the agent's C12 state when it differs from the one last logged
    (``state.receiving_logged``, which starts True): ``not_receiving_data`` (a warning) when
    shell calls in the session log have no record, ``receiving_data`` when records arrive
    again."""
    if receiving == state.receiving_logged:
        return
    state.receiving_logged = receiving
    extra = {"event": "receiving_data" if receiving else "not_receiving_data",
             "agent": state.spec.name, "backend": state.spec.backend,
             "since": state.activity.unmatched_since}
    if receiving:
        log.info("records arrive again: check state on", extra=extra)
    else:
        log.warning("repeat-failure check not receiving data: shell-tool calls "
                    "in the session log, no record", extra=extra)


def log_unrecognized(state: AgentState, found: Unrecognized) -> None:
    """Log the one warning line of a session file found unrecognised: ``"event":
    "session_log_unrecognized"``, the agent, backend, ``reason`` (``unread_call`` or
    ``no_end``) and ``file``, its path under the home scrubbed with control characters escaped
    (a file name may hold anything); never a line of the file."""
    home = state.spec.home
    try:
        name = found.path.relative_to(home) if home is not None else found.path
    except ValueError:
        name = found.path
    text = os.fsencode(str(name)).decode("utf-8", "backslashreplace")
    log.warning("session log not recognised: the shell tool is called but no shell call is "
                "read, so this agent's commands are not seen (a CLI release with a new log "
                "format?); see docs/backend-support.md",
                extra={"event": "session_log_unrecognized", "agent": state.spec.name,
                       "backend": state.spec.backend, "reason": found.reason,
                       "file": label_value(scrub(text))})


class SessionFeed:
    """Feeds session-log poll results to an agent's state.

    ``records`` takes the calls that are records; ``prober`` probes previews; ``config()``
    returns the config in force (read at each use: it is replaced on reload). ``publish(agent,
    backend, message, reason=...)`` queues a Kubernetes Event (a no-op while Events are off);
    it must not block."""

    def __init__(self, records: RecordPipeline, prober: PreviewProber,
                 config: Callable[[], Config], publish: Callable[..., None]) -> None:
        self.records = records
        self.prober = prober
        self._config = config
        self._publish = publish

    def feed(self, state: AgentState, result: PollResult, now: float) -> None:
        """Count ``result``'s reader errors and ignored lines in ``state``, hand each of its
        events (in order) to the C12 timer, the turn tracker and the record pipeline (``now``:
        epoch seconds), then count and log each file it found unrecognised and mark the agent
        (:meth:`repeat_failure.sessions.activity.Activity.on_unrecognized`). The turn tracker
        only with turn health on, the rest only with the check on (the config in force). Never
        raises for what the log holds."""
        config = self._config()
        check, health = config.enabled, config.turn_health
        state.reader_errors.update(result.errors)
        state.reader_ignored += result.ignored
        if result.events or result.errors or result.unrecognized:
            state.dirty = True
        for event in result.events:
            if check:
                state.activity.on_event(event)
            if health:
                for turn in state.turns.on_event(event):
                    self.turn(state, turn)
            if not check:  # turn health alone: the check's parts stay off (C14)
                continue
            if (state.session_route and event.kind == SHELL_END and event.command
                    and state.first_delivery(event.call_id)):
                record = self.records.session_record(state, event, now)
                if record is not None:
                    self.records.record(state, record, now, failure_output(
                        event, record.failed, state.cut_key, now))
            elif (not state.session_route and event.kind == SHELL_END and event.failed
                    and event.command and state.first_delivery(event.call_id)):
                # Its output (or that the log has none) ends the wait of the neutral route's
                # record of the same call (issue 26). Once per call: a call read again would
                # give its output to the hook's record of the command's next run.
                self.records.session_output(state, event, now)
        for found in result.unrecognized if check else ():
            state.unrecognized_files[found.reason] += 1
            state.activity.on_unrecognized(found.ts)
            log_unrecognized(state, found)

    def turn(self, state: AgentState, turn: Turn) -> None:
        """A turn was classified (:mod:`repeat_failure.turns.verdict`): count it, and log a failed one as
        the audit event ``turn_failed`` (one JSON line: verdict, agent, backend, turn id, what
        the turn showed, the scrubbed error text)."""
        state.verdicts[turn.verdict] += 1
        state.last_verdict = turn.verdict
        state.failed_in_a_row = 0 if turn.verdict == OK else state.failed_in_a_row + 1
        state.dirty = True
        if turn.verdict != OK:
            log.warning("agent turn failed", extra={
                "event": "turn_failed", "agent": state.spec.name, "backend": state.spec.backend,
                "verdict": turn.verdict, "turn_id": turn.turn_id, "text": turn.text,
                "tools": turn.tools, "error": turn.error, "failed_in_a_row": state.failed_in_a_row})
        if turn.edits and state.spec.preview_url and (config := self._config()).turn_health:
            # Seed ard-0038 §3: after a turn that touched the dev surface, probe the preview
            # once; off the pipeline's thread (repeat_failure.turns.probe.PreviewProber).
            self.prober.request(state.spec.name, state.spec.preview_url,
                                config.preview_timeout_s)

    def probed(self, state: AgentState, url: str, result: ProbeResult) -> None:
        """A preview probe of ``url`` finished: count it, set the agent's preview state, log a
        failed one (scrubbed: ``detail`` and the URL) and publish a ``PreviewError`` Event for
        a ``preview_error``."""
        agent = state.spec.name
        state.preview_probes += 1
        before, state.preview_state = state.preview_state, result.outcome
        extra = {"agent": agent, "backend": state.spec.backend, "url": scrub(url),
                 "outcome": result.outcome, "reason": result.reason, "status": result.status,
                 "detail": result.detail, "seconds": round(result.elapsed_s, 3)}
        if result.outcome == PROBE_OK:
            if before not in (None, PROBE_OK):
                log.info("preview ok again", extra={"event": "preview_ok", **extra})
            return
        state.preview_errors[(result.outcome, result.reason)] += 1
        log.warning("preview error" if result.outcome == PREVIEW_ERROR
                    else "preview server down", extra={"event": result.outcome, **extra})
        if result.outcome == PREVIEW_ERROR:
            self._publish(agent, state.spec.backend,
                          f"Preview error ({result.reason}) at {extra['url']}: {result.detail}",
                          reason=PREVIEW_REASON)
