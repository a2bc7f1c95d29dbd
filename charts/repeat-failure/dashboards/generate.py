"""Generate the chart's Grafana dashboard, ``charts/repeat-failure/files/dashboard.json``.

The dashboard is built with Grafana Labs' Foundation SDK (PyPI ``grafana-foundation-sdk``,
pinned in the ``test`` extras: its versions carry an epoch, so only an exact pin picks the
Grafana 11.6 schema). Edit this file, not the JSON, then regenerate::

    python charts/repeat-failure/dashboards/generate.py          # rewrite the JSON
    python charts/repeat-failure/dashboards/generate.py --check  # exit 1 if it is out of date

``tests/test_monitoring.py`` checks that the committed JSON is what this file generates, and
evaluates every panel's query against a real Prometheus scraping a real sidecar.

Rows: *Agents*, *Failing commands*, *Input and sidecar health* (the repeat-failure check's
``hive_repeat_failure_*`` series), *Agent turns* and *Preview* (issue 8's turn verdicts and
preview probe, ``hive_agent_*``), *Fix loops* (issue 9's fix-loop escalation component,
``hive_repeat_failure_fixloop_*``).

Every sidecar query selects ``namespace=~"$namespace"`` (the label prometheus-operator's
PodMonitor sets on each target) and, where the series has an ``agent`` label, ``agent=~"$agent"``.
Both variables default to All (``.*``), which also matches series without the label (a Prometheus
scraping the sidecar without Kubernetes labels). The fixloop is one Deployment in the release
namespace, not in an agent namespace, so its queries select ``repository=~"$repository"`` where
the series has a ``repository`` label, and nothing otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import bargauge, stat, table, timeseries
from grafana_foundation_sdk.builders import common as common_builder
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

#: Where the chart reads the dashboard from (``.Files.Get``).
OUTPUT = Path(__file__).resolve().parent.parent / "files" / "dashboard.json"

UID = "repeat-failure"
DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
#: The selector every per-agent query uses; ``SEL_NS`` for series without an agent label.
SEL = 'namespace=~"$namespace", agent=~"$agent"'
SEL_NS = 'namespace=~"$namespace"'
#: Labels of the scrape target (prometheus-operator's) that a table need not show.
TARGET_COLUMNS = ("Time", "__name__", "job", "instance", "container", "endpoint", "service")

# The queries, by panel title. Tests evaluate each of them against a real Prometheus.
Q_STATES = f'count by (state) (hive_repeat_failure_check_state{{{SEL}}} == 1)'
# The agent's row (issue 29): row_info identifies the row, its state and the note it shows;
# the note's N, M and K are sample values of other series, merged into the row by labels.
ROW_KEY = "namespace, pod, agent, backend"
NOTE_KEY = f"{ROW_KEY}, command, exit"
Q_ROWS = (f'max by ({NOTE_KEY}, state, state_text) '
          f'(hive_repeat_failure_row_info{{{SEL}}})')
Q_ROW_FAILURES = (f'max by ({NOTE_KEY}) (hive_repeat_failure_note{{{SEL}}}) '
                  f'and on ({NOTE_KEY}) hive_repeat_failure_row_info{{{SEL}}}')
Q_ROW_MINUTES = (f'clamp_min(ceil(max by ({NOTE_KEY}) '
                 f'(hive_repeat_failure_note_span_seconds{{{SEL}}}) / 60 - 1e-9), 1) '
                 f'and on ({NOTE_KEY}) hive_repeat_failure_row_info{{{SEL}}}')
Q_ROW_OTHERS = f'max by ({ROW_KEY}) (hive_repeat_failure_notes_active{{{SEL}}}) - 1 > 0'
Q_NOTES = f'hive_repeat_failure_note{{{SEL}}}'
Q_SIDECARS_DOWN = f'count(up{{container="repeat-failure", {SEL_NS}}} == 0) or vector(0)'
Q_TOP = f'topk(10, hive_repeat_failure_command_failures{{{SEL}}})'
Q_NOTES_RAISED = (f'sum by (agent, backend) '
                  f'(increase(hive_repeat_failure_notes_raised_total{{{SEL}}}[$__rate_interval]))')
Q_RECORDS = (f'sum by (route, outcome) '
             f'(rate(hive_repeat_failure_records_total{{{SEL}}}[$__rate_interval]))')
Q_REJECTED = (f'sum by (agent, reason) '
              f'(increase(hive_repeat_failure_records_rejected_total{{{SEL}}}[$__rate_interval]))')
Q_READER_ERRORS = (f'sum by (agent, backend, reason) '
                   f'(increase(hive_repeat_failure_reader_errors_total{{{SEL}}}'
                   f'[$__rate_interval]))')
Q_LAST_RECORD = (f'time() - max by (agent, backend) '
                 f'(hive_repeat_failure_last_record_timestamp_seconds{{{SEL}}})')
Q_COLLECT_P99 = (f'histogram_quantile(0.99, sum by (namespace, pod, le) '
                 f'(rate(hive_repeat_failure_collect_duration_seconds_bucket{{{SEL_NS}}}'
                 f'[$__rate_interval])))')

# Agent turns and the preview probe (issue 8).
Q_TURNS = (f'60 * sum by (verdict) '
           f'(rate(hive_agent_turns_total{{{SEL}}}[$__rate_interval]))')
Q_TURN_VERDICT = f'hive_agent_turn_verdict{{{SEL}}} == 1'
Q_FAILED_TURNS = f'max by (agent, backend) (hive_agent_consecutive_failed_turns{{{SEL}}})'
Q_PREVIEW_STATE = f'hive_agent_preview_state{{{SEL}}} == 1'
Q_PREVIEW_PROBES = (f'sum by (agent, backend) '
                    f'(increase(hive_agent_preview_probes_total{{{SEL}}}[$__rate_interval]))')
Q_PREVIEW_ERRORS = (f'sum by (outcome, reason) '
                    f'(increase(hive_agent_preview_errors_total{{{SEL}}}[$__rate_interval]))')

# The fix-loop escalation component (issue 9): one per release, so no namespace or agent.
SEL_REPO = 'repository=~"$repository"'
Q_FIXLOOP_ESCALATED = (f'max by (repository) '
                       f'(hive_repeat_failure_fixloop_escalated_prs{{{SEL_REPO}}})')
Q_FIXLOOP_RED_TREES = f'hive_repeat_failure_fixloop_red_trees{{{SEL_REPO}}}'
Q_FIXLOOP_REENGAGEMENTS = (f'sum by (repository, outcome) '
                           f'(increase(hive_repeat_failure_fixloop_reengagements_total'
                           f'{{{SEL_REPO}}}[$__rate_interval]))')
Q_FIXLOOP_SHARED_BREAKAGE = (f'max by (repository) '
                             f'(hive_repeat_failure_fixloop_shared_breakage_checks{{{SEL_REPO}}})')
Q_FIXLOOP_SWEEP_P99 = ('histogram_quantile(0.99, sum by (namespace, pod, le) '
                       '(rate(hive_repeat_failure_fixloop_sweep_duration_seconds_bucket'
                       '[$__rate_interval])))')
Q_FIXLOOP_API_ERRORS = ('sum by (reason) '
                        '(increase(hive_repeat_failure_fixloop_api_errors_total'
                        '[$__rate_interval]))')

#: Colours of the turn verdicts and preview states (tables and stacked series).
VERDICT_COLORS = {"ok": "green", "agent_error": "red", "agent_no_output": "orange",
                  "nonzero_exit": "purple"}
PREVIEW_COLORS = {"ok": "green", "preview_error": "red", "server_down": "orange"}


def _query(expr: str, legend: str = "", instant: bool = False,
           fmt: PromQueryFormat = PromQueryFormat.TIME_SERIES) -> prometheus.Dataquery:
    """A Prometheus target on the dashboard's data source: a range query, or with ``instant``
    one value per series at the end of the time range (tables, "now" stats)."""
    q = (prometheus.Dataquery().expr(expr).ref_id("A").datasource(DATASOURCE).format(fmt))
    q = q.instant() if instant else q.range()
    if legend:
        q = q.legend_format(legend)
    return q


def _pos(x: int, y: int, w: int, h: int) -> model.GridPos:
    return model.GridPos(x=x, y=y, w=w, h=h)


def _organize(rename: dict[str, str], hide: tuple[str, ...] = (),
              order: tuple[str, ...] = ()) -> model.DataTransformerConfig:
    """An ``organize`` transformation: drop the target's labels and ``hide``, rename columns."""
    return model.DataTransformerConfig(id_val="organize", options={
        "excludeByName": {name: True for name in (*TARGET_COLUMNS, *hide)},
        "indexByName": {name: i for i, name in enumerate(order)},
        "renameByName": rename,
    })


def _table(title: str, description: str, expr: str, pos: model.GridPos,
           rename: dict[str, str], hide: tuple[str, ...] = (),
           order: tuple[str, ...] = (), sort_by: str | None = None) -> table.Panel:
    panel = (table.Panel().title(title).description(description).datasource(DATASOURCE)
             .grid_pos(pos).with_target(_query(expr, instant=True, fmt=PromQueryFormat.TABLE))
             .with_transformation(_organize(rename, hide, order))
             .cell_height(common.TableCellHeight.SM).filterable(True))
    if sort_by:
        panel = panel.sort_by([common_builder.TableSortByFieldState()
                               .display_name(sort_by).desc(True)])
    return panel


def _agent_rows(pos: model.GridPos) -> table.Panel:
    """*Agent rows*: each agent's row as ``/status`` gives it, its note put together from four
    instant queries merged on their shared labels (issue 29: no series carries the text):
    ``Repeating failure: <command> | failed N times | in M min | exit S | others +K``."""
    targets = [(Q_ROWS, "A"), (Q_ROW_FAILURES, "B"), (Q_ROW_MINUTES, "C"), (Q_ROW_OTHERS, "D")]
    panel = (table.Panel().title("Agent rows")
             .description("What each agent's row shows: its check state, the state's text and "
                          "the repeating-failure note it shows (empty when none is raised): the "
                          "command, how many times it failed, in how many minutes, its exit "
                          "status, and how many other notes the agent has raised.")
             .datasource(DATASOURCE).grid_pos(pos)
             .cell_height(common.TableCellHeight.SM).filterable(True))
    for expr, ref in targets:
        panel = panel.with_target(_query(expr, instant=True, fmt=PromQueryFormat.TABLE)
                                  .ref_id(ref))
    panel = (panel.with_transformation(model.DataTransformerConfig(id_val="merge", options={}))
             .with_transformation(_organize(
                 rename={"state_text": "state text", "command": "repeating failure",
                         "Value #B": "failed", "Value #C": "in", "Value #D": "others"},
                 hide=("Value #A",),
                 order=("namespace", "pod", "agent", "backend", "state", "state_text",
                        "command", "Value #B", "Value #C", "exit", "Value #D"))))
    for column, unit in (("failed", "suffix: times"), ("in", "suffix: min"),
                         ("others", "prefix:+")):
        panel = panel.override_by_name(column, [model.DynamicConfigValue(id_val="unit",
                                                                         value=unit)])
    return panel


def _timeseries(title: str, description: str, expr: str, legend: str, unit: str,
                pos: model.GridPos) -> timeseries.Panel:
    return (timeseries.Panel().title(title).description(description).datasource(DATASOURCE)
            .grid_pos(pos).with_target(_query(expr, legend)).unit(unit).min(0)
            .fill_opacity(10).line_width(1)
            .legend(common_builder.VizLegendOptions().display_mode(common.LegendDisplayMode.TABLE)
                    .placement(common.LegendPlacement.RIGHT).show_legend(True)
                    .calcs(["max", "lastNotNull"])))


def _colored_column(panel: table.Panel, column: str, colors: dict[str, str]) -> table.Panel:
    """Colour the cells of a table's text ``column`` by value (a value mapping per value, shown
    as the cell's background)."""
    return panel.override_by_name(column, [
        model.DynamicConfigValue(id_val="mappings", value=[{
            "type": "value",
            "options": {value: {"color": color, "index": i}
                        for i, (value, color) in enumerate(colors.items())}}]),
        model.DynamicConfigValue(id_val="custom.cellOptions",
                                 value={"type": "color-background", "mode": "basic"}),
    ])


def _fixed_colors(panel, colors: dict[str, str]):
    """Give each series named like a key of ``colors`` (its legend) that fixed colour."""
    for name, color in colors.items():
        panel = panel.override_by_name(name, [model.DynamicConfigValue(
            id_val="color", value={"mode": "fixed", "fixedColor": color})])
    return panel


def _thresholds(*steps: tuple[float | None, str]) -> dash.ThresholdsConfig:
    return (dash.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE)
            .steps([model.Threshold(value=v, color=c) for v, c in steps]))


def build() -> model.Dashboard:
    """The dashboard model (the SDK's ``Dashboard``); :func:`render` turns it into JSON."""
    datasource = (dash.DatasourceVariable("datasource").label("Data source").type("prometheus"))
    namespace = (dash.QueryVariable("namespace").label("Namespace").datasource(DATASOURCE)
                 .query("label_values(hive_repeat_failure_check_state, namespace)")
                 .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
                 .sort(model.VariableSort.ALPHABETICAL_ASC)
                 .multi(True).include_all(True).all_value(".*")
                 .current(model.VariableOption(selected=True, text="All", value="$__all")))
    agent = (dash.QueryVariable("agent").label("Agent").datasource(DATASOURCE)
             .query('label_values(hive_repeat_failure_check_state{namespace=~"$namespace"}, agent)')
             .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
             .sort(model.VariableSort.ALPHABETICAL_ASC)
             .multi(True).include_all(True).all_value(".*")
             .current(model.VariableOption(selected=True, text="All", value="$__all")))
    repository = (dash.QueryVariable("repository").label("Repository").datasource(DATASOURCE)
                  .query("label_values(hive_repeat_failure_fixloop_escalated_prs, repository)")
                  .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
                  .sort(model.VariableSort.ALPHABETICAL_ASC)
                  .multi(True).include_all(True).all_value(".*")
                  .current(model.VariableOption(selected=True, text="All", value="$__all")))

    states = (stat.Panel().title("Agents by check state")
              .description("How many agents are in each check state now. Anything but `on` "
                           "means a repeating failure would go unseen for that agent: see "
                           "docs/metrics.md.")
              .datasource(DATASOURCE).grid_pos(_pos(0, 1, 6, 7))
              .with_target(_query(Q_STATES, "{{state}}", instant=True))
              .reduce_options(common_builder.ReduceDataOptions().calcs(["lastNotNull"]))
              .graph_mode(common.BigValueGraphMode.NONE)
              .color_mode(common.BigValueColorMode.BACKGROUND)
              .text_mode(common.BigValueTextMode.VALUE_AND_NAME)
              .thresholds(_thresholds((None, "blue")))
              .override_by_name("not_receiving_data", [
                  model.DynamicConfigValue(id_val="color",
                                           value={"mode": "fixed", "fixedColor": "orange"})])
              .override_by_name("not_available", [
                  model.DynamicConfigValue(id_val="color",
                                           value={"mode": "fixed", "fixedColor": "text"})])
              .override_by_name("session_log_unrecognized", [
                  model.DynamicConfigValue(id_val="color",
                                           value={"mode": "fixed", "fixedColor": "purple"})]))
    rows = _agent_rows(_pos(6, 1, 18, 7))
    down = (stat.Panel().title("Sidecars down")
            .description("Sidecar scrape targets Prometheus cannot reach (`up == 0`). Their "
                         "agents run unwatched; the RepeatFailureSidecarDown alert fires after "
                         "5 minutes.")
            .datasource(DATASOURCE).grid_pos(_pos(0, 8, 6, 7))
            .with_target(_query(Q_SIDECARS_DOWN, "down"))
            .reduce_options(common_builder.ReduceDataOptions().calcs(["lastNotNull"]))
            .graph_mode(common.BigValueGraphMode.AREA)
            .color_mode(common.BigValueColorMode.BACKGROUND)
            .thresholds(_thresholds((None, "green"), (1, "red"))))
    notes = _table(
        "Repeating failures now",
        "Every raised note: the command, its exit status and how many times it failed within "
        "the window. The agent is not paused; look at what it is trying to do.",
        Q_NOTES, _pos(6, 8, 18, 7),
        rename={"Value": "failures in window"},
        order=("namespace", "pod", "agent", "backend", "command", "exit", "Value"),
        sort_by="failures in window")

    top = _table(
        "Top failing commands",
        "The 10 commands with the most failures in the window (per exit status), whether or "
        "not a note is raised yet.",
        Q_TOP, _pos(0, 16, 12, 9),
        rename={"Value": "failures in window"},
        order=("namespace", "pod", "agent", "backend", "command", "exit", "Value"),
        sort_by="failures in window")
    raised = _timeseries(
        "Notes raised",
        "Repeating-failure notes raised per agent.", Q_NOTES_RAISED,
        "{{agent}} ({{backend}})", "short", _pos(12, 16, 12, 9))

    records = _timeseries(
        "Records per route and outcome",
        "Commands recorded per second by route (`bash_env` is the hook, `<backend>_session_log` "
        "the session log) and outcome (success, failure, excluded, duplicate). No records "
        "while agents run shell commands means the route is broken.",
        Q_RECORDS, "{{route}} {{outcome}}", "reqps", _pos(0, 26, 12, 8))
    last = (bargauge.Panel().title("Seconds since the last record")
            .description("Age of each agent's newest record. It grows while an agent is idle; "
                         "growing while the agent runs shell commands means records are lost.")
            .datasource(DATASOURCE).grid_pos(_pos(12, 26, 12, 8))
            .with_target(_query(Q_LAST_RECORD, "{{agent}} ({{backend}})", instant=True))
            .unit("s").min(0)
            .reduce_options(common_builder.ReduceDataOptions().calcs(["lastNotNull"]))
            .display_mode(common.BarGaugeDisplayMode.BASIC)
            .orientation(common.VizOrientation.HORIZONTAL)
            .thresholds(_thresholds((None, "green"), (900, "orange"))))
    rejected = _timeseries(
        "Rejected record lines",
        "Record lines dropped by reason (malformed, torn, oversized, unreadable, insecure). "
        "`insecure` means a record file others could read or write: check the agent's umask "
        "and the shared volume's group.",
        Q_REJECTED, "{{agent}} {{reason}}", "short", _pos(0, 35, 8, 8))
    reader_errors = _timeseries(
        "Session-log reader errors",
        "Session-log lines the backend's reader did not recognise, by reason. A rise of the "
        "reader's own reasons (not `unreadable`) after a CLI update means its log format "
        "changed and the not-receiving-data safeguard may be blind.",
        Q_READER_ERRORS, "{{agent}} ({{backend}}) {{reason}}", "short", _pos(8, 35, 8, 8))
    collect = _timeseries(
        "Collection pass duration (p99)",
        "99th percentile of the sidecar's collection passes, per pod.",
        Q_COLLECT_P99, "{{namespace}}/{{pod}}", "s", _pos(16, 35, 8, 8))

    newest_verdict = _colored_column(_table(
        "Newest turn verdict",
        "The verdict of each agent's newest classified turn: `ok`, `agent_error` (the CLI or "
        "the model provider reported an error), `agent_no_output` (no text and no tool call) "
        "or `nonzero_exit`. Absent until the agent's first turn ends.",
        Q_TURN_VERDICT, _pos(0, 44, 8, 8),
        rename={}, hide=("Value",),
        order=("namespace", "pod", "agent", "backend", "verdict")), "verdict", VERDICT_COLORS)
    turns = _fixed_colors(
        _timeseries(
            "Turns per verdict",
            "Agent turns classified per minute, stacked by verdict. A band of `agent_error` or "
            "`agent_no_output` is turns the agents spent without getting anything done.",
            Q_TURNS, "{{verdict}}", "suffix: turns/min", _pos(8, 44, 8, 8))
        .stacking(common_builder.StackingConfig().mode(common.StackingMode.NORMAL))
        .fill_opacity(60), VERDICT_COLORS)
    failed_turns = (
        _timeseries(
            "Consecutive failed turns",
            "Turns classified other than ok since each agent's last ok turn (the longest run "
            "among its pods). It drops to 0 on an ok turn; RepeatFailureAgentTurnsFailing "
            "fires at 3 held for 5 minutes (the dashed line).",
            Q_FAILED_TURNS, "{{agent}} ({{backend}})", "short", _pos(16, 44, 8, 8))
        .decimals(0)
        .thresholds(_thresholds((None, "green"), (3, "red")))
        .thresholds_style(common_builder.GraphThresholdsStyleConfig()
                          .mode(common.GraphThresholdsStyleMode.DASHED)))

    preview_state = _colored_column(_table(
        "Preview state",
        "The outcome of each agent's newest preview probe (after a turn that edited files): "
        "`ok`, `preview_error` (the page answered but its status, an empty body or a broken "
        "script or stylesheet says it is broken) or `server_down` (no answer). Only agents "
        "with a preview URL are probed; absent until the first probe.",
        Q_PREVIEW_STATE, _pos(0, 53, 8, 8),
        rename={}, hide=("Value",),
        order=("namespace", "pod", "agent", "backend", "state")), "state", PREVIEW_COLORS)
    probes = _timeseries(
        "Preview probes",
        "Preview probes run per agent: one after each turn that edited files. None while an "
        "agent edits files means its preview URL is not set.",
        Q_PREVIEW_PROBES, "{{agent}} ({{backend}})", "short", _pos(8, 53, 8, 8))
    preview_errors = _timeseries(
        "Preview errors by reason",
        "Probes that did not find a working preview, by outcome and reason: preview_error "
        "(`entry_status`, `entry_empty`, `asset_broken`) or server_down (`unreachable`, "
        "`timeout`).",
        Q_PREVIEW_ERRORS, "{{outcome}} {{reason}}", "short", _pos(16, 53, 8, 8))

    escalated = (
        _timeseries(
            "Escalated PRs",
            "Open pull requests the fixloop has escalated, per repository: each has a comment "
            "headed \"Fix loop escalated — human attention needed\" and the label "
            "(default `needs-human`) that keeps agents off it until a human removes it or CI "
            "goes green. RepeatFailureFixLoopEscalated (severity info) fires while it is above 0.",
            Q_FIXLOOP_ESCALATED, "{{repository}}", "short", _pos(0, 62, 8, 8))
        .decimals(0))
    red_trees = _table(
        "Red trees per PR",
        "Distinct red head trees the fixloop counts for each PR it tracks (an empty retrigger "
        "commit keeps the tree and counts once). A PR escalates at the threshold (default 3); "
        "a green head clears its count.",
        Q_FIXLOOP_RED_TREES, _pos(8, 62, 8, 8),
        rename={"Value": "red trees"}, hide=("namespace", "pod"),
        order=("repository", "pr", "Value"), sort_by="red trees")
    reengagements = _timeseries(
        "Re-engagements",
        "Kicks sent to the owning agent of a PR that stayed red after CI settled, per "
        "repository and outcome: `delivered` (the agent's webhook accepted it; only these "
        "count against the budget, `max_reengagements` per head SHA) or `failed`. A steady "
        "`failed` is an agent webhook down or misconfigured (`fixloop.config.notifier`).",
        Q_FIXLOOP_REENGAGEMENTS, "{{repository}} {{outcome}}", "short", _pos(16, 62, 8, 8))
    shared_breakage = (
        _timeseries(
            "Shared-breakage checks",
            "Checks red on several open PRs of the repository at once (at least "
            "`shared_breakage_prs` + 1): a broken base branch or a runner outage, not a fix "
            "attempt. While a check is shared breakage, its PRs count no attempt and get no "
            "re-engagement.",
            Q_FIXLOOP_SHARED_BREAKAGE, "{{repository}}", "short", _pos(0, 70, 8, 8))
        .decimals(0))
    sweep = _timeseries(
        "Sweep duration (p99)",
        "99th percentile of the fixloop's sweeps (every open PR of every repository). Sweeps "
        "close to `interval_s` mean too many PRs or a slow or rate-limiting API.",
        Q_FIXLOOP_SWEEP_P99, "{{namespace}}/{{pod}}", "s", _pos(8, 70, 8, 8))
    api_errors = _timeseries(
        "API errors by reason",
        "GitHub API calls that failed, by reason: `auth` (the token), `rate_limited`, "
        "`http_4xx`, `http_5xx`, `network`, `timeout`, `bad_response`. A sweep with errors is "
        "partial or failed; RepeatFailureFixLoopSweepsFailing fires when none completes.",
        Q_FIXLOOP_API_ERRORS, "{{reason}}", "short", _pos(16, 70, 8, 8))

    return (dash.Dashboard("repeat-failure").uid(UID)
            .description("AI agents running the same failing shell command again and again "
                         "(repeat-failure sidecar), and CI fix loops escalated to a human "
                         "(repeat-failure fixloop). Monitor only: nothing here pauses an agent.")
            .tags(["repeat-failure", "agents"]).editable().timezone("browser")
            .time("now-6h", "now").refresh("1m")
            .tooltip(model.DashboardCursorSync.CROSSHAIR)
            .annotation(dash.AnnotationQuery().name("Annotations & Alerts").built_in(1)
                        .datasource(model.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
                        .enable(True).hide(True).icon_color("rgba(0, 211, 255, 1)")
                        .type("dashboard"))
            .with_variable(datasource).with_variable(namespace).with_variable(agent)
            .with_variable(repository)
            .with_row(dash.Row("Agents").grid_pos(_pos(0, 0, 24, 1)))
            .with_panel(states).with_panel(rows).with_panel(down).with_panel(notes)
            .with_row(dash.Row("Failing commands").grid_pos(_pos(0, 15, 24, 1)))
            .with_panel(top).with_panel(raised)
            .with_row(dash.Row("Input and sidecar health").grid_pos(_pos(0, 25, 24, 1)))
            .with_panel(records).with_panel(last).with_panel(rejected)
            .with_panel(reader_errors).with_panel(collect)
            .with_row(dash.Row("Agent turns").grid_pos(_pos(0, 43, 24, 1)))
            .with_panel(newest_verdict).with_panel(turns).with_panel(failed_turns)
            .with_row(dash.Row("Preview").grid_pos(_pos(0, 52, 24, 1)))
            .with_panel(preview_state).with_panel(probes).with_panel(preview_errors)
            .with_row(dash.Row("Fix loops").grid_pos(_pos(0, 61, 24, 1)))
            .with_panel(escalated).with_panel(red_trees).with_panel(reengagements)
            .with_panel(shared_breakage).with_panel(sweep).with_panel(api_errors)
            .build())


def render() -> str:
    """The dashboard as the JSON text committed in ``files/dashboard.json`` (2-space indent,
    ending in a newline). Panel ids are numbered in order, so the text is stable."""
    data = json.loads(json.dumps(build(), cls=JSONEncoder))
    for i, panel in enumerate(data["panels"], start=1):
        panel["id"] = i
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the dashboard JSON; with ``--check``, only compare and exit 1 when it differs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the committed JSON differs from the generated one")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
