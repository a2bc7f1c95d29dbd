"""README.md "Try it on your own shell" (issue 17, item 14): the block runs as written and prints
what the README says it prints (`…` stands for times), including a `/status` body that ends in a
newline so the next command's output starts on its own line."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from waiting import free_port

REPO = Path(__file__).resolve().parent.parent


def _blocks_after(heading: str) -> list[str]:
    """The fenced blocks of the README section ``heading`` (up to the next heading)."""
    text = (REPO / "README.md").read_text()
    section = text.split(f"### {heading}\n", 1)[1].split("\n#", 1)[0]
    return re.findall(r"```(?:sh)?\n(.*?)```", section, re.S)


def _pattern(line: str) -> re.Pattern[str]:
    return re.compile(".*?".join(map(re.escape, line.split("…"))) + r"\Z")


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's block uses curl")
def test_try_it_on_your_own_shell(tmp_path: Path) -> None:
    """Run the README's block (its port and /tmp paths moved into this test's directory, its
    `repeat-failure` this checkout's) and compare stdout line for line and stderr as a set of
    lines (the sidecar logs from another process, so its lines may come between others)."""
    script, expected = _blocks_after("Try it on your own shell")[:2]
    port = free_port()
    script = (script.replace("127.0.0.1:9466", f"127.0.0.1:{port}")
                    .replace("/tmp/rf-config.yaml", str(tmp_path / "rf-config.yaml"))
                    .replace("/tmp/rf", str(tmp_path / "rf")))
    assert "/tmp/rf" not in script and "9466" not in script
    tool = tmp_path / "bin"
    tool.mkdir()
    (tool / "repeat-failure").write_text(
        f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m repeat_failure "$@"\n')
    (tool / "repeat-failure").chmod(0o755)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "activate").write_text(f'PATH="{tool}:$PATH"\n')
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    proc = subprocess.Popen(["bash", "-c", script + "wait\n"], cwd=tmp_path, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the script's group: bash and its sidecar
            proc.wait()
    lines = (expected.replace("127.0.0.1:9466", f"127.0.0.1:{port}")
                     .replace('"port": 9466', f'"port": {port}').splitlines())
    want_out = [_pattern(line) for line in lines if line.startswith(('{"rows"', "hive_"))]
    want_err = [line for line in lines if not line.startswith(('{"rows"', "hive_"))]
    assert len(out.splitlines()) == len(want_out) == 2, out
    assert all(p.match(line) for p, line in zip(want_out, out.splitlines())), out
    assert out.endswith("\n")
    got_err = Counter(err.splitlines())
    matched = Counter()
    for line in want_err:
        hit = next((g for g in got_err if _pattern(line).match(g) and matched[g] < got_err[g]),
                   None)
        assert hit is not None, (line, err)
        matched[hit] += 1
    assert matched == got_err, err  # every line expected, nothing else


def _readme() -> str:
    return (REPO / "README.md").read_text()


def test_the_rule_count_the_readme_gives_is_the_scrubbers() -> None:
    """README "Performance" says how many scrub rules the Aho-Corasick gate skips: the figure is
    ``len(RULES)`` (it said 150 when there were 167)."""
    from repeat_failure.rules.scrub_rules import RULES

    counts = re.findall(r"most of the (\d+) rules never\s+run", _readme())
    assert counts == [str(len(RULES))]


def test_the_readme_gives_every_exit_status_of_verdict() -> None:
    """README's `verdict` paragraph names every exit status `verdict --help` does: the verdicts'
    (EXIT_CODES), 1 (no verdict: an unreadable transcript without --exit-status, an unknown
    format) and 2 (bad usage); it listed 0/3/4/5 only."""
    from repeat_failure.turns.verdict import EXIT_CODES

    paragraph = _readme().split("`repeat-failure verdict` is for CI jobs:", 1)[1].split("```", 1)[0]
    paragraph = " ".join(paragraph.split())
    for verdict, code in EXIT_CODES.items():
        assert (f"exits 0 for `{verdict}`" if code == 0 else f"{code} `{verdict}`") in paragraph
    assert "1 when there is no verdict: the transcript cannot be read" in paragraph
    assert "2 for bad usage" in paragraph


def test_benchmarks_are_run_from_the_virtualenv_and_name_no_stale_corpus_size() -> None:
    """The README runs the benchmarks as its Development section does (`.venv/bin/python -m
    benchmarks`), and `python -m benchmarks --help` gives no count of the ordinary-commands
    corpus (it said 653 when tests/data/ordinary_commands.txt held 702 lines)."""
    readme = _readme()
    assert re.findall(r"(?<![/\w])python -m benchmarks", readme) == []
    assert ".venv/bin/python -m benchmarks [--json FILE] [--only NAME]" in readme
    out = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert "corpus of ordinary commands" in out
    assert re.search(r"\d+ ordinary commands", out) is None
