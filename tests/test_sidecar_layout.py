"""The shared dir's layout on its own (repeat_failure.sidecar.layout): prepared, checked and put
back as agents delete, replace or re-mode what is on the volume, logging once per problem."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from repeat_failure.sidecar import hook
from repeat_failure.sidecar.layout import SharedDir

WANTED = {"hook": (True, 0o755), "records": (True, 0o2770), "state": (True, 0o700)}


def logged(stream) -> list[str]:
    return [json.loads(x)["msg"] for x in stream.getvalue().splitlines()]


@pytest.fixture
def shared(tmp_path: Path) -> SharedDir:
    return SharedDir(tmp_path / "shared", None)


def test_nothing_is_touched_until_prepare(shared):
    assert not shared.path.exists()
    assert shared.folders() == {"hook": None, "records": None, "state": None}
    shared.prepare()
    assert shared.folders() == WANTED == {n: (True, m) for n, m in hook.LAYOUT_MODES.items()}


def test_repair_recreates_a_deleted_folder_and_logs_once(shared, log_stream):
    shared.prepare()
    shared.repair({})
    assert logged(log_stream) == []
    os.rmdir(shared.path / "records")
    shared.repair({})
    assert shared.folders() == WANTED
    shared.repair({})
    assert logged(log_stream) == [
        "shared dir layout missing, replaced or its modes changed, recreating"]


def test_a_symlink_in_a_folders_place_is_removed_never_followed(shared, tmp_path):
    shared.prepare()
    target = tmp_path / "theirs"
    target.mkdir()
    os.chmod(target, 0o755)
    os.rmdir(shared.path / "state")
    (shared.path / "state").symlink_to(target)
    shared.repair({})
    assert shared.folders() == WANTED
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 and list(target.iterdir()) == []


def test_a_folder_opened_to_others_gets_its_mode_back(shared):
    shared.prepare()
    os.chmod(shared.path / "records", 0o777)
    assert shared.folders()["records"] == (True, 0o777)
    shared.repair({})
    assert shared.folders()["records"] == (True, 0o2770)


def test_only_the_agents_given_get_their_hook_files_back(shared, log_stream):
    shared.prepare()
    shared.render_hook("a1", "bash")
    shared.render_hook("a2", "bash")
    for agent in ("a1", "a2"):
        hook.hook_path(shared.path, agent).unlink()
    shared.repair({"a1": "bash"})
    assert hook.hook_path(shared.path, "a1").is_file()
    assert hook.slow_path(shared.path, "a1").is_file()
    assert not hook.hook_path(shared.path, "a2").exists()
    assert logged(log_stream) == ["hook file missing, rendering it again"]
    shared.repair({})
    assert not hook.hook_path(shared.path, "a2").exists()


def test_a_chained_hook_needs_its_trap_file_too(tmp_path):
    chained = tmp_path / "bashrc"
    chained.write_text("true\n")
    shared = SharedDir(tmp_path / "shared", str(chained))
    shared.prepare()
    shared.render_hook("a1", "bash")
    trap = hook.trap_path(shared.path, "a1")
    trap.unlink()
    shared.repair({"a1": "bash"})
    assert trap.is_file()


def test_remove_hook_says_whether_there_was_one(shared):
    shared.prepare()
    assert shared.remove_hook("a1") is False
    shared.render_hook("a1", "bash")
    assert shared.remove_hook("a1") is True
    assert not hook.hook_path(shared.path, "a1").exists()


def test_a_layout_that_cannot_be_made_is_logged_once_per_error_never_raised(
        shared, log_stream, monkeypatch):
    errors = iter([OSError(5, "Input/output error"), OSError(5, "Input/output error"),
                   OSError(28, "No space left on device")])

    def failing(path):
        raise next(errors)
    monkeypatch.setattr(hook, "prepare_shared_dir", failing)
    for _ in range(3):
        shared.prepare()
    assert shared.folders() == {"hook": None, "records": None, "state": None}
    lines = [json.loads(x) for x in log_stream.getvalue().splitlines()]
    assert [(x["msg"], x["error"]) for x in lines] == [
        ("shared dir layout cannot be repaired; records are not collected until it is",
         "[Errno 5] Input/output error"),
        ("shared dir layout cannot be repaired; records are not collected until it is",
         "[Errno 28] No space left on device")]
    monkeypatch.undo()
    shared.prepare()
    assert shared.folders() == WANTED
    assert len(log_stream.getvalue().splitlines()) == 2


def test_check_names_refuses_what_cannot_go_into_a_hook(shared):
    shared.check_names("a1", "bash")
    with pytest.raises(hook.HookError):
        shared.check_names("a 1; rm", "bash")
    with pytest.raises(hook.HookError):
        SharedDir(Path("relative"), None).check_names("a1", "bash")
