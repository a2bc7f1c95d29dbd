"""The chart's monitoring objects: the Prometheus rules, the Grafana dashboard, and both against
real data.

- ``promtool check rules`` and ``promtool test rules tests/promtool/rules.test.yaml``.
- The dashboard JSON is what ``charts/repeat-failure/dashboards/generate.py`` generates (Grafana
  Foundation SDK), and every panel has the data source variable and a query.
- Issue 8's panels (agent turns, preview) and issue 9's (fix loops) also on series shaped as
  the contract specifies, through ``promtool test rules`` (``promql_expr_test``): the sidecar
  below ends no turn and runs no probe, and no fixloop runs there.
- End to end: a real ``repeat-failure run`` (two agents: ``a1`` on the bash hook, with a
  ``a2`` a Claude Code agent, with a preview URL, whose real mid-turn session log shows shell
  activity but no record arrives)
  fed by real ``bash -c`` commands under the rendered hook, scraped every second by a real
  ``prometheus`` on loopback that loads the rule file. Every dashboard query (template variables
  substituted) and every alert expression is evaluated through ``/api/v1/query`` and compared
  with what the commands must give; then the sidecar is killed and the sidecar-down expression
  and alert show it.

Counters are compared over an exact window: the commands run in two phases, and the rate and
increase queries are evaluated at the timestamp ``t1`` of a scrape after phase B over a window
reaching 1 ms before the scrape ``t0`` between the phases (``$__rate_interval`` is replaced by
that window). Prometheus then extrapolates by at most that 1 ms, so ``increase`` is phase B's
count (within 0.5 %) and ``rate`` that count divided by ``t1 - t0``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from harness.evidence import primary
from repeat_failure.sidecar import hook
from repeat_failure.backends import session_reader
from repeat_failure.rules.detector import Detector
from repeat_failure.sessions.tail import SessionTail
from waiting import free_port

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "repeat-failure"
RULES = CHART / "files" / "prometheus-rules.yaml"
DASHBOARD = CHART / "files" / "dashboard.json"
GENERATOR = CHART / "dashboards" / "generate.py"
RULE_TESTS = REPO / "tests" / "promtool" / "rules.test.yaml"
METRICS_DOC = REPO / "docs" / "metrics.md"
RUNBOOK_DOC = REPO / "docs" / "runbook.md"
#: Where every alert's ``runbook_url`` points: docs/runbook.md on the repository's main branch.
RUNBOOK = "https://github.com/hive/repeat-failure/blob/main/docs/runbook.md"
EVIDENCE = primary()

SIDECAR_ALERTS = ("RepeatFailureRepeatingFailure", "RepeatFailureCheckNotReceivingData",
                  "RepeatFailureSidecarDown", "RepeatFailureCollectionFailing",
                  "RepeatFailureAgentTurnsFailing", "RepeatFailurePreviewBroken")
FIXLOOP_ALERTS = ("RepeatFailureFixLoopEscalated", "RepeatFailureFixLoopInconclusive",
                  "RepeatFailureFixLoopSweepsFailing")
INJECTOR_ALERTS = ("RepeatFailureInjectorDown", "RepeatFailureInjectorAdmissionsFailing",
                   "RepeatFailureInjectorCertificateExpiring")
ALERTS = SIDECAR_ALERTS + FIXLOOP_ALERTS + INJECTOR_ALERTS
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
#: The fixloop's series (``hive_repeat_failure_fixloop_<name>``) that carry a repository label.
FIXLOOP_REPOSITORY_SERIES = ("red_trees", "escalated_prs", "escalations_total",
                             "reengagements_total", "shared_breakage_checks",
                             "shared_breakage_incidents_total", "unparked_total",
                             "inconclusive_seconds", "inconclusive_prs", "skipped_draft_prs")

needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="promtool missing (Debian package prometheus)")
needs_prometheus = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="prometheus missing (Debian package prometheus)")


def load_dashboard() -> dict[str, Any]:
    """The committed dashboard JSON."""
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def query_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel that shows data (rows excluded), in order, rows' nested panels included."""
    panels = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            panels.extend(panel.get("panels", []))
        else:
            panels.append(panel)
    return panels


# --- Rules ---------------------------------------------------------------------------------

@needs_promtool
def test_promtool_check_rules() -> None:
    """`promtool check rules` accepts the rule file and counts its 12 rules."""
    done = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"Checking {RULES}\n  SUCCESS: 12 rules found\n\n"


@needs_promtool
def test_promtool_rule_unit_tests() -> None:
    """`promtool test rules` passes tests/promtool/rules.test.yaml (all its test groups)."""
    done = subprocess.run(["promtool", "test", "rules", "tests/promtool/rules.test.yaml"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "Unit Testing:  tests/promtool/rules.test.yaml\n  SUCCESS\n\n"


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    """The rule file has exactly the twelve alerts, the sidecar's six in the group
    ``repeat-failure``, the fixloop's three in ``repeat-failure-fixloop`` and the injector's three
    in ``repeat-failure-injector`` (issue 29; the certificate's expiry), each with a ``for``,
    a severity (warning; info for an escalated PR, already on the forge) and a summary and
    description; the promtool tests expect each of them both firing (a non-empty
    ``exp_alerts``) and not firing (an empty one)."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    assert [(g["name"], [r["alert"] for r in g["rules"]]) for g in groups] == [
        ("repeat-failure", list(SIDECAR_ALERTS)), ("repeat-failure-fixloop", list(FIXLOOP_ALERTS)),
        ("repeat-failure-injector", list(INJECTOR_ALERTS))]
    rules = [rule for group in groups for rule in group["rules"]]
    assert {r["alert"]: r["for"] for r in rules} == {
        "RepeatFailureRepeatingFailure": "10m", "RepeatFailureCheckNotReceivingData": "5m",
        "RepeatFailureSidecarDown": "5m", "RepeatFailureCollectionFailing": "5m",
        "RepeatFailureAgentTurnsFailing": "5m",
        "RepeatFailurePreviewBroken": "5m", "RepeatFailureFixLoopEscalated": "1m",
        "RepeatFailureFixLoopInconclusive": "10m", "RepeatFailureFixLoopSweepsFailing": "5m",
        "RepeatFailureInjectorDown": "5m", "RepeatFailureInjectorAdmissionsFailing": "5m",
        "RepeatFailureInjectorCertificateExpiring": "15m"}
    for rule in rules:
        severity = "info" if rule["alert"] == "RepeatFailureFixLoopEscalated" else "warning"
        assert rule["labels"] == {"severity": severity}, rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}
    tests = yaml.safe_load(RULE_TESTS.read_text())
    assert tests["rule_files"] == ["../../charts/repeat-failure/files/prometheus-rules.yaml"]
    seen: dict[str, set[bool]] = {name: set() for name in ALERTS}
    for group in tests["tests"]:
        for case in group["alert_rule_test"]:
            seen[case["alertname"]].add(bool(case["exp_alerts"]))
    assert seen == {name: {True, False} for name in ALERTS}


def _github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, spaces to ``-``, punctuation
    other than ``-`` and ``_`` dropped."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_alert_has_a_runbook_section() -> None:
    """Issue 29: each alert's ``runbook_url`` is docs/runbook.md on GitHub with the anchor of
    a ``##`` section named after the alert, and that section says what the alert means, how
    to check it and how to fix it (in that order); the page has no section for an alert that
    does not exist."""
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    text = RUNBOOK_DOC.read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", text, re.M | re.S))
    assert list(sections) == [r["alert"] for r in rules]
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        page, anchor = url.split("#")
        assert page == RUNBOOK, rule["alert"]
        assert anchor == _github_anchor(rule["alert"]), rule["alert"]
        body = sections[rule["alert"]]
        marks = [body.find(f"**{m}.**") for m in ("What it means", "How to check", "How to fix")]
        assert -1 not in marks and marks == sorted(marks), rule["alert"]


def test_repeating_failure_annotations_name_the_note() -> None:
    """The repeating-failure alert's texts name agent, backend, command and exit from the
    series' labels and the failure count from its value."""
    (rule,) = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]
               if r["alert"] == "RepeatFailureRepeatingFailure"]
    text = rule["annotations"]["summary"] + rule["annotations"]["description"]
    for needle in ("$labels.agent", "$labels.backend", "$labels.command", "$labels.exit",
                   "$value"):
        assert needle in text


def test_issue_8_alert_expressions_and_texts() -> None:
    """RepeatFailureAgentTurnsFailing is a run of 3 failed turns (the gauge since the last ok
    turn) and its summary names agent, backend, the run's length and the newest verdict, read
    from the turn-verdict state set of the same target (a template query, so a change of
    verdict does not restart the alert); RepeatFailurePreviewBroken is the preview state set at
    preview_error. promtool renders both texts in tests/promtool/rules.test.yaml."""
    rules = {r["alert"]: r for g in yaml.safe_load(RULES.read_text())["groups"]
             for r in g["rules"]}
    turns = rules["RepeatFailureAgentTurnsFailing"]
    assert turns["expr"] == "hive_agent_consecutive_failed_turns >= 3"
    summary = turns["annotations"]["summary"]
    for needle in ("$labels.agent", "$labels.backend", "$value",
                   "hive_agent_turn_verdict{agent=%q,backend=%q,instance=%q} == 1",
                   '| query', 'label "verdict"'):
        assert needle in summary, needle
    assert "verdict" not in turns["expr"]
    preview = rules["RepeatFailurePreviewBroken"]
    assert preview["expr"] == 'hive_agent_preview_state{state="preview_error"} == 1'
    assert "PreviewError" in preview["annotations"]["description"]


# --- Dashboard -----------------------------------------------------------------------------

def _generator():
    if importlib.util.find_spec("grafana_foundation_sdk") is None:
        pytest.fail("grafana-foundation-sdk is missing: pip install -e '.[test]'")
    spec = importlib.util.spec_from_file_location("rf_dashboard_generate", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dashboard_json_is_generated() -> None:
    """The committed dashboard.json is exactly what generate.py renders (run it after editing
    the generator), and ``--check`` agrees."""
    generator = _generator()
    assert generator.render() == DASHBOARD.read_text(encoding="utf-8"), (
        "charts/repeat-failure/files/dashboard.json is stale: run "
        "python charts/repeat-failure/dashboards/generate.py")
    assert generator.main(["--check"]) == 0


def test_dashboard_shape() -> None:
    """uid ``repeat-failure``, schemaVersion >= 39, a ``datasource`` variable of type prometheus
    and ``namespace``/``agent``/``repository`` variables from label_values on it (the last for
    the fixloop's panels); no ``__inputs`` (Grafana's sidecar provisions the file as it is)."""
    d = load_dashboard()
    assert d["uid"] == "repeat-failure"
    assert d["schemaVersion"] >= 39
    assert "__inputs" not in d
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert list(variables) == ["datasource", "namespace", "agent", "repository"]
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == (
        "datasource", "prometheus")
    assert variables["namespace"]["query"] == (
        "label_values(hive_repeat_failure_check_state, namespace)")
    assert variables["agent"]["query"] == (
        'label_values(hive_repeat_failure_check_state{namespace=~"$namespace"}, agent)')
    assert variables["repository"]["query"] == (
        "label_values(hive_repeat_failure_fixloop_escalated_prs, repository)")
    for name in ("namespace", "agent", "repository"):
        v = variables[name]
        assert (v["type"], v["datasource"], v["multi"], v["includeAll"], v["allValue"]) == (
            "query", DATASOURCE, True, True, ".*")
    assert d["annotations"]["list"][0]["builtIn"] == 1


def test_every_panel_has_the_datasource_and_a_query() -> None:
    """Each data panel uses ``${datasource}`` (panel and targets) and has at least one target
    with an expression; every selector of a sidecar's hive_ series filters by ``$namespace``,
    and by ``$agent`` where the series has an agent label; the fixloop's series (one
    Deployment in the release namespace, no agent) filter by ``$repository`` where they have a
    repository label and by nothing else; panel ids are unique and the panels fit the
    24-column grid without overlapping."""
    d = load_dashboard()
    panels = query_panels(d)
    assert len(panels) == 23
    for panel in panels:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert target["expr"].strip(), panel["title"]
            for metric, selector in re.findall(r"(hive_(?:repeat_failure|agent)_\w+)"
                                               r"\{([^}]*)\}", target["expr"]):
                if metric.startswith("hive_repeat_failure_fixloop_"):
                    assert metric.removeprefix("hive_repeat_failure_fixloop_") in \
                        FIXLOOP_REPOSITORY_SERIES, (panel["title"], metric)
                    assert selector == 'repository=~"$repository"', (panel["title"], metric)
                    continue
                assert 'namespace=~"$namespace"' in selector, (panel["title"], metric)
                if not metric.startswith("hive_repeat_failure_collect_duration"):
                    assert 'agent=~"$agent"' in selector, (panel["title"], metric)
            for metric in re.findall(r"hive_(?:repeat_failure|agent)_\w+(?![\w{])",
                                     target["expr"]):
                assert metric.startswith("hive_repeat_failure_fixloop_") and \
                    metric.removeprefix("hive_repeat_failure_fixloop_").removesuffix(
                        "_bucket") not in FIXLOOP_REPOSITORY_SERIES, (
                    panel["title"], metric, "a hive_ series without a selector")
    ids = [p["id"] for p in d["panels"]] + [p["id"] for p in panels if p not in d["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in d["panels"]:
        g = panel["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine


def test_rows_and_their_panels() -> None:
    """The rows in order, each followed by its panels (left to right, top to bottom): issue 8
    adds "Agent turns" and "Preview" after the repeat-failure check's three rows, issue 9
    "Fix loops" (the fixloop component) last."""
    layout: dict[str, list[str]] = {}
    row = None
    for panel in load_dashboard()["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
            layout[row] = []
        else:
            layout[row].append(panel["title"])
    assert layout == {
        "Agents": ["Agents by check state", "Agent rows", "Sidecars down",
                   "Repeating failures now"],
        "Failing commands": ["Top failing commands", "Notes raised"],
        "Input and sidecar health": ["Records per route and outcome",
                                     "Seconds since the last record", "Rejected record lines",
                                     "Session-log reader errors",
                                     "Collection pass duration (p99)"],
        "Agent turns": ["Newest turn verdict", "Turns per verdict", "Consecutive failed turns"],
        "Preview": ["Preview state", "Preview probes", "Preview errors by reason"],
        "Fix loops": ["Escalated PRs", "Red trees per PR", "Re-engagements",
                      "Shared-breakage checks", "Sweep duration (p99)", "API errors by reason"],
    }


def test_docs_describe_every_panel_and_alert() -> None:
    """docs/metrics.md's "Dashboard and alerts" section names every panel and every alert."""
    doc = METRICS_DOC.read_text()
    section = doc[doc.index("## Dashboard and alerts"):]
    for panel in query_panels(load_dashboard()):
        assert f"**{panel['title']}**" in section, panel["title"]
    for alert in ALERTS:
        assert f"`{alert}`" in section, alert


# --- Issue 8's panels on series shaped as the sidecar's contract says -------------------------

#: The series issue 8 specifies (docs/metrics.md), for two agents of namespace ``agents`` and
#: one of another namespace that ``$namespace`` must filter out; 1-minute samples. Counters grow
#: linearly, so rates and increases over 5 minutes are exact.
_ISSUE_8_SERIES = {
    # web: 1 ok and 2 agent_error turns a minute; newest verdict agent_error, 4 failed in a
    # row; its preview probed once a minute, each probe an entry_empty preview error.
    "web": ("agents", "web-0", "claude", {
        "hive_agent_turns_total": {("verdict", "ok"): "0+1x20",
                                   ("verdict", "agent_error"): "0+2x20",
                                   ("verdict", "nonzero_exit"): "0x20",
                                   ("verdict", "agent_no_output"): "0x20"},
        "hive_agent_turn_verdict": {("verdict", "ok"): "0x20", ("verdict", "agent_error"): "1x20",
                                    ("verdict", "nonzero_exit"): "0x20",
                                    ("verdict", "agent_no_output"): "0x20"},
        "hive_agent_consecutive_failed_turns": {(): "4x20"},
        "hive_agent_preview_probes_total": {(): "0+1x20"},
        "hive_agent_preview_errors_total": {
            (("outcome", "preview_error"), ("reason", "entry_status")): "0x20",
            (("outcome", "preview_error"), ("reason", "entry_empty")): "0+1x20",
            (("outcome", "preview_error"), ("reason", "asset_broken")): "0x20",
            (("outcome", "server_down"), ("reason", "unreachable")): "0x20",
            (("outcome", "server_down"), ("reason", "timeout")): "0x20"},
        "hive_agent_preview_state": {("state", "ok"): "0x20", ("state", "preview_error"): "1x20",
                                     ("state", "server_down"): "0x20"},
    }),
    # cli: 3 ok turns a minute, newest ok; no preview URL (no preview series at all).
    "cli": ("agents", "cli-0", "codex", {
        "hive_agent_turns_total": {("verdict", "ok"): "0+3x20",
                                   ("verdict", "agent_error"): "0x20",
                                   ("verdict", "nonzero_exit"): "0x20",
                                   ("verdict", "agent_no_output"): "0x20"},
        "hive_agent_turn_verdict": {("verdict", "ok"): "1x20", ("verdict", "agent_error"): "0x20",
                                    ("verdict", "nonzero_exit"): "0x20",
                                    ("verdict", "agent_no_output"): "0x20"},
        "hive_agent_consecutive_failed_turns": {(): "0x20"},
    }),
    # elsewhere: another namespace, every value different.
    "elsewhere": ("other-team", "elsewhere-0", "gemini", {
        "hive_agent_turns_total": {("verdict", "agent_no_output"): "0+10x20"},
        "hive_agent_turn_verdict": {("verdict", "agent_no_output"): "1x20"},
        "hive_agent_consecutive_failed_turns": {(): "50x20"},
        "hive_agent_preview_probes_total": {(): "0+10x20"},
        "hive_agent_preview_errors_total": {
            (("outcome", "server_down"), ("reason", "timeout")): "0+10x20"},
        "hive_agent_preview_state": {("state", "server_down"): "1x20"},
    }),
}


def _issue_8_input_series() -> list[dict[str, str]]:
    out = []
    for agent, (namespace, pod, backend, metrics) in _ISSUE_8_SERIES.items():
        for metric, series in metrics.items():
            for extra, values in series.items():
                pairs = extra if extra and isinstance(extra[0], tuple) else (
                    (extra,) if extra else ())
                labels = {"agent": agent, "backend": backend, "namespace": namespace, "pod": pod,
                          "container": "repeat-failure", "endpoint": "rf-metrics",
                          "instance": f"{pod}:9466", "job": "monitoring/repeat-failure",
                          **dict(pairs)}
                text = ",".join(f'{k}="{v}"' for k, v in labels.items())
                out.append({"series": f"{metric}{{{text}}}", "values": values})
    return out


def _target(agent: str) -> dict[str, str]:
    namespace, pod, backend, _ = _ISSUE_8_SERIES[agent]
    return {"agent": agent, "backend": backend, "namespace": namespace, "pod": pod,
            "container": "repeat-failure", "endpoint": "rf-metrics",
            "instance": f"{pod}:9466", "job": "monitoring/repeat-failure"}


#: Per issue 8 panel and ``$agent`` (``.*`` All, or ``web``): the samples its query must give
#: at 10m on :data:`_ISSUE_8_SERIES` with ``$namespace`` = agents and a 5m rate interval.
_ISSUE_8_PANELS: dict[str, dict[str, list[tuple[dict[str, str], float]]]] = {
    "Newest turn verdict": {
        ".*": [({"__name__": "hive_agent_turn_verdict", **_target("web"),
                 "verdict": "agent_error"}, 1),
               ({"__name__": "hive_agent_turn_verdict", **_target("cli"), "verdict": "ok"}, 1)],
        "web": [({"__name__": "hive_agent_turn_verdict", **_target("web"),
                  "verdict": "agent_error"}, 1)]},
    "Turns per verdict": {
        ".*": [({"verdict": "ok"}, 4), ({"verdict": "agent_error"}, 2),
               ({"verdict": "nonzero_exit"}, 0), ({"verdict": "agent_no_output"}, 0)],
        "web": [({"verdict": "ok"}, 1), ({"verdict": "agent_error"}, 2),
                ({"verdict": "nonzero_exit"}, 0), ({"verdict": "agent_no_output"}, 0)]},
    "Consecutive failed turns": {
        ".*": [({"agent": "web", "backend": "claude"}, 4), ({"agent": "cli", "backend": "codex"}, 0)],
        "web": [({"agent": "web", "backend": "claude"}, 4)]},
    "Preview state": {
        ".*": [({"__name__": "hive_agent_preview_state", **_target("web"),
                 "state": "preview_error"}, 1)],
        "web": [({"__name__": "hive_agent_preview_state", **_target("web"),
                  "state": "preview_error"}, 1)]},
    "Preview probes": {
        ".*": [({"agent": "web", "backend": "claude"}, 5)],
        "web": [({"agent": "web", "backend": "claude"}, 5)]},
    "Preview errors by reason": {
        agent: [({"outcome": "preview_error", "reason": "entry_status"}, 0),
                ({"outcome": "preview_error", "reason": "entry_empty"}, 5),
                ({"outcome": "preview_error", "reason": "asset_broken"}, 0),
                ({"outcome": "server_down", "reason": "unreachable"}, 0),
                ({"outcome": "server_down", "reason": "timeout"}, 0)] for agent in (".*", "web")},
}


def _promtool_labels(labels: dict[str, str]) -> str:
    """A sample's labels as promtool's ``exp_samples`` writes them: ``name{k="v", ...}``."""
    rest = ", ".join(f'{k}="{v}"' for k, v in labels.items() if k != "__name__")
    return labels.get("__name__", "") + "{" + rest + "}"


@needs_promtool
def test_agent_turn_and_preview_panels_on_contract_series(tmp_path: Path) -> None:
    """Issue 8's panels, whose series the end-to-end sidecar above barely produces (no turn
    ends there and no agent has a preview URL): each panel's query, as Grafana would send it
    (``$namespace`` agents, ``$agent`` All or ``web``, ``$__rate_interval`` 5m), evaluated by
    ``promtool test rules`` (``promql_expr_test``) on series named and labelled as the
    contract specifies, gives exactly the expected samples: e.g. 1 ok + 2 agent_error turns a
    minute for web and 3 ok for cli stack to ok 4, agent_error 2 per minute; web's newest
    verdict agent_error and 4 failed turns in a row; its 5 probes and 5 entry_empty errors in
    5 minutes. The other namespace's agent never shows."""
    assert set(_ISSUE_8_PANELS) == set(PANEL_TITLES[-12:-6])
    cases = []
    for title, by_agent in _ISSUE_8_PANELS.items():
        (target,) = _panel(title)["targets"]
        for agent, samples in by_agent.items():
            expr = target["expr"]
            for name, value in (("$__rate_interval", "5m"), ("$namespace", "agents"),
                                ("$agent", agent)):
                expr = expr.replace(name, value)
            cases.append({"expr": expr, "eval_time": "10m", "exp_samples": [
                {"labels": _promtool_labels(labels), "value": value}
                for labels, value in samples]})
    (tmp_path / "empty-rules.yaml").write_text("groups: []\n")
    test_file = tmp_path / "panels.test.yaml"
    test_file.write_text(yaml.safe_dump({
        "rule_files": ["empty-rules.yaml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": _issue_8_input_series(),
                   "promql_expr_test": cases}]}, sort_keys=False))
    done = subprocess.run(["promtool", "test", "rules", str(test_file)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout
    assert len(cases) == 12


@needs_promtool
def test_agent_rows_build_the_note_text_from_bounded_series(tmp_path: Path) -> None:
    """Issue 29: *Agent rows* puts the row's note together from series whose labels never
    change with a count or a time. On contract series (agent web: two notes, the row showing
    ``make test`` exit 2 with 7 failures over 220 s; ``npm ci`` over exactly 60 s; agent cli:
    no note), its four queries give: the rows (A), N = 7 (B, the shown note only), M = 4 (C:
    220 s rounded up to minutes; 60 s would be 1, not 2) and K = 1 (D; none for cli)."""
    target = {"namespace": "agents", "job": "agents/rf", "container": "repeat-failure"}
    web = {**target, "pod": "web-0", "agent": "web", "backend": "claude"}
    cli = {**target, "pod": "cli-0", "agent": "cli", "backend": "codex"}
    make = {"command": "make test", "exit": "2"}
    npm = {"command": "npm ci", "exit": "1"}
    series = [
        ({"__name__": "hive_repeat_failure_row_info", **web, **make, "state": "on"}, "1x20"),
        ({"__name__": "hive_repeat_failure_row_info", **cli, "state": "on"}, "1x20"),
        ({"__name__": "hive_repeat_failure_note", **web, **make, "output": "same"}, "7x20"),
        ({"__name__": "hive_repeat_failure_note", **web, **npm, "output": "same"}, "5x20"),
        ({"__name__": "hive_repeat_failure_note_span_seconds", **web, **make, "output": "same"},
         "220x20"),
        ({"__name__": "hive_repeat_failure_note_span_seconds", **web, **npm, "output": "same"},
         "60x20"),
        ({"__name__": "hive_repeat_failure_notes_active", **web}, "2x20"),
        ({"__name__": "hive_repeat_failure_notes_active", **cli}, "0x20"),
    ]
    key = lambda labels: {k: labels[k] for k in ("namespace", "pod", "agent", "backend")}  # noqa: E731
    want = {"A": [({**key(web), **make, "state": "on"}, 1), ({**key(cli), "state": "on"}, 1)],
            "B": [({**key(web), **make}, 7)], "C": [({**key(web), **make}, 4)],
            "D": [(key(web), 1)]}
    targets = _panel("Agent rows")["targets"]
    assert [target["refId"] for target in targets] == list(want)
    cases = []
    for target in targets:
        expr = target["expr"].replace("$namespace", "agents").replace("$agent", ".*")
        cases.append({"expr": expr, "eval_time": "10m", "exp_samples": [
            {"labels": _promtool_labels(labels), "value": value}
            for labels, value in want[target["refId"]]]})
    (tmp_path / "empty-rules.yaml").write_text("groups: []\n")
    test_file = tmp_path / "rows.test.yaml"
    test_file.write_text(yaml.safe_dump({
        "rule_files": ["empty-rules.yaml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m",
                   "input_series": [{"series": _promtool_labels(labels), "values": values}
                                    for labels, values in series],
                   "promql_expr_test": cases}]}, sort_keys=False))
    done = subprocess.run(["promtool", "test", "rules", str(test_file)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout


# --- Issue 9's fix-loop panels on series shaped as the fixloop's contract says ----------------

#: The fixloop's target, as its PodMonitor <fullname>-fixloop labels it.
_FIXLOOP_TARGET = {"namespace": "repeat-failure", "pod": "rf-repeat-failure-fixloop-5d8f7-x2x9z",
                   "container": "repeat-failure-fixloop", "endpoint": "metrics",
                   "instance": "10.1.2.9:9467", "job": "repeat-failure/rf-repeat-failure-fixloop"}

#: The fixloop's series for two repositories, 1-minute samples (metric -> extra labels ->
#: values). Counters grow linearly, so increases over 5 minutes are exact. hive/app: one PR
#: escalated (3 red trees), another at 1; a kick delivered a minute. hive/web: nothing
#: escalated, one PR at 2 red trees, two failed kicks a minute, 2 checks shared breakage.
#: A sweep a minute, each between 1 and 5 s; 1 rate-limited and 3 timed-out API calls a minute.
_FIXLOOP_SERIES: dict[str, dict[tuple[tuple[str, str], ...], str]] = {
    "hive_repeat_failure_fixloop_escalated_prs": {
        (("repository", "hive/app"),): "1x20", (("repository", "hive/web"),): "0x20"},
    "hive_repeat_failure_fixloop_red_trees": {
        (("repository", "hive/app"), ("pr", "12")): "3x20",
        (("repository", "hive/app"), ("pr", "15")): "1x20",
        (("repository", "hive/web"), ("pr", "7")): "2x20"},
    "hive_repeat_failure_fixloop_reengagements_total": {
        (("repository", "hive/app"), ("outcome", "delivered")): "0+1x20",
        (("repository", "hive/app"), ("outcome", "failed")): "0x20",
        (("repository", "hive/web"), ("outcome", "delivered")): "0x20",
        (("repository", "hive/web"), ("outcome", "failed")): "0+2x20"},
    "hive_repeat_failure_fixloop_shared_breakage_checks": {
        (("repository", "hive/app"),): "0x20", (("repository", "hive/web"),): "2x20"},
    "hive_repeat_failure_fixloop_sweep_duration_seconds_bucket": {
        (("le", "1"),): "0x20", (("le", "5"),): "0+1x20", (("le", "30"),): "0+1x20",
        (("le", "+Inf"),): "0+1x20"},
    "hive_repeat_failure_fixloop_sweeps_total": {
        (("outcome", "complete"),): "0+1x20", (("outcome", "partial"),): "0x20",
        (("outcome", "failed"),): "0x20"},
    "hive_repeat_failure_fixloop_api_errors_total": {
        (("reason", "rate_limited"),): "0+1x20", (("reason", "auth"),): "0x20",
        (("reason", "timeout"),): "0+3x20"},
}


def _fixloop_input_series() -> list[dict[str, str]]:
    out = []
    for metric, series in _FIXLOOP_SERIES.items():
        for extra, values in series.items():
            labels = {**_FIXLOOP_TARGET, **dict(extra)}
            text = ",".join(f'{k}="{v}"' for k, v in labels.items())
            out.append({"series": f"{metric}{{{text}}}", "values": values})
    return out


def _red_trees(repository: str, pr: str) -> dict[str, str]:
    return {"__name__": "hive_repeat_failure_fixloop_red_trees", **_FIXLOOP_TARGET,
            "repository": repository, "pr": pr}


#: Per fix-loop panel and ``$repository`` (``.*`` All, or ``hive/app``): the samples its query
#: must give at 10m on :data:`_FIXLOOP_SERIES` with a 5m rate interval.
_FIXLOOP_PANELS: dict[str, dict[str, list[tuple[dict[str, str], float]]]] = {
    "Escalated PRs": {
        ".*": [({"repository": "hive/app"}, 1), ({"repository": "hive/web"}, 0)],
        "hive/app": [({"repository": "hive/app"}, 1)]},
    "Red trees per PR": {
        ".*": [(_red_trees("hive/app", "12"), 3), (_red_trees("hive/app", "15"), 1),
               (_red_trees("hive/web", "7"), 2)],
        "hive/app": [(_red_trees("hive/app", "12"), 3), (_red_trees("hive/app", "15"), 1)]},
    "Re-engagements": {
        ".*": [({"repository": "hive/app", "outcome": "delivered"}, 5),
               ({"repository": "hive/app", "outcome": "failed"}, 0),
               ({"repository": "hive/web", "outcome": "delivered"}, 0),
               ({"repository": "hive/web", "outcome": "failed"}, 10)],
        "hive/app": [({"repository": "hive/app", "outcome": "delivered"}, 5),
                     ({"repository": "hive/app", "outcome": "failed"}, 0)]},
    "Shared-breakage checks": {
        ".*": [({"repository": "hive/app"}, 0), ({"repository": "hive/web"}, 2)],
        "hive/app": [({"repository": "hive/app"}, 0)]},
    # Every sweep in (1 s, 5 s]: the 99th percentile interpolates to 1 + 4 * 0.99 (4.96, as
    # Prometheus computes it in floating point; promtool compares exactly).
    "Sweep duration (p99)": {
        repo: [({"namespace": _FIXLOOP_TARGET["namespace"], "pod": _FIXLOOP_TARGET["pod"]},
                4.960000000000001)] for repo in (".*", "hive/app")},
    "API errors by reason": {
        repo: [({"reason": "rate_limited"}, 5), ({"reason": "auth"}, 0),
               ({"reason": "timeout"}, 15)] for repo in (".*", "hive/app")},
}
FIXLOOP_PANELS = tuple(_FIXLOOP_PANELS)


@needs_promtool
def test_fixloop_panels_on_contract_series(tmp_path: Path) -> None:
    """Issue 9's "Fix loops" row: each panel's query, as Grafana would send it
    (``$repository`` All or ``hive/app``, ``$__rate_interval`` 5m), evaluated by ``promtool
    test rules`` on series named and labelled as the fixloop's contract specifies, gives
    exactly the expected samples: hive/app's 1 escalated PR and its PRs' red trees (3 and 1),
    5 delivered kicks in 5 minutes there and 10 failed ones at hive/web, hive/web's 2
    shared-breakage checks, a p99 sweep of 4.96 s, and 5 rate-limited and 15 timed-out API
    calls (the last two panels are not per repository)."""
    assert FIXLOOP_PANELS == tuple(PANEL_TITLES[-6:])
    cases = []
    for title, by_repository in _FIXLOOP_PANELS.items():
        (target,) = _panel(title)["targets"]
        for repository, samples in by_repository.items():
            expr = target["expr"]
            for name, value in (("$__rate_interval", "5m"), ("$repository", repository)):
                expr = expr.replace(name, value)
            assert "$" not in expr, expr
            cases.append({"expr": expr, "eval_time": "10m", "exp_samples": [
                {"labels": _promtool_labels(labels), "value": value}
                for labels, value in samples]})
    (tmp_path / "empty-rules.yaml").write_text("groups: []\n")
    test_file = tmp_path / "fixloop-panels.test.yaml"
    test_file.write_text(yaml.safe_dump({
        "rule_files": ["empty-rules.yaml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": _fixloop_input_series(),
                   "promql_expr_test": cases}]}, sort_keys=False))
    done = subprocess.run(["promtool", "test", "rules", str(test_file)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout
    assert len(cases) == 12


@needs_promtool
def test_fixloop_alert_expressions_on_contract_series(tmp_path: Path) -> None:
    """Both fixloop alert expressions on the same contract series at 10m: the escalation one
    gives hive/app's gauge (1), not hive/web's (0); the sweeps one nothing (a complete sweep a
    minute, the newest 0 s old)."""
    rules = {r["alert"]: r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"]
             for r in g["rules"]}
    series = _fixloop_input_series() + [{
        "series": "hive_repeat_failure_fixloop_last_sweep_timestamp_seconds{"
                  + ",".join(f'{k}="{v}"' for k, v in _FIXLOOP_TARGET.items()) + "}",
        "values": "0+60x20"}]
    cases = [
        {"expr": rules["RepeatFailureFixLoopEscalated"], "eval_time": "10m", "exp_samples": [
            {"labels": _promtool_labels({"__name__": "hive_repeat_failure_fixloop_escalated_prs",
                                         **_FIXLOOP_TARGET, "repository": "hive/app"}),
             "value": 1}]},
        {"expr": rules["RepeatFailureFixLoopSweepsFailing"], "eval_time": "10m",
         "exp_samples": []},
    ]
    (tmp_path / "empty-rules.yaml").write_text("groups: []\n")
    test_file = tmp_path / "fixloop-alerts.test.yaml"
    test_file.write_text(yaml.safe_dump({
        "rule_files": ["empty-rules.yaml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": cases}]},
        sort_keys=False))
    done = subprocess.run(["promtool", "test", "rules", str(test_file)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout


# --- End to end: real sidecar, real bash, real Prometheus ------------------------------------

NAMESPACE = "agents-e2e"
POD = "agent-pod-0"
JOB = "monitoring/repeat-failure"
LS = "ls /nonexistent"


def wait_for(what: str, predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
    """``predicate()``'s first truthy value, polled every 0.1 s; fails naming ``what``."""
    end = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < end:
        try:
            last = predicate()
        except OSError as exc:  # not listening yet
            last = exc
        else:
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@dataclass
class Prometheus:
    """A running ``prometheus`` on loopback and its HTTP API."""

    base: str
    proc: subprocess.Popen

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``'s ``data``; fails on an error status."""
        url = f"{self.base}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        """An instant query (at ``at``, else now): ``(labels, value)`` per series, sorted."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.api("query", **params)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        assert data["resultType"] == "vector", data
        return sorted(((r["metric"], float(r["value"][1])) for r in data["result"]),
                      key=lambda item: sorted(item[0].items()))

    def values(self, expr: str, by: str) -> dict[str, float]:
        """``{label value: sample value}`` of an instant query now."""
        return {labels.get(by, ""): value for labels, value in self.query(expr)}

    def last_scrape(self) -> float:
        """The timestamp of the newest scrape of the sidecar (seconds, ms precision)."""
        ((_, ts),) = self.query(f'timestamp(up{{job="{JOB}"}})')
        return round(ts, 3)


@dataclass
class Stack:
    """The running sidecar and Prometheus, and what the test saw while feeding them."""

    sidecar: subprocess.Popen
    sidecar_port: int
    sidecar_log: list[str]
    prom: Prometheus
    shared: Path
    t0: float = 0.0
    t1: float = 0.0
    alerts_before_kill: list[dict[str, Any]] = field(default_factory=list)

    @property
    def target(self) -> dict[str, str]:
        """The scrape target's labels, as prometheus-operator's PodMonitor would set them."""
        return {"job": JOB, "instance": f"127.0.0.1:{self.sidecar_port}",
                "namespace": NAMESPACE, "pod": POD, "container": "repeat-failure",
                "endpoint": "rf-metrics"}

    @property
    def window_ms(self) -> int:
        """From 1 ms before the scrape between the phases to the scrape after them."""
        return round((self.t1 - self.t0) * 1000) + 1

    @property
    def seconds(self) -> float:
        """Seconds between the two scrapes: ``rate`` divides phase B's counts by this."""
        return (round(self.t1 * 1000) - round(self.t0 * 1000)) / 1000


def _claude_midturn_home(home: Path) -> float:
    """Copy Claude Code's real mid-turn session (harness evidence: `ls /nonexistent` finished,
    a second command still running, the turn not ended) into ``home``; returns the time of its
    first event."""
    src = EVIDENCE / "claude" / "midturn"
    for path in src.rglob("*.jsonl"):
        dest = home / path.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes()
        dest.write_bytes(data[:data.rfind(b"\n") + 1])  # whole lines only
    events = SessionTail(session_reader("claude"), home, backfill_s=1e12).poll().events
    return min(e.ts for e in events)


def _append(path: Path, line: bytes) -> None:
    """Append one line in a single write(2), as the hook does (mode 0660 under umask 007)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o660)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _start_sidecar(tmp: Path) -> tuple[subprocess.Popen, int, list[str], Path, Path]:
    home = tmp / "a2-home"
    first_event = _claude_midturn_home(home)
    shared = tmp / "shared"
    # a2's sidecar has watched since before the captured session began (calls from before a
    # sidecar first started had no hook, so they would not count).
    (shared / "state").mkdir(parents=True)
    (shared / "state" / "a2.json").write_text(json.dumps(
        {"version": 1, "agent": "a2", "detector": Detector(3, 600).to_dict(),
         "activity": {"not_before": first_event - 1}}))
    config = tmp / "config.yaml"
    config.write_text(
        "repeat_failure:\n  enabled: true\n  threshold: 3\n  window_s: 600\n"
        "  no_data_after_s: 1\n  collect_interval_s: 1\n  collect_grace_s: 0.5\n"
        "  exclude: [sleep]\n  agents:\n"
        "    - {name: a1, backend: bash}\n"
        f"    - {{name: a2, backend: claude, home: {home}, preview_url: 'http://127.0.0.1:9/'}}\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("REPEAT_FAILURE_") and k != "BASH_ENV"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "repeat_failure", "run", "--config", str(config), "--shared-dir",
         str(shared), "--listen", "127.0.0.1:0"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    log: list[str] = []

    def drain() -> None:
        with proc.stderr:  # closed at EOF, when the sidecar exits
            log.extend(proc.stderr)

    threading.Thread(target=drain, daemon=True).start()

    def started() -> int | None:
        for line in list(log):
            if '"sidecar started"' in line:
                return json.loads(line)["port"]
        assert proc.poll() is None, f"the sidecar exited: {log}"
        return None

    port = wait_for("the sidecar to start", started)
    wait_for("the hook", lambda: hook.hook_path(shared, "a1").is_file())
    return proc, port, log, shared, home


def _start_prometheus(tmp: Path, sidecar_port: int) -> Prometheus:
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                   "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{
            "job_name": "podMonitor/monitoring/repeat-failure/0",  # prometheus-operator's name
            "static_configs": [{
                "targets": [f"127.0.0.1:{sidecar_port}"],
                "labels": {"job": JOB, "namespace": NAMESPACE, "pod": POD,
                           "container": "repeat-failure", "endpoint": "rf-metrics"},
            }],
        }],
    }))
    with open(tmp / "prometheus.log", "wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    prom = Prometheus(f"http://127.0.0.1:{port}", proc)

    def ready() -> bool:
        assert proc.poll() is None, (tmp / "prometheus.log").read_text()
        with urllib.request.urlopen(f"{prom.base}/-/ready", timeout=2) as resp:
            return resp.status == 200

    wait_for("prometheus to be ready", ready)
    return prom


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    """Sidecar and Prometheus running, fed in two phases (see the module docstring):

    - phase A: a1 runs `ls /nonexistent`, `false`, `true`, `sleep 0` (excluded) once each, its
      record file gets one line that is not a record, and a2's session log one cut line;
    - scrape ``t0``;
    - phase B: a1 runs `ls /nonexistent` 4 more times (5: the note, raised at the 3rd), `false`
      once more (2: below the threshold), `true` twice more (3); two more bad record lines and
      one more cut session line;
    - scrape ``t1``, after which the pending alerts are recorded.
    """
    tmp = tmp_path_factory.mktemp("monitoring")
    sidecar = prom = None
    try:
        sidecar, port, log, shared, home = _start_sidecar(tmp)
        prom = _start_prometheus(tmp, port)
        st = Stack(sidecar, port, log, prom, shared)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8",
               **hook.launch_env(shared, "a1", {})}
        records = hook.records_path(shared, "a1")
        (session,) = home.rglob("*.jsonl")

        def run(command: str) -> int:
            return subprocess.run(["bash", "-c", command], env=env, capture_output=True,
                                  timeout=30).returncode

        wait_for("a first scrape", lambda: prom.query(f'up{{job="{JOB}"}} == 1'))
        assert [run(LS), run("false"), run("true"), run("sleep 0")] == [2, 1, 0, 0]
        _append(records, b"this is not a record\n")
        _append(session, b'{"type": "assistant", "message": {"cut\n')
        phase_a = {"failure": 2, "success": 1, "excluded": 1}
        wait_for("phase A in Prometheus", lambda: (
            prom.values("hive_repeat_failure_records_total", "outcome") == phase_a
            and prom.values("hive_repeat_failure_records_rejected_total", "reason")
            == {"malformed": 1}
            and prom.values("hive_repeat_failure_reader_errors_total", "reason")
            == {"not_json": 1}
            and prom.values("hive_repeat_failure_notes_raised_total", "agent")
            == {"a1": 0, "a2": 0}
            and prom.values("hive_repeat_failure_check_state == 1", "agent")
            == {"a1": 1, "a2": 1}))
        st.t0 = prom.last_scrape()

        assert [run(LS) for _ in range(4)] + [run("false"), run("true"), run("true")] == (
            [2] * 4 + [1, 0, 0])
        _append(records, b"still not a record\n" + b"{\n")
        _append(session, b"not json either\n")
        final = {"failure": 7, "success": 3, "excluded": 1}
        wait_for("phase B in Prometheus", lambda: (
            prom.values("hive_repeat_failure_records_total", "outcome") == final
            and prom.values("hive_repeat_failure_records_rejected_total", "reason")
            == {"malformed": 3}
            and prom.values("hive_repeat_failure_reader_errors_total", "reason")
            == {"not_json": 2}
            and prom.values("hive_repeat_failure_note", "command") == {LS: 5}))
        st.t1 = prom.last_scrape()
        assert st.t1 - st.t0 >= 0.9  # at least one scrape interval apart

        def pending() -> list[dict[str, Any]] | None:
            alerts = prom.api("alerts")["alerts"]
            return alerts if len(alerts) == 3 else None  # + the injector-down (no injector)

        st.alerts_before_kill = wait_for("the three pending alerts", pending)
        yield st
    finally:
        _stop(sidecar)
        if prom is not None:
            _stop(prom.proc)


def substitute(expr: str, st: Stack, agent: str) -> str:
    """The query Grafana would send: ``$namespace`` the target's namespace, ``$agent`` the
    selection (``.*`` for All), ``$__rate_interval``/``$__interval``/``$__range`` the exact
    window between the scrapes t0 and t1 (see the module docstring)."""
    window = f"{st.window_ms}ms"
    for name, value in (("$__rate_interval", window), ("$__interval", window),
                        ("$__range", window), ("$namespace", NAMESPACE), ("$agent", agent),
                        ("$repository", ".*")):
        expr = expr.replace("${" + name[1:] + "}", value).replace(name, value)
    assert "$" not in expr, expr
    return expr


def _panel(title: str) -> dict[str, Any]:
    (panel,) = [p for p in query_panels(load_dashboard()) if p["title"] == title]
    return panel


PANEL_TITLES = [p["title"] for p in query_panels(load_dashboard())]


def expected_panels(st: Stack, agent: str) -> dict[str, Any]:
    """Per panel title: the series and values its query must return at t1 with ``$agent`` set
    to ``agent`` (``.*`` is All). Rates are phase B's counts over :attr:`Stack.seconds`."""
    both = agent == ".*"
    w = st.seconds
    t = st.target
    # Agent rows (issue 29): row_info names the row and its note's command and exit; the
    # note's N (5), M (1: 40 s) and K (none: a1 has one note) come from their own series.
    row = {"namespace": NAMESPACE, "pod": POD}
    a1_note = {**row, "agent": "a1", "backend": "bash", "command": LS, "exit": "2"}
    rows = {"A": [({**a1_note, "state": "on"}, 1.0)],  # "" is no label at all
            "B": [(a1_note, 5.0)], "C": [(a1_note, 1.0)], "D": []}
    states = [({"state": "on"}, 1.0)]
    raised = [({"agent": "a1", "backend": "bash"}, pytest.approx(1.0, rel=5e-3))]
    reader_errors: list[tuple[dict[str, str], Any]] = []
    if both:
        rows["A"].append(({**row, "agent": "a2", "backend": "claude",
                           "state": "not_receiving_data",
                           "state_text": "repeat-failure check not receiving data"}, 1.0))
        states.append(({"state": "not_receiving_data"}, 1.0))
        raised.append(({"agent": "a2", "backend": "claude"}, 0.0))
        reader_errors = [({"agent": "a2", "backend": "claude", "reason": "not_json"},
                          pytest.approx(1.0, rel=5e-3))]
    return {
        "Agents by check state": states,
        "Agent rows": rows,
        "Sidecars down": [({}, 0.0)],
        "Repeating failures now": [
            ({"__name__": "hive_repeat_failure_note", **t, "agent": "a1", "backend": "bash",
              "command": LS, "exit": "2", "output": "unknown"}, 5.0)],
        "Top failing commands": [
            ({"__name__": "hive_repeat_failure_command_failures", **t, "agent": "a1",
              "backend": "bash", "command": "false", "exit": "1"}, 2.0),
            ({"__name__": "hive_repeat_failure_command_failures", **t, "agent": "a1",
              "backend": "bash", "command": LS, "exit": "2"}, 5.0)],
        "Notes raised": raised,
        "Records per route and outcome": [
            ({"route": "bash_env", "outcome": "excluded"}, 0.0),
            ({"route": "bash_env", "outcome": "failure"}, pytest.approx(5 / w, rel=1e-6)),
            ({"route": "bash_env", "outcome": "success"}, pytest.approx(2 / w, rel=1e-6))],
        "Seconds since the last record": [
            ({"agent": "a1", "backend": "bash"}, lambda v: 0 < v < w)],
        "Rejected record lines": [
            ({"agent": "a1", "reason": "malformed"}, pytest.approx(2.0, rel=5e-3))],
        "Session-log reader errors": reader_errors,
        "Collection pass duration (p99)": [
            ({"namespace": NAMESPACE, "pod": POD}, lambda v: 0 < v <= 2.5)],
        # Issue 8. a2's session log is read: its four verdict counters exist at 0 and its run
        # of failed turns is 0; its only turn has not ended, so no verdict yet. a2 also has a
        # preview URL: its probe counter and the five error series exist at 0, and no probe
        # has run (its turn has not ended), so no preview state. a1 (bash) has no session log:
        # no turn series, and a preview URL would not be exported (no turn, no probe).
        # test_agent_turn_and_preview_panels_on_contract_series checks these queries on data.
        "Newest turn verdict": [],
        "Turns per verdict": [({"verdict": v}, 0.0) for v in
                              (("ok", "agent_error", "nonzero_exit", "agent_no_output")
                               if both else ())],
        "Consecutive failed turns": [({"agent": "a2", "backend": "claude"}, 0.0)] if both else [],
        "Preview state": [],
        "Preview probes": [({"agent": "a2", "backend": "claude"}, 0.0)] if both else [],
        "Preview errors by reason": [
            ({"outcome": outcome, "reason": reason}, 0.0) for outcome, reason in (
                ("preview_error", "entry_status"), ("preview_error", "entry_empty"),
                ("preview_error", "asset_broken"), ("server_down", "unreachable"),
                ("server_down", "timeout"))] if both else [],
        # Issue 9: no fixloop runs here, so its panels are empty (and no query fails);
        # test_fixloop_panels_on_contract_series checks them on data.
        **{title: [] for title in FIXLOOP_PANELS},
    }


def assert_series(got: list[tuple[dict[str, str], float]],
                  want: list[tuple[dict[str, str], Any]], what: str) -> None:
    """The same label sets, and each value equal to (or accepted by) the expected one."""
    key = lambda labels: sorted(labels.items())  # noqa: E731
    got_sorted = sorted(got, key=lambda item: key(item[0]))
    want_sorted = sorted(want, key=lambda item: key(item[0]))
    assert [g for g, _ in got_sorted] == [w for w, _ in want_sorted], what
    for (labels, value), (_, expected) in zip(got_sorted, want_sorted):
        if callable(expected) and not hasattr(expected, "expected"):
            assert expected(value), (what, labels, value)
        else:
            assert value == expected, (what, labels, value)


@needs_prometheus
def test_template_variables_list_the_namespace_and_agents(stack: Stack) -> None:
    """The namespace variable's label_values gives the target's namespace, and the agent
    variable's (with $namespace substituted) both agents, as Grafana asks Prometheus; the
    repository variable's nothing (no fixloop here)."""
    variables = {v["name"]: v["query"] for v in load_dashboard()["templating"]["list"]}
    got = {}
    for name in ("namespace", "agent", "repository"):
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", variables[name])
        selector, label = substitute(match[1], stack, ".*"), match[2]
        got[name] = stack.prom.api(f"label/{label}/values", **{"match[]": selector})
    assert got == {"namespace": [NAMESPACE], "agent": ["a1", "a2"], "repository": []}


@needs_prometheus
@pytest.mark.parametrize("agent", [".*", "a1"], ids=["all-agents", "agent-a1"])
@pytest.mark.parametrize("title", PANEL_TITLES)
def test_panel_query_against_real_prometheus(stack: Stack, title: str, agent: str) -> None:
    """Each panel's query, as Grafana would send it, returns at t1 exactly the series and values
    the commands give: e.g. check state on = 1 for a1 and not_receiving_data = 1 for a2; the
    note and command failures for `ls /nonexistent` exit 2 = 5, `false` exit 1 = 2; records
    per route: failure 5/(t1-t0)/s, success 2/(t1-t0)/s, excluded 0; notes raised 1 for a1;
    rejected malformed 2; reader errors not_json 1 for a2. With ``$agent = a1`` only a1's.
    A panel of several queries (*Agent rows*) is checked query by query (by ``refId``)."""
    want = expected_panels(stack, agent)[title]
    targets = _panel(title)["targets"]
    if not isinstance(want, dict):
        (target,) = targets
        want = {target["refId"]: want}
    assert sorted(want) == sorted(target["refId"] for target in targets), title
    for target in targets:
        expr = substitute(target["expr"], stack, agent)
        got = stack.prom.query(expr, at=stack.t1)
        assert_series(got, want[target["refId"]], f"{title} {target['refId']}: {expr}")


@needs_prometheus
def test_alert_expressions_against_real_prometheus(stack: Stack) -> None:
    """Each alert's expression at t1: the note series of a1 (value 5), a2's
    not_receiving_data (value 1, a1 absent), no sidecar down, no run of failed turns (a2's is
    0), no broken preview (none probed), and no fixloop alert (no fixloop series); the
    loaded rule groups have the nine alerts, healthy (no collection failing: the sidecar's
    passes end ok)."""
    rules = {r["alert"]: r for g in yaml.safe_load(RULES.read_text())["groups"]
             for r in g["rules"]}
    t = stack.target
    want = {
        # `max without (output)`: no metric name and no output label (docs/metrics.md).
        "RepeatFailureRepeatingFailure": [
            ({**t, "agent": "a1", "backend": "bash", "command": LS, "exit": "2"}, 5.0)],
        "RepeatFailureCheckNotReceivingData": [
            ({**t, "agent": "a2", "backend": "claude", "state": "not_receiving_data"}, 1.0)],
        "RepeatFailureSidecarDown": [],
        "RepeatFailureCollectionFailing": [],
        "RepeatFailureAgentTurnsFailing": [],
        "RepeatFailurePreviewBroken": [],
        # No fixloop runs here: its alerts are harmless without its series.
        "RepeatFailureFixLoopEscalated": [],
        "RepeatFailureFixLoopInconclusive": [],
        "RepeatFailureFixLoopSweepsFailing": [],
        # No injector runs here either: no injector target is up, which is what this says.
        "RepeatFailureInjectorDown": [({}, 1.0)],
        "RepeatFailureInjectorAdmissionsFailing": [],
        "RepeatFailureInjectorCertificateExpiring": [],
    }
    for name, rule in rules.items():
        assert_series(stack.prom.query(rule["expr"], at=stack.t1), want[name], name)
    groups = stack.prom.api("rules")["groups"]
    assert [(g["name"], g["file"]) for g in groups] == [
        ("repeat-failure", str(RULES)), ("repeat-failure-fixloop", str(RULES)),
        ("repeat-failure-injector", str(RULES))]
    assert [(r["name"], r["type"], r["health"]) for g in groups for r in g["rules"]] == [
        (name, "alerting", "ok") for name in ALERTS]


@needs_prometheus
def test_pending_alerts_are_rendered_from_real_series(stack: Stack) -> None:
    """While the sidecar runs, the repeating-failure and not-receiving-data alerts are pending
    (and the injector-down one: this stack runs no injector; their ``for`` has not passed) with the series' labels and the annotations rendered by
    Prometheus: agent, backend, command, exit and the count 5."""
    t = stack.target
    got = sorted(((a["labels"], a["state"], a["annotations"]) for a in stack.alerts_before_kill),
                 key=lambda item: item[0]["alertname"])
    assert got == [
        ({"alertname": "RepeatFailureCheckNotReceivingData", "severity": "warning", **t,
          "agent": "a2", "backend": "claude", "state": "not_receiving_data"}, "pending",
         {"runbook_url": RUNBOOK + "#repeatfailurechecknotreceivingdata",
          "summary": "repeat-failure check not receiving data for agent a2",
          "description": (
              f"Agent a2 (claude, namespace {NAMESPACE}, pod {POD}) runs shell commands "
              "according to its session log, but no command record has reached the sidecar "
              "for no_data_after_s: its repeating failures go unseen. Check that the agent's "
              "shells still load the hook (BASH_ENV, SHELL=/bin/bash), that the agent can "
              "write the shared records directory, and whether its CLI was updated "
              "(docs/backend-support.md).")}),
        # No injector in this stack: the injector-down alert is pending (the chart renders
        # the injector's group only with the injector and its PodMonitor).
        ({"alertname": "RepeatFailureInjectorDown", "severity": "warning"}, "pending",
         {"summary": "repeat-failure injector down: no replica can be scraped",
          "description": (
              "Prometheus has scraped no repeat-failure injector replica (endpoint "
              "rf-inj-metrics, port 9468) for 5 minutes. With failurePolicy Ignore, agent pods "
              "created meanwhile start without the sidecar and run unwatched until they are "
              "recreated. Look at the injector Deployment (kubectl get deploy,pods -l "
              "app.kubernetes.io/component=injector), its logs and events, and the "
              "PodMonitor."),
          "runbook_url": RUNBOOK + "#repeatfailureinjectordown"}),
        ({"alertname": "RepeatFailureRepeatingFailure", "severity": "warning", **t,
          "agent": "a1", "backend": "bash", "command": LS, "exit": "2"},
         "pending",
         {"runbook_url": RUNBOOK + "#repeatfailurerepeatingfailure",
          "summary": f"Agent a1 keeps running a failing command: {LS} (exit 2)",
          "description": (
              f"Agent a1 (bash, namespace {NAMESPACE}, pod {POD}) has run \"{LS}\", which "
              "failed 5 times within the repeat-failure window (exit 2); the note has been "
              "raised for over 10 minutes. repeat-failure never stops the agent: look at what "
              "it is trying to do (its session, the command's output) and help it or stop "
              "it.")}),
    ]


@needs_prometheus
def test_killed_sidecar_shows_in_sidecar_down(stack: Stack) -> None:
    """SIGKILL the sidecar: the sidecar-down expression returns its target with up = 0, the
    "Sidecars down" panel counts 1, the alert goes pending, and the note series goes stale (so
    the repeating-failure alert is no longer pending). Queries at t1 still see the old data."""
    stack.sidecar.kill()
    stack.sidecar.wait(timeout=10)
    prom = stack.prom
    (down_expr,) = [r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"]
                    for r in g["rules"] if r["alert"] == "RepeatFailureSidecarDown"]
    got = wait_for("up == 0", lambda: prom.query(down_expr))
    assert got == [({"__name__": "up", **stack.target}, 0.0)]
    (panel_target,) = _panel("Sidecars down")["targets"]
    assert prom.query(substitute(panel_target["expr"], stack, ".*")) == [({}, 1.0)]
    assert prom.query("hive_repeat_failure_note") == []

    def sidecar_down_pending() -> list[dict[str, Any]] | None:
        alerts = [a for a in prom.api("alerts")["alerts"]
                  if a["labels"]["alertname"] == "RepeatFailureSidecarDown"]
        return alerts or None

    (alert,) = wait_for("the sidecar-down alert", sidecar_down_pending)
    assert (alert["labels"], alert["state"]) == (
        {"alertname": "RepeatFailureSidecarDown", "severity": "warning", **stack.target},
        "pending")
    assert alert["annotations"]["summary"] == (
        f"repeat-failure sidecar {NAMESPACE}/{POD} cannot be scraped")
    assert not [a for a in prom.api("alerts")["alerts"]
                if a["labels"]["alertname"] == "RepeatFailureRepeatingFailure"]
    assert prom.query('hive_repeat_failure_note{agent="a1"}', at=stack.t1)[0][1] == 5.0
