"""`repeat-failure check-config` on bad files (the second break-it run over issue 29's
--injector and shape detection): each gets exit 2 and one line naming the file and the
problem, never a traceback, and nothing blocks (a FIFO is refused, not read)."""

from __future__ import annotations

import os

import pytest

from repeat_failure.cli import main
from repeat_failure.config import MAX_YAML_BYTES, read_yaml


def _bomb() -> str:
    text, prev = "a: &a [" + ", ".join(["lol"] * 9) + "]\n", "a"
    for name in "bcdefghi":
        text += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
        prev = name
    return text + "enabled: *i\n"


@pytest.mark.parametrize("flag", [[], ["--injector"]])
@pytest.mark.parametrize("make, error", [
    # Found by the run: a key written twice was taken as its last value (injection off).
    (lambda p: p.write_text("enabled: true\nimage: x/y:1\nenabled: false\n"),
     "not valid YAML at line 3, column 1: duplicate key 'enabled'"),
    # Found by the run: 50 MB (a comment but for two lines) took 17 s and 135 MB to parse.
    (lambda p: p.write_bytes(b"enabled: true\n# " + b"x" * (MAX_YAML_BYTES + 1) + b"\n"),
     "cannot read config file: over 1,048,576 bytes (a ConfigMap holds at most 1 MiB)"),
    # Held already (pinned).
    (lambda p: p.write_text("- enabled\n- image\n"), "(top level): ['enabled', 'image'] is not of type 'object'"),
    (lambda p: p.mkdir(), "cannot read config file: it is a directory, not a regular file"),
    (lambda p: os.mkfifo(p), "cannot read config file: it is a FIFO, not a regular file"),
    (lambda p: p.write_bytes(b"enabled: true\nimage: \xff\n"),
     "cannot read config file: 'utf-8' codec can't decode byte 0xff in position 21: invalid "
     "start byte"),
    (lambda p: p.write_text(_bomb()),
     "not valid YAML at line 1, column 1: its aliases expand it past 100,000 nodes"),
])
def test_a_bad_file_is_exit_2_naming_the_problem(tmp_path, capsys, make, error, flag) -> None:
    """Exit 2, the file and the problem on stderr, nothing on stdout."""
    path = tmp_path / "injector.yaml"
    make(path)
    assert main(["check-config", *flag, str(path)]) == 2
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", f"repeat-failure: {path}: {error}\n")


def test_a_file_with_the_keys_of_two_configs_names_both(tmp_path, capsys) -> None:
    """Without --injector, a file holding the injector's keys and the sidecar's (or the fix
    loop's) was read as the sidecar's and refused with ``enabled: unknown key``, an injector key
    that is no mistake. Now the message names both sets; with --injector it is the injector's
    and the other program's key is the unknown one."""
    path = tmp_path / "both.yaml"
    path.write_text("enabled: true\nimage: x/y:1\nrepeat_failure: {enabled: true}\n")
    assert main(["check-config", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"repeat-failure: {path}: holds keys of the injector's config (enabled, image) and of "
        "another (repeat_failure): one file is one program's config (--injector checks it as "
        "the injector's)\n")
    assert main(["check-config", "--injector", str(path)]) == 2
    assert capsys.readouterr().err == f"repeat-failure: {path}: repeat_failure: unknown key\n"


def test_a_merge_key_may_still_override(tmp_path) -> None:
    """Keys a merge brings in (``<<: *base``) may be given again after it: no duplicate."""
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {enabled: true, image: x}\nmine:\n  <<: *b\n  enabled: false\n")
    assert read_yaml(path, "config file") == {"base": {"enabled": True, "image": "x"},
                                              "mine": {"enabled": False, "image": "x"}}
