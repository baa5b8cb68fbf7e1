"""``dsh demo``: offline, no API key, a readable transcript, the session resumed from disk."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from dsh_cli._demo import DEMO_FILES

from .cli_kit import run_dsh


def test_demo_completes_offline(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """The demo fixes the bug, runs the checks, resumes the session and exits 0 with nothing left behind."""
    done = run_dsh("demo", "--pace", "0", cwd=tmp_path, env=dsh_env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for expected in (
        "read_file stats.py",
        "edit_file stats.py",
        "check.py",
        "all checks passed",
        "resumed session",
        "Which function did you change?",
        "stats.py was fixed on disk",
    ):
        assert expected in out, expected
    assert out.index("resumed session") < out.index("Which function did you change?")
    assert not list(tmp_path.iterdir()) or [p.name for p in tmp_path.iterdir()] == ["home"]


def test_demo_keep_leaves_a_resumable_session(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """--keep DIR keeps the workspace and the sessions, which `dsh sessions` then reads."""
    kept = tmp_path / "kept"
    done = run_dsh("demo", "--pace", "0", "--keep", str(kept), cwd=tmp_path, env=dsh_env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (kept / "workspace" / "stats.py").read_text() != DEMO_FILES["stats.py"]
    env = {**dsh_env, "DSH_SESSIONS_DIR": str(kept / "sessions")}
    listed = run_dsh("sessions", "list", cwd=tmp_path, env=env)
    session = next(word for word in listed.stdout.split() if word.startswith("demo-"))
    shown = run_dsh("sessions", "show", session, "--json", cwd=tmp_path, env=env)
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    turns = [event["data"]["turn"] for event in events if event["type"] == "turn/end"]
    assert turns == [1, 2], "the resumed session went on with turn 2"


def test_make_demo_does_not_install_the_test_plugins() -> None:
    """`make demo` installs what a user gets; the test suite's plugins (dsh-example) come only with `make test`."""
    root = Path(__file__).resolve().parents[3]
    demo = subprocess.run(
        ["make", "-n", "-B", "demo"], cwd=root, capture_output=True, text=True, check=True, timeout=60
    )
    assert "contrib/dsh-cli" in demo.stdout
    assert "tests/plugins" not in demo.stdout, demo.stdout
    test = subprocess.run(
        ["make", "-n", "-B", "test"], cwd=root, capture_output=True, text=True, check=True, timeout=60
    )
    assert "tests/plugins/dsh-example" in test.stdout
