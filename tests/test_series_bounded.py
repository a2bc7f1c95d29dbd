"""Bounded series (issue 29, item 4): no label value of a series the sidecar exports changes
with a count or a time. A raised note that stays the same note (same command, exit and output)
while its count and its minutes grow, and while time passes, keeps every series' labels: only
sample values move. The sidecar is driven on real record files and scraped over its own HTTP
exporter (``GET /metrics``)."""

from __future__ import annotations

import itertools
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from repeat_failure.config import AgentSpec
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.sidecar.exporter import Server
from test_app import T0, Clock, append, write_config

LS = "ls /nonexistent"
CAT = "cat /missing"

Sample = tuple[str, tuple[tuple[str, str], ...]]


def scrape(port: int) -> dict[Sample, float]:
    """``{(sample name, sorted labels): value}`` of one ``GET /metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def label_sets(samples: dict[Sample, float]) -> set[Sample]:
    """The series of a scrape, without their values and without the process's own
    ``python_*``/``process_*`` series (whose values, not labels, move)."""
    return {key for key in samples if key[0].startswith("hive_")}


def test_labels_do_not_change_while_a_note_counts_up_and_time_passes(tmp_path: Path) -> None:
    """Two notes raised (``cat`` then ``ls``, ``ls`` newest, so the row shows it and "+1
    other"); then ``ls`` fails twice more over three minutes, then four more minutes pass with
    no record. All three scrapes have exactly the same series (names and labels); the counts
    and the span are sample values: note 5 → 7, note_span_seconds 40 → 220, notes_active 2."""
    clock = Clock()
    cfg = write_config(tmp_path / "config.yaml", extra="  window_s: 900\n")
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], cfg, clock=clock,
                 monotonic=itertools.count(0, 10).__next__)
    server = Server(sc, "127.0.0.1:0").start()
    try:
        for i in range(5):
            append(sc.shared_dir, "a1", CAT, 1, T0 - 100 + i * 5)
            append(sc.shared_dir, "a1", LS, 2, T0 - 50 + i * 10)
        sc.run_once()
        first = scrape(server.port)

        clock.t = T0 + 180
        append(sc.shared_dir, "a1", LS, 2, T0 + 60)
        append(sc.shared_dir, "a1", LS, 2, T0 + 170)
        sc.run_once()
        second = scrape(server.port)

        clock.t = T0 + 420
        sc.run_once()
        third = scrape(server.port)
    finally:
        server.stop()

    assert label_sets(first) == label_sets(second) == label_sets(third)
    row = ("hive_repeat_failure_row_info", (("agent", "a1"), ("backend", "bash"),
                                            ("command", LS), ("exit", "2"), ("state", "on"),
                                            ("state_text", "")))
    note = (("agent", "a1"), ("backend", "bash"), ("command", LS), ("exit", "2"),
            ("output", "unknown"))
    active = ("hive_repeat_failure_notes_active", (("agent", "a1"), ("backend", "bash")))
    assert [s[row] for s in (first, second, third)] == [1.0, 1.0, 1.0]
    assert [s[("hive_repeat_failure_note", note)] for s in (first, second, third)] == \
        [5.0, 7.0, 7.0]
    # 40 s, then 220 s (T0 - 50 to T0 + 170): the text's M, 1 then 4 minutes.
    assert [s[("hive_repeat_failure_note_span_seconds", note)]
            for s in (first, second, third)] == [40.0, 220.0, 220.0]
    assert [s[active] for s in (first, second, third)] == [2.0, 2.0, 2.0]
    # The row's text, as /status gives it, is what those values build (spec C11).
    (status_row,) = [r.to_json() for r in sc.rows()]
    assert status_row["message"] == \
        f"Repeating failure: {LS} failed 7 times in 4 min (exit 2) (+1 other)"


def test_no_label_holds_a_number_that_counts() -> None:
    """The check above can fail: a series whose label holds the note's text (as
    ``row_info``'s ``message`` did before issue 29) gives two different label sets for the
    same note at counts 5 and 6."""
    def with_message(count: int) -> dict[Sample, float]:
        text = f"Repeating failure: {LS} failed {count} times in 1 min (exit 2)"
        return {("hive_repeat_failure_row_info", (("agent", "a1"), ("message", text))): 1.0}

    assert label_sets(with_message(5)) != label_sets(with_message(6))
