"""Exporter: ``GET /metrics`` (Prometheus text format) and ``GET /status`` (JSON rows).

A custom collector in the style of prometheus/client_python: :meth:`MetricsCollector.collect`
builds every family fresh from :meth:`repeat_failure.sidecar.app.Sidecar.snapshot` at scrape time and owns no
state, so a cleared note's series disappears by construction. Metric names and labels are
docs/metrics.md "Series". ``command`` label values are scrubbed and normalized upstream and cut here
to 200 characters (ending in ``…``); at most 100 note series per agent (the newest). Control and
bidi characters in a label value are written as ``\\uXXXX`` (:mod:`repeat_failure.rules.terminal`; before
the cut, so a label stays within 200 characters), so ``curl /metrics`` in a terminal never acts
on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from repeat_failure import serving
from repeat_failure.sidecar.checkstate import MAX_NOTES_SHOWN, STATES
from repeat_failure.config import parse_listen
from repeat_failure.rules.normalize import command_label
from repeat_failure.sessions.unrecognized import REASONS as UNRECOGNIZED_REASONS
from repeat_failure.turns.probe import OUTCOME_REASONS, OUTCOMES
from repeat_failure.rules.terminal import json_bytes, label_value
from repeat_failure.turns.verdict import VERDICTS

if TYPE_CHECKING:
    from repeat_failure.sidecar.app import Sidecar

PREFIX = "hive_repeat_failure_"
#: Turn verdicts and the preview probe are about the agent, not the repeat-failure check:
#: issue 8 names them ``hive_agent_*``.
AGENT_PREFIX = "hive_agent_"


class MetricsCollector(Collector):
    """Yields the sidecar's metric families from a fresh snapshot at every scrape."""

    def __init__(self, sidecar: "Sidecar") -> None:
        self._sidecar = sidecar

    def collect(self) -> Iterator[Metric]:
        """Build every family of docs/metrics.md "Series" from the current snapshot."""
        views = self._sidecar.snapshot()
        passes, last_pass = self._sidecar.collect_stats()
        collect_passes = CounterMetricFamily(
            PREFIX + "collect_passes",
            "Collection passes over all agents, by outcome: ok, failed (an error, logged as "
            "\"collection pass failed\").", labels=["outcome"])
        for outcome, n in sorted(passes.items()):
            collect_passes.add_metric([outcome], float(n))
        yield collect_passes
        if last_pass is not None:
            yield GaugeMetricFamily(
                PREFIX + "last_collect_timestamp_seconds",
                "Time the last collection pass that ended ok ended, seconds since the epoch.",
                value=last_pass)
        state = GaugeMetricFamily(
            PREFIX + "check_state",
            "Check state per agent (state set): 1 for the current state, 0 for the others.",
            labels=["agent", "backend", "state"])
        note = GaugeMetricFamily(
            PREFIX + "note",
            "Failures in the window of a command whose repeating-failure note is raised; "
            "output: same, changing or unknown (whether those failures had the same output).",
            labels=["agent", "backend", "command", "exit", "output"])
        # Issue 29: no label value changes with a count or a time. The row's note text is
        # built from the row's command and exit (row_info), its count (note), its minutes
        # (note_span_seconds) and the other notes (notes_active - 1).
        row_info = GaugeMetricFamily(
            PREFIX + "row_info",
            "What identifies the agent's dashboard row and its state: state, state text, and "
            "the command and exit of the note it shows (empty without one); the counts are "
            "the note, note_span_seconds and notes_active series.",
            labels=["agent", "backend", "state", "state_text", "command", "exit"])
        note_span = GaugeMetricFamily(
            PREFIX + "note_span_seconds",
            "Seconds from the first to the last failure a raised note counts (its text's M is "
            "this in minutes, rounded up, at least 1).",
            labels=["agent", "backend", "command", "exit", "output"])
        notes_active = GaugeMetricFamily(
            PREFIX + "notes_active",
            "Repeating-failure notes raised now for the agent (the row shows the newest and "
            "\"+K others\" for the rest).", labels=["agent", "backend"])
        failures = GaugeMetricFamily(
            PREFIX + "command_failures",
            "Failures in the window for the agent's top failing commands.",
            labels=["agent", "backend", "command", "exit"])
        records = CounterMetricFamily(
            PREFIX + "records", "Command records collected, by outcome.",
            labels=["agent", "backend", "route", "outcome"])
        rejected = CounterMetricFamily(
            PREFIX + "records_rejected", "Record lines rejected, by reason.",
            labels=["agent", "reason"])
        raised = CounterMetricFamily(
            PREFIX + "notes_raised", "Repeating-failure notes raised.", labels=["agent", "backend"])
        last = GaugeMetricFamily(
            PREFIX + "last_record_timestamp_seconds",
            "Time of the newest record, seconds since the epoch.", labels=["agent", "backend"])
        reader_errors = CounterMetricFamily(
            PREFIX + "reader_errors",
            "Session-log lines or rows the backend's reader did not recognise, by reason.",
            labels=["agent", "backend", "reason"])
        reader_ignored = CounterMetricFamily(
            PREFIX + "reader_lines_ignored",
            "Session-log lines of a type the backend's reader does not know, skipped (not errors: "
            "a newer CLI's additions).", labels=["agent", "backend"])
        unrecognized = CounterMetricFamily(
            PREFIX + "session_files_unrecognized",
            "Session files in which the shell tool is called but the reader recognises no shell "
            "call, by reason: unread_call (a call of the shell tool the reader could not read), "
            "no_end (shell calls that start and never end).",
            labels=["agent", "backend", "reason"])
        last_shell = GaugeMetricFamily(
            PREFIX + "last_shell_activity_timestamp_seconds",
            "Time of the newest shell-tool call start or end in the agent's session log, "
            "seconds since the epoch.", labels=["agent", "backend"])
        k8s_events = CounterMetricFamily(
            PREFIX + "events",
            "Kubernetes Events for raised notes, by outcome: created, failed (the API refused or "
            "could not be reached), dropped (the queue to the API was full).",
            labels=["agent", "outcome"])
        turns = CounterMetricFamily(
            AGENT_PREFIX + "turns",
            "Agent turns classified from the session log, by verdict (ok, agent_error, "
            "nonzero_exit, agent_no_output).", labels=["agent", "backend", "verdict"])
        verdict = GaugeMetricFamily(
            AGENT_PREFIX + "turn_verdict",
            "The newest classified turn's verdict (state set): 1 for it, 0 for the others.",
            labels=["agent", "backend", "verdict"])
        in_a_row = GaugeMetricFamily(
            AGENT_PREFIX + "consecutive_failed_turns",
            "Turns classified other than ok since the agent's last ok turn.",
            labels=["agent", "backend"])
        probes = CounterMetricFamily(
            AGENT_PREFIX + "preview_probes",
            "Preview probes run after turns that edited files.", labels=["agent", "backend"])
        preview_errors = CounterMetricFamily(
            AGENT_PREFIX + "preview_errors",
            "Preview probes that failed, by outcome (preview_error: the server answered but the "
            "entry is not 200, empty, or an asset is broken; server_down) and reason.",
            labels=["agent", "backend", "outcome", "reason"])
        preview_state = GaugeMetricFamily(
            AGENT_PREFIX + "preview_state",
            "The newest preview probe's outcome (state set): ok, preview_error, server_down.",
            labels=["agent", "backend", "state"])
        for v in views:
            if v.preview is not None:
                probes.add_metric([v.agent, v.backend], float(v.preview["probes"]))
                for outcome, reason in OUTCOME_REASONS:
                    if reason is not None:
                        preview_errors.add_metric(
                            [v.agent, v.backend, outcome, reason],
                            float(v.preview["errors"].get((outcome, reason), 0)))
                if v.preview["state"] is not None:
                    for name in OUTCOMES:
                        preview_state.add_metric([v.agent, v.backend, name],
                                                 1.0 if name == v.preview["state"] else 0.0)
            if v.verdicts is not None:
                for name in VERDICTS:
                    turns.add_metric([v.agent, v.backend, name], float(v.verdicts.get(name, 0)))
                in_a_row.add_metric([v.agent, v.backend], float(v.failed_in_a_row))
                if v.last_verdict is not None:
                    for name in VERDICTS:
                        verdict.add_metric([v.agent, v.backend, name],
                                           1.0 if name == v.last_verdict else 0.0)
            if v.row is not None:
                for s in STATES:
                    state.add_metric([v.agent, v.backend, s], 1.0 if s == v.row.state else 0.0)
                shown = v.row.notes[0] if v.row.notes else None
                row_info.add_metric(
                    [v.agent, v.backend, v.row.state, label_value(v.row.state_text),
                     command_label(label_value(shown.command)) if shown else "",
                     str(shown.exit) if shown else ""], 1.0)
                notes_active.add_metric([v.agent, v.backend], float(len(v.row.notes)))
                for raised_note in v.row.notes[:MAX_NOTES_SHOWN]:
                    labels = [v.agent, v.backend,
                              command_label(label_value(raised_note.command)),
                              str(raised_note.exit), raised_note.output]
                    note.add_metric(labels, float(raised_note.count))
                    note_span.add_metric(labels, raised_note.last_ts - raised_note.first_ts)
                for command, exit_key, count in v.failures:
                    failures.add_metric(
                        [v.agent, v.backend, command_label(label_value(command)), str(exit_key)],
                        float(count))
                raised.add_metric([v.agent, v.backend], float(v.notes_raised))
            for (backend, route, outcome), n in sorted(v.records.items()):
                records.add_metric([v.agent, backend, route, outcome], float(n))
            for reason, n in sorted(v.rejected.items()):
                rejected.add_metric([v.agent, reason], float(n))
            if v.last_record_ts is not None:
                last.add_metric([v.agent, v.backend], v.last_record_ts)
            for reason, n in sorted(v.reader_errors.items()):
                reader_errors.add_metric([v.agent, v.backend, reason], float(n))
            if v.reader_ignored:
                reader_ignored.add_metric([v.agent, v.backend], float(v.reader_ignored))
            if v.unrecognized_files is not None:
                for reason in UNRECOGNIZED_REASONS:
                    unrecognized.add_metric([v.agent, v.backend, reason],
                                            float(v.unrecognized_files.get(reason, 0)))
            if v.last_shell_ts is not None:
                last_shell.add_metric([v.agent, v.backend], v.last_shell_ts)
            for outcome, n in sorted(v.events.items()):
                k8s_events.add_metric([v.agent, outcome], float(n))
        yield from (state, note, note_span, notes_active, row_info, failures, records, rejected, raised, last,
                    reader_errors, reader_ignored, unrecognized, last_shell, k8s_events, turns,
                    verdict, in_a_row, probes, preview_errors, preview_state)


def status_json(sidecar: "Sidecar") -> bytes:
    """The ``GET /status`` body: ``{"rows": [...]}`` as :meth:`Row.to_json` gives each row, every
    unprintable character escaped (:func:`repeat_failure.rules.terminal.json_bytes`: the same JSON values, safe
    in a terminal), one line ending in a newline (so ``curl .../status`` does not run into the
    next prompt or command output, as ``/healthz``'s ``ok`` does not)."""
    return json_bytes(orjson.dumps({"rows": [row.to_json() for row in sidecar.rows()]})) + b"\n"


#: Connections served at once by the exporter (one thread each; more are closed at accept and
#: counted in a log line at most once a minute): Prometheus scrapes with one, the kubelet's
#: probes with one more, so 64 is generous (docs/metrics.md, "The endpoint").
MAX_CONNECTIONS = 64
#: One client address's share of MAX_CONNECTIONS: past it (or at the cap), the client's own
#: oldest idle or handshaking connection makes room, so one client holding idle connections
#: (the agent in the same pod, say) cannot refuse the kubelet's probe or a scrape (a break-it
#: run: 70 idle connections, reopened as they closed, left 8 of 12 `/healthz` unanswered).
MAX_CLIENT_CONNECTIONS = 16
#: Bytes of request line and headers together; more is answered 431 (a scrape sends well under
#: 1 KiB).
MAX_HEAD_BYTES = 32 << 10
#: Listen backlog: the default 5 drops connections when many scrapers arrive at once.
BACKLOG = 128
#: Seconds a connection may wait before its request's first byte, and then take from that byte
#: to the end of its answer (issue 28: with neither, 64 clients trickling a byte now and then
#: held every connection, and scrapes and the kubelet's /healthz probes were refused). A scrape
#: sends its request at once and its answer is written in one go.
IDLE_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10.0
_TEXT = "text/plain; charset=utf-8"


def _handler(sidecar: "Sidecar") -> type[serving.Handler]:
    class Handler(serving.Handler):
        server_version = "repeat-failure"
        timeout = 10  # seconds a client may take to send its request: no slowloris threads

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                body, ctype = generate_latest(sidecar.registry), CONTENT_TYPE_LATEST
            elif path == "/status":
                body, ctype = status_json(sidecar), "application/json"
            elif path == "/healthz":
                healthy, text = sidecar.health()
                if not healthy:  # the kubelet's liveness probe: restart a sidecar stuck failing
                    self.send_body(503, (text + "\n").encode(), _TEXT)
                    return
                body, ctype = b"ok\n", _TEXT
            elif path == "/readyz":
                body, ctype = b"ok\n", _TEXT
            elif path == "/startupz":  # the injected sidecar's startup probe (issue 29)
                started, text = sidecar.started()
                if not started:
                    self.send_body(503, (text + "\n").encode(), _TEXT)
                    return
                body, ctype = (text + "\n").encode(), _TEXT
            else:
                self.send_error(404, "not found: try /metrics, /status or /healthz")
                return
            self.send_body(200, body, ctype)

    return Handler


class Server:
    """The HTTP endpoint (HTTP/1.0: one request per connection), served from a daemon thread
    on :mod:`repeat_failure.serving`: at most :data:`MAX_CONNECTIONS` connections, request
    heads up to :data:`MAX_HEAD_BYTES` (431 beyond), 10 s per socket operation,
    :data:`IDLE_TIMEOUT_S` to the request's first byte and :data:`REQUEST_TIMEOUT_S` from it to
    the end of the answer, errors as JSON.

    ``listen`` is ``HOST:PORT`` (port 0 picks a free port; :attr:`port` tells which).
    Raises ``ValueError`` for a malformed ``listen``, ``OSError`` if the port is taken.
    """

    def __init__(self, sidecar: "Sidecar", listen: str) -> None:
        address = parse_listen(listen, "0.0.0.0:9466")
        sidecar.registry.register(MetricsCollector(sidecar))
        try:
            self._httpd = serving.Server(address, _handler(sidecar), name="exporter",
                                         max_connections=MAX_CONNECTIONS,
                                         max_client_connections=MAX_CLIENT_CONNECTIONS,
                                         max_head_bytes=MAX_HEAD_BYTES, backlog=BACKLOG,
                                         idle_timeout_s=IDLE_TIMEOUT_S,
                                         request_timeout_s=REQUEST_TIMEOUT_S,
                                         quiet=True)  # a client hung up: not ours to log
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {listen}: {exc.strerror}") from None

    @property
    def port(self) -> int:
        """The TCP port actually bound."""
        return self._httpd.port

    def start(self) -> "Server":
        """Start serving in the background; returns self."""
        self._httpd.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.stop()
