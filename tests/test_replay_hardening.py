"""``repeat-failure replay`` (issue 19) against hostile and careless input: control characters
in ``--json``, paths that are not regular files (a FIFO, a device), reasons that name such a
path, symlink loops, trajectory messages built to make a scanner quadratic, absurd return codes
and times, and sweeps too large to finish. Each test failed before the fix it guards.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
from pathlib import Path

import pytest

from repeat_failure.backends import trajectory
from repeat_failure.cli import main
from repeat_failure.replay import run as replay_module
T0 = 1796100000  # 2026-12-01 04:40:00Z


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["replay", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def write_trajectory(path: Path, steps: list[tuple[str, str, float]]) -> Path:
    """A mini-swe-agent trajectory: per step (command, returncode text, created time)."""
    msgs: list[dict] = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]
    for command, code, ts in steps:
        msgs += [{"role": "assistant", "content": f"```bash\n{command}\n```",
                  "extra": {"response": {"created": ts}}},
                 {"role": "user", "content": f"<returncode>{code}</returncode>\n<output>\nno"
                                             "\n</output>"}]
    path.write_text(json.dumps({"messages": msgs, "trajectory_format": "mini-swe-agent-1"}))
    return path


def test_json_escapes_c1_controls_del_and_bidi_overrides(tmp_path: Path, capsys) -> None:
    """json.dumps escapes C0 controls only: CSI as one code point (U+009B), DEL and a bidi
    override (U+202E) in a command reached the terminal raw through --json. They are JSON
    escapes now, and the parsed document still holds the command as exported."""
    command = "echo \u009b31mred\u202eevil\x7f"
    path = write_trajectory(tmp_path / "ctl.traj.json", [(command, "1", T0 + i) for i in range(5)])
    code, out, _ = run(capsys, "--json", str(path))
    assert code == 0
    assert not any(c in out for c in ("\u009b", "\u202e", "\x7f"))
    assert "echo \\u009b31mred\\u202eevil\\u007f" in out
    (session,) = json.loads(out)["sessions"]
    assert [n["command"] for n in session["notes"]] == [command]


def _unblock_after(fifo: Path, seconds: float) -> threading.Timer:
    """Open ``fifo`` for writing (and close it) after ``seconds``: a reader stuck opening it
    gets EOF, so a replay that waited on it ends (and the test fails) instead of hanging."""
    def poke() -> None:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # no reader waiting (ENXIO): the replay did not block
            pass
    timer = threading.Timer(seconds, poke)
    timer.start()
    return timer


@pytest.mark.parametrize("name,backend", [("s.jsonl", "claude"), ("s.traj.json", None)])
def test_a_fifo_on_the_command_line_is_skipped_at_once(tmp_path: Path, capsys, name: str,
                                                       backend: str | None) -> None:
    """A FIFO named by hand (discovery never returns one) was opened blocking: the replay
    waited for a writer forever. It is now refused as what it is, by name, exit 1."""
    fifo = tmp_path / name
    os.mkfifo(fifo)
    timer = _unblock_after(fifo, 5.0)
    try:
        code, out, _ = run(capsys, *(["--backend", backend] if backend else []), str(fifo))
    finally:
        timer.cancel()
    assert code == 1
    assert out.splitlines()[0] == f"skipped {fifo}: cannot be read: it is a FIFO, not a regular file"


def test_a_device_is_refused_not_read(capsys) -> None:
    """A character device (``/dev/null`` here; ``/dev/zero`` never ends) was read as a session
    log; it is refused as a device."""
    code, out, _ = run(capsys, "--backend", "claude", os.devnull)
    assert code == 1
    assert out.splitlines()[0] == (f"skipped {os.devnull}: cannot be read: it is a device, "
                                   "not a regular file")


def test_a_refused_sqlite_path_is_shown_escaped_in_the_reason(tmp_path: Path, capsys) -> None:
    """The SQLite readers' refusal of a non-regular file names the path in its text; that text
    went out raw (ESC and all) as the reason. It is shown as paths are: escaped, scrubbed."""
    fifo = tmp_path / "db\x1b[31m.db"
    os.mkfifo(fifo)
    code, out, _ = run(capsys, "--backend", "opencode", str(fifo))
    assert code == 1 and "\x1b" not in out
    shown = str(fifo).replace("\x1b", "\\u001b")
    assert out.splitlines()[0] == (f"skipped {shown}: cannot be read: {shown} is not a regular "
                                   "file")


def test_a_symlink_loop_says_so(tmp_path: Path, capsys) -> None:
    """A symlink loop was reported as "no such file or directory"; it says what it is."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    code, out, _ = run(capsys, str(tmp_path / "a"))
    assert code == 1
    assert out.splitlines()[0] == (f"skipped {tmp_path / 'a'}: cannot be read: Too many levels "
                                   "of symbolic links")


def test_an_absurd_return_code_keeps_the_trajectory(tmp_path: Path, capsys) -> None:
    """A 5,000-digit ``<returncode>`` (over Python's int conversion limit) made the whole
    trajectory "unknown_shape" and skipped it. It is an exit outside 0-255 now: a failure,
    kept as "failed", and the other calls count as before."""
    steps = [("make", "9" * 5000, T0)] + [("make", "2", T0 + i) for i in range(1, 5)]
    path = write_trajectory(tmp_path / "rc.traj.json", steps)
    code, out, _ = run(capsys, "--json", "--threshold", "1", str(path))
    assert code == 0
    doc = json.loads(out)
    assert doc["bad_files"] == []
    (session,) = doc["sessions"]
    assert (session["commands"], session["failures"]) == (5, 5)
    assert [(n["exit"], n["count"]) for n in session["notes"]] == [(2, 4)]  # the larger key


def test_a_time_far_in_the_future_is_refused_not_allowed_to_hide_notes(tmp_path: Path,
                                                                        capsys) -> None:
    """One call timed ``1e12`` moved the replay's clock past every later failure's window:
    six failures in six seconds gave no note. As the sidecar does (``future_ts``), a time more
    than 5 minutes ahead of the clock is refused and counted; the other five raise the note."""
    steps = [("make", "2", T0 + i) for i in range(6)]
    steps[2] = ("make", "2", 1e12)
    path = write_trajectory(tmp_path / "ts.traj.json", steps)
    code, out, _ = run(capsys, "--json", str(path))
    assert code == 0
    (session,) = json.loads(out)["sessions"]
    assert session["skipped"] == {"future_ts": 1}
    assert (session["commands"], session["failures"]) == (5, 5)
    assert [(n["count"], n["first_ts"], n["last_ts"]) for n in session["notes"]] == [
        (5, T0, T0 + 5)]


def test_a_sweep_too_large_is_a_usage_error(capsys) -> None:
    """``--threshold 1..200 --window 1..200`` was 40,000 detectors per session, running for
    hours before printing; more than MAX_SETTINGS combinations is a usage error (exit 2)."""
    values = ",".join(str(i) for i in range(1, 12))
    code = main(["replay", "--threshold", values, "--window", values, "x"])
    err = capsys.readouterr().err
    assert replay_module.MAX_SETTINGS == 100 and code == 2
    assert err == ("repeat-failure: replay: --threshold, --window and --match make 121 combinations, "
                   "more than the 100 a sweep judges (one detector each per session); give "
                   "fewer values\n")


@pytest.mark.parametrize("args,message", [
    (["--threshold", "x"], "argument --threshold: 'x' is not an integer"),
    (["--window", "ten"], "argument --window: 'ten' is not a number"),
])
def test_a_non_number_says_what_was_expected(args: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["replay", *args, "x"])
    assert exc.value.code == 2 and message in capsys.readouterr().err


# The scanners' specification: what mini-swe-agent's fences and tags mean, as regular
# expressions (quadratic when searched over a long text with many openings and no closing).
BASH = re.compile(r"```(?:bash|sh)[ \t]*\n(.*?)\n[ \t]*```", re.S)
OUTPUT = re.compile(r"<output>\n?(.*?)</output>", re.S)
PARTS = re.compile(r"<(output_head|output_tail)>\n?(.*?)</\1>", re.S)
PIECES = ["```", "bash", "sh", "\n", " ", "\t", "x", "`", "<output>", "</output>",
          "<output_head>", "</output_head>", "<output_tail>", "</output_tail>"]


def test_the_linear_scanners_read_what_the_expressions_specify() -> None:
    """On 20,000 random short texts of the format's pieces, the linear scanners find exactly
    the blocks the regular expressions find (the speed is in benchmarks: replay_hostile)."""
    rng = random.Random(19)
    for _ in range(20_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 14)))
        assert trajectory._bash_blocks(text, 1 << 30) == BASH.findall(text), text
        found = OUTPUT.search(text)
        assert trajectory._tagged(text, "output") == (found.group(1) if found else None), text
        assert trajectory._output_parts(text) == [b for _, b in PARTS.findall(text)], text

