"""The fix-loop ledger's Prometheus metrics (``hive_repeat_failure_fixloop_*``).

Same conventions as the sidecar's exporter (:mod:`repeat_failure.sidecar.exporter`): a custom collector builds
every family at scrape time from the sweeper's state (:class:`repeat_failure.fixloop.sweep.SweepStats`)
and owns nothing, so a PR that leaves the ledger leaves the metrics by construction.

================================================================  ========  =====================
metric                                                            type      labels
================================================================  ========  =====================
``hive_repeat_failure_fixloop_red_trees``                         gauge     repository, pr
``hive_repeat_failure_fixloop_escalated_prs``                     gauge     repository
``hive_repeat_failure_fixloop_escalations_total``                 counter   repository, kind
``hive_repeat_failure_fixloop_reengagements_total``               counter   repository, outcome
``hive_repeat_failure_fixloop_shared_breakage_checks``            gauge     repository
``hive_repeat_failure_fixloop_shared_breakage_incidents_total``   counter   repository
``hive_repeat_failure_fixloop_inconclusive_seconds``              gauge     repository, pr
``hive_repeat_failure_fixloop_inconclusive_prs``                  gauge     repository
``hive_repeat_failure_fixloop_skipped_draft_prs``                 gauge     repository
``hive_repeat_failure_fixloop_unparked_total``                    counter   repository, reason
``hive_repeat_failure_fixloop_sweeps_total``                      counter   outcome
``hive_repeat_failure_fixloop_api_errors_total``                  counter   reason
``hive_repeat_failure_fixloop_last_sweep_timestamp_seconds``      gauge
``hive_repeat_failure_fixloop_ledger_errors_total``               counter
``hive_repeat_failure_fixloop_sweep_duration_seconds``            histogram
================================================================  ========  =====================

Known label values are exported from 0 (``kind`` first/handoff, ``outcome`` delivered/failed,
``reason`` green/breakage_cleared/label_removed, sweep outcomes, API error reasons), so
``rate()`` sees the first increment.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from repeat_failure.fixloop.github_models import REASONS

if TYPE_CHECKING:
    from repeat_failure.fixloop.sweep import Sweeper

PREFIX = "hive_repeat_failure_fixloop_"
KINDS = ("first", "handoff")
KICK_OUTCOMES = ("delivered", "failed")
UNPARK_REASONS = ("green", "breakage_cleared", "label_removed")
SWEEP_OUTCOMES = ("complete", "partial", "failed")
API_ERROR_REASONS = REASONS


class FixloopCollector(Collector):
    """Yields the fix-loop families from ``sweeper.stats`` at every scrape, without waiting for
    a pass: each counter is copied first (``dict()`` of a dict is one step under the GIL), and
    the per-pass views are replaced whole at the end of a pass."""

    def __init__(self, sweeper: "Sweeper") -> None:
        self._sweeper = sweeper

    def collect(self) -> Iterator[Metric]:
        """Every family of the table in the module docstring."""
        live = self._sweeper.stats
        stats = _Copy(live)
        repos = self._sweeper.config.repositories
        red = GaugeMetricFamily(PREFIX + "red_trees",
                                "Distinct red head trees counted for an open PR.",
                                labels=["repository", "pr"])
        for (repo, number), n in sorted(stats.red_trees.items()):
            red.add_metric([repo, str(number)], float(n))
        escalated = GaugeMetricFamily(PREFIX + "escalated_prs",
                                      "Open PRs escalated (wearing the needs-human label).",
                                      labels=["repository"])
        for repo, n in sorted(stats.escalated.items()):
            escalated.add_metric([repo], float(n))
        escalations = CounterMetricFamily(
            PREFIX + "escalations", "Escalations posted, first or hand-off.",
            labels=["repository", "kind"])
        kicks = CounterMetricFamily(
            PREFIX + "reengagements", "Re-engagement kicks, delivered (2xx) or failed.",
            labels=["repository", "outcome"])
        incidents = CounterMetricFamily(
            PREFIX + "shared_breakage_incidents",
            "Checks that became red on many open PRs at once (shared breakage).",
            labels=["repository"])
        unparked = CounterMetricFamily(
            PREFIX + "unparked", "Escalations taken back, by reason.",
            labels=["repository", "reason"])
        for repo in repos:
            for kind in KINDS:
                escalations.add_metric([repo, kind], float(stats.escalations[(repo, kind)]))  # type: ignore[attr-defined]
            for outcome in KICK_OUTCOMES:
                kicks.add_metric([repo, outcome], float(stats.reengagements[(repo, outcome)]))  # type: ignore[attr-defined]
            incidents.add_metric([repo], float(stats.incidents[repo]))  # type: ignore[attr-defined]
            for reason in UNPARK_REASONS:
                unparked.add_metric([repo, reason], float(stats.unparked[(repo, reason)]))  # type: ignore[attr-defined]
        shared = GaugeMetricFamily(PREFIX + "shared_breakage_checks",
                                   "Checks red on the shared-breakage number of open PRs "
                                   "now.", labels=["repository"])
        for repo, n in sorted(stats.shared_checks.items()):
            shared.add_metric([repo], float(n))
        waiting = GaugeMetricFamily(
            PREFIX + "inconclusive_seconds",
            "Seconds an open PR's head has had CI the fixloop cannot conclude (pending, stale "
            "or unreadable checks), counted from the first pass that saw it so.",
            labels=["repository", "pr"])
        for (repo, number), age in sorted(stats.inconclusive.items()):
            waiting.add_metric([repo, str(number)], float(age))
        over = GaugeMetricFamily(
            PREFIX + "inconclusive_prs",
            "Open PRs whose head has been inconclusive longer than inconclusive_after_s.",
            labels=["repository"])
        for repo, n in sorted(stats.inconclusive_over.items()):
            over.add_metric([repo], float(n))
        drafts = GaugeMetricFamily(PREFIX + "skipped_draft_prs",
                                   "Open draft PRs the last sweep skipped (include_drafts off).",
                                   labels=["repository"])
        for repo, n in sorted(stats.drafts_skipped.items()):
            drafts.add_metric([repo], float(n))
        sweeps = CounterMetricFamily(PREFIX + "sweeps", "Sweeps, by outcome.",
                                     labels=["outcome"])
        for outcome in SWEEP_OUTCOMES:
            sweeps.add_metric([outcome], float(stats.sweeps[outcome]))  # type: ignore[attr-defined]
        errors = CounterMetricFamily(PREFIX + "api_errors", "GitHub API calls that failed.",
                                     labels=["reason"])
        for reason in sorted(set(API_ERROR_REASONS) | set(stats.api_errors)):  # type: ignore[attr-defined]
            errors.add_metric([reason], float(stats.api_errors[reason]))  # type: ignore[attr-defined]
        last = GaugeMetricFamily(PREFIX + "last_sweep_timestamp_seconds",
                                 "Time of the last complete sweep, seconds since the epoch.")
        if stats.last_complete is not None:
            last.add_metric([], stats.last_complete)
        ledger = CounterMetricFamily(PREFIX + "ledger_errors",
                                     "Ledger reads or writes that failed (locked, full).")
        ledger.add_metric([], float(stats.ledger_errors))
        yield from (red, escalated, escalations, kicks, shared, incidents, unparked, waiting,
                    over, drafts, sweeps, errors, last, ledger)


class _Copy:
    """A copy of :class:`repeat_failure.fixloop.sweep.SweepStats` taken at scrape time."""

    def __init__(self, live) -> None:
        from collections import Counter

        for name in ("escalations", "reengagements", "incidents", "unparked", "api_errors",
                     "sweeps"):
            setattr(self, name, Counter(dict(getattr(live, name))))
        self.red_trees = dict(live.red_trees)
        self.escalated = dict(live.escalated)
        self.shared_checks = dict(live.shared_checks)
        self.inconclusive = dict(live.inconclusive)
        self.inconclusive_over = dict(live.inconclusive_over)
        self.drafts_skipped = dict(live.drafts_skipped)
        self.last_complete = live.last_complete
        self.ledger_errors = live.ledger_errors
