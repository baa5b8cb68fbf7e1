"""``dsh run``: streamed answer on stdout, tool activity on stderr, exit statuses, ``--json``, resume, Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .cli_kit import DSH, FakeLlm, project_toml, run_dsh, spawn_dsh


def _session_id(stderr: str) -> str:
    found = re.search(r"session (\S+) · continue", stderr)
    assert found is not None, stderr
    return found.group(1)


def test_answer_goes_to_stdout_and_exit_is_zero(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """A completed turn prints exactly the answer text on stdout and exits 0."""
    llm.text("Hello", ", ", "world.")
    done = run_dsh("run", "say hello", cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello, world.\n"
    assert "session " in done.stderr
    assert llm.messages(0)[-1] == {"role": "user", "content": "say hello"}


def test_tool_activity_goes_to_stderr(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """A tool call is summarised on stderr; stdout carries only the model's text."""
    llm.tool_call("read_file", {"path": "notes.txt"}, text="Reading.")
    llm.text("They are yellow.")
    done = run_dsh("run", "what colour are bananas?", cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Reading.\nThey are yellow.\n"
    assert "read_file notes.txt" in done.stderr
    assert "bananas are yellow" in done.stderr
    tool_message = llm.messages(1)[-1]
    assert tool_message["role"] == "tool"
    assert "bananas are yellow" in tool_message["content"]


def test_json_prints_every_event_as_one_line(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """--json: stdout is one JSON session event per line, seqs contiguous, ending with turn/end completed."""
    llm.tool_call("list_dir", {"path": "."})
    llm.text("Two files.")
    done = run_dsh("run", "--json", "list the files", cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [event["seq"] for event in events] == list(range(events[0]["seq"], events[0]["seq"] + len(events)))
    types = [event["type"] for event in events]
    for expected in ("turn/start", "user/message", "assistant/chunk", "tool/call", "tool/result", "turn/end"):
        assert expected in types
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


def test_resume_continues_the_stored_session(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """--resume ID sends the stored history with the new prompt."""
    llm.text("Noted: 42.")
    first = run_dsh("run", "remember 42", cwd=project, env=dsh_env)
    assert first.returncode == 0, first.stderr
    session = _session_id(first.stderr)
    llm.text("It was 42.")
    second = run_dsh("run", "--resume", session, "which number?", cwd=project, env=dsh_env)
    assert second.returncode == 0, second.stderr
    assert second.stdout == "It was 42.\n"
    contents = [message.get("content") for message in llm.messages(1)]
    assert contents[-3:] == ["remember 42", "Noted: 42.", "which number?"]


def test_model_error_exits_one_with_one_line(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """A failed request ends the turn `error`: exit 1 and one `dsh:` line naming the failure."""
    llm.fail(500, "the model is on fire")
    done = run_dsh("run", "hi", cwd=project, env=dsh_env)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("dsh:")]
    assert len(errors) == 1
    assert "SERVER" in errors[0]
    assert "on fire" in errors[0]
    session = done.stderr.split("continue with: dsh run --resume ")[1].split()[0]
    llm.text("Back again.")
    again = run_dsh("run", "--resume", session, "retry", cwd=project, env=dsh_env)
    assert again.returncode == 0, again.stderr
    assert [m["content"] for m in llm.messages(1) if m["role"] == "user"] == ["hi", "retry"]


def test_max_tokens_has_its_own_exit_status(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """A turn cut at the output limit exits 4."""
    llm.text("This answer is cut", finish="length")
    done = run_dsh("run", "write a novel", cwd=project, env=dsh_env)
    assert done.returncode == 4, done.stderr
    assert done.stdout == "This answer is cut\n"


def test_no_api_key_names_the_variable_and_the_demo(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """The default model without DEEPSEEK_API_KEY: exit 3, one line naming the variable and `dsh demo`."""
    done = run_dsh("run", "hi", cwd=tmp_path, env=dsh_env)
    assert done.returncode == 3
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "DEEPSEEK_API_KEY" in lines[0]
    assert "dsh demo" in lines[0]


def test_unknown_model_is_one_clear_line(project: Path, dsh_env: dict[str, str]) -> None:
    """An unknown provider or model: exit 3 and one line, before any session is created."""
    for model, expected in (("local/nope", "knows no model 'nope'"), ("nowhere/x", "provider 'nowhere'")):
        done = run_dsh("run", "--model", model, "hi", cwd=project, env=dsh_env)
        assert done.returncode == 3
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert "unknown model" in lines[0]
        assert expected in lines[0]


def test_unreachable_server_is_one_clear_line(
    tmp_path: Path, free_port: int, dsh_env: dict[str, str]
) -> None:
    """Nothing listening at base_url: exit 1 and one line saying the connection failed."""
    (tmp_path / "dsh.toml").write_text(
        project_toml(f"http://127.0.0.1:{free_port}/v1", tmp_path / "sessions")
    )
    done = run_dsh("run", "hi", cwd=tmp_path, env=dsh_env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith("dsh:")
    assert "TRANSPORT" in lines[0] or "TIMEOUT" in lines[0]
    session = lines[1].split()[1]
    assert lines[1].endswith(f"continue with: dsh run --resume {session} PROMPT"), "the stored session is named"


def test_ask_without_a_terminal_is_denied(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """A tool that needs approval is denied when stdin is not a terminal, and the user is told why."""
    llm.tool_call("bash", {"command": "echo should-not-run"})
    llm.text("It was denied.")
    done = run_dsh("run", "run echo", cwd=project, env=dsh_env, input="")
    assert done.returncode == 0, done.stderr
    assert "denied bash $ echo should-not-run" in done.stderr
    tool_message = llm.messages(1)[-1]
    assert "denied" in tool_message["content"]
    assert "should-not-run\n" not in tool_message["content"]


def test_no_terminal_tells_the_model_nobody_was_asked(
    llm: FakeLlm, project: Path, dsh_env: dict[str, str]
) -> None:
    """`--mode full-access` does not lift an ask rule, so the hint names the rule, not --mode; the model is
    told nobody could be asked, not that the user rejected the call."""
    llm.tool_call("bash", {"command": "echo should-not-run"})
    llm.text("Understood.")
    done = run_dsh("run", "--mode", "full-access", "run echo", cwd=project, env=dsh_env, input="")
    assert done.returncode == 0, done.stderr
    assert "--mode" not in done.stderr
    assert 'action = "allow"' in done.stderr
    told = llm.messages(1)[-1]["content"]
    assert "nobody could be asked" in told
    assert "rejected" not in told


def test_the_cost_is_shown_when_prices_are_configured(
    llm: FakeLlm, project: Path, dsh_env: dict[str, str]
) -> None:
    """With a price for the model (the openai model table's), the last stderr line says what the run cost
    (12 in, 5 out tokens)."""
    llm.text("Cheap.")
    done = run_dsh(
        "run",
        "--set",
        "openai.providers.local.models.fake.input_price=1000.0",
        "--set",
        "openai.providers.local.models.fake.output_price=2000.0",
        "hi",
        cwd=project,
        env=dsh_env,
    )
    assert done.returncode == 0, done.stderr
    assert " · $0.0220 · continue with" in done.stderr


def test_prompt_from_stdin(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """`dsh run -` reads the prompt from stdin."""
    llm.text("ok")
    done = run_dsh("run", "-", cwd=project, env=dsh_env, input="from a pipe\n")
    assert done.returncode == 0, done.stderr
    assert llm.messages(0)[-1]["content"] == "from a pipe\n"


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_cancels_the_turn_and_keeps_the_session(
    llm: FakeLlm, project: Path, dsh_env: dict[str, str], signum: int, status: int
) -> None:
    """SIGINT (SIGTERM) while the model streams: exit 130 (143); the stored session ends turn/end aborted."""
    llm.held("partial answer")
    process = subprocess.Popen(
        [DSH, "run", "take your time"],
        cwd=project,
        env=dsh_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.read(len("partial answer")) == "partial answer"
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == status, stderr
    assert "cancelled" in stderr
    session = _session_id(stderr)
    shown = run_dsh("sessions", "show", session, "--json", cwd=project, env=dsh_env)
    assert shown.returncode == 0, shown.stderr
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"]["reason"]["kind"] == "aborted"
    interrupted = [e for e in events if e["type"] == "assistant/message" and e["data"].get("interrupted")]
    assert interrupted, "the streamed text is kept as an interrupted assistant message"


def test_ask_at_a_terminal_is_a_question(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """With a terminal, an `ask` tool is a question on stderr; `y` runs it once."""
    pytest.importorskip("pexpect")
    llm.tool_call("bash", {"command": "echo from-run-tool"}, text="Running it.")
    llm.text("All done.")
    child = spawn_dsh("run", "run the thing", cwd=project, env=dsh_env)
    try:
        child.expect("allow")
        child.sendline("y")
        child.expect("from-run-tool")
        child.expect("All done.")
        child.expect(pexpect_eof())
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def pexpect_eof() -> Any:
    import pexpect

    return pexpect.EOF


def test_a_closed_stdout_stops_the_turn_quietly(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """`dsh run ... | head -1`: the reader goes away, the turn stops (aborted, saved) and dsh exits 141 without a traceback."""
    release = llm.held("first line\n", then=[*(_content(f"line {n}\n") for n in range(200)), *_stop()])
    process = subprocess.Popen(
        [DSH, "run", "write a lot"],
        cwd=project,
        env=dsh_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "first line\n"
        process.stdout.close()  # what `head -1` does once it has its line
        release.set()
        _, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 141, stderr
    assert "Traceback" not in stderr
    assert "BrokenPipe" not in stderr
    assert stderr.count("\n") <= 1, stderr
    listed = run_dsh("sessions", "list", cwd=project, env=dsh_env)
    session = listed.stdout.splitlines()[1].split()[0]
    shown = run_dsh("sessions", "show", session, "--json", cwd=project, env=dsh_env)
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"]["reason"]["kind"] == "aborted", "it stopped generating"


def _content(text: str) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}


def _stop() -> list[dict[str, Any]]:
    return [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    ]


def test_terminal_escapes_from_tools_and_the_model_are_stripped(
    llm: FakeLlm, project: Path, dsh_env: dict[str, str]
) -> None:
    """An OSC title and colour codes in a file the tool reads, and in the model's text, never reach the terminal."""
    (project / "notes.txt").write_text("\x1b]0;PWNED\x07\x1b[31mred text\x1b[0m\n", encoding="utf-8")
    llm.tool_call("read_file", {"path": "notes.txt"}, text="Reading \x1b[1mbold\x1b[0m.")
    llm.text("It says \x1b]0;AGAIN\x07red text\x07.")
    done = run_dsh("run", "read the notes", cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    for stream in (done.stdout, done.stderr):
        assert "\x1b" not in stream
        assert "\x07" not in stream.replace("␇", "")
        assert "PWNED" not in stream
    assert "red text" in done.stderr, "the text around the escapes is kept"
    assert done.stdout == "Reading bold.\nIt says red text␇.\n"
    shown = run_dsh("sessions", "show", _session_id(done.stderr), cwd=project, env=dsh_env)
    assert "\x1b" not in shown.stdout
    assert "red text" in shown.stdout


def test_piped_text_is_context_for_the_prompt(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """`echo ctx | dsh run "summarise this"` sends the prompt with the piped text appended as context."""
    llm.text("A summary.")
    done = run_dsh("run", "summarise this", cwd=project, env=dsh_env, input="the piped context\n")
    assert done.returncode == 0, done.stderr
    assert llm.messages(0)[-1]["content"] == "summarise this\n\n<stdin>\nthe piped context\n</stdin>"


def test_piped_prompt_with_no_command_runs_it(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """`echo prompt | dsh` runs the prompt like `dsh run -`; with nothing piped it prints the help."""
    llm.text("Ran it.")
    done = run_dsh(cwd=project, env=dsh_env, input="what is in notes.txt?\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Ran it.\n"
    assert llm.messages(0)[-1]["content"] == "what is in notes.txt?\n"
    empty = run_dsh(cwd=project, env=dsh_env, input="")
    assert empty.returncode == 2
    assert "usage: dsh" in empty.stdout


def test_an_invalid_args_error_is_shown_whole(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """A tool-argument error lists every problem, not only its first line."""
    llm.tool_call("read_file", {"path": 3, "limit": "many"})
    llm.text("Oops.")
    done = run_dsh("run", "read", cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    error = llm.messages(1)[-1]["content"]
    body = [line for line in error.splitlines() if line.strip()]
    assert len(body) >= 2, error
    for line in body[1:3]:
        assert line.strip()[:40] in done.stderr, f"{line!r} missing from\n{done.stderr}"


def test_a_retry_is_announced(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """An `llm/retry` (a 429, then success) prints `retrying 2/3 in 0 s (RATE_LIMIT)` on stderr."""
    llm.fail(429, "slow down")
    llm.text("Second time lucky.")
    done = run_dsh(
        "run",
        "--set",
        "retry.max_attempts=3",
        "--set",
        "retry.initial_delay=0",
        "hi",
        cwd=project,
        env=dsh_env,
    )
    assert done.returncode == 0, done.stderr
    assert "retrying 2/3 in 0 s (RATE_LIMIT)" in done.stderr
    assert done.stdout == "Second time lucky.\n"


def test_an_edit_is_shown_as_a_diff(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """edit_file shows the lines it replaces (-) and puts in (+); write_file the lines it writes."""
    llm.tool_call(
        "edit_file", {"path": "notes.txt", "old_text": "bananas are yellow", "new_text": "bananas are green"}
    )
    llm.tool_call("write_file", {"path": "new.txt", "content": "line one\nline two\n"})
    llm.text("Edited.")
    done = run_dsh("run", "--mode", "full-access", "edit", cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    assert "    - bananas are yellow" in done.stderr
    assert "    + bananas are green" in done.stderr
    assert "    + line one\n    + line two" in done.stderr
    assert (project / "notes.txt").read_text(encoding="utf-8") == "bananas are green\n"


def test_markdown_at_a_terminal_plain_when_piped(
    llm: FakeLlm, project: Path, dsh_env: dict[str, str]
) -> None:
    """With stdout a terminal the answer is rendered Markdown; piped (and with --plain) it is the text as sent."""
    pexpect = pytest.importorskip("pexpect")
    answer = "## Steps\n\n1. **read** the file\n2. fix `median`\n\n```python\nx = 1\n```\n"
    llm.text(answer)
    child = spawn_dsh("run", "plan", cwd=project, env=dsh_env)
    try:
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before)
    assert "1 read the file" in shown
    assert "2 fix median" in shown
    assert "x = 1" in shown
    assert "**read**" not in shown
    assert "```" not in shown
    llm.text(answer)
    piped = run_dsh("run", "plan", cwd=project, env=dsh_env)
    assert piped.stdout == answer


def test_a_spinner_waits_on_a_terminal(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """While the model has not answered yet, stderr (a terminal) shows a spinner with what is awaited."""
    pexpect = pytest.importorskip("pexpect")
    release = llm.held(then=[_content("Hi."), *_stop()])
    child = spawn_dsh("run", "--plain", "hi", cwd=project, env=dsh_env)
    try:
        child.expect("waiting for the model · ")
        release.set()
        child.expect("Hi.")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def test_yes_allows_every_ask_and_says_so(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """`dsh run -y` without a terminal: an `ask` is allowed once, and stderr says what was allowed."""
    llm.tool_call("bash", {"command": "echo yes-it-ran"})
    llm.text("Done.")
    done = run_dsh("run", "-y", "go", cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    assert "dsh: --yes: allowed once: bash $ echo yes-it-ran" in done.stderr
    assert "yes-it-ran" in llm.messages(1)[-1]["content"]
    assert "denied" not in done.stderr


def test_continue_picks_this_workspaces_latest_session(
    llm: FakeLlm, project: Path, tmp_path: Path, dsh_env: dict[str, str]
) -> None:
    """`dsh run -c` continues the newest session started in this directory, not one from elsewhere."""
    empty = run_dsh("run", "-c", "anything", cwd=project, env=dsh_env)
    assert empty.returncode == 3
    assert "no stored session to continue" in empty.stderr
    llm.text("Noted.")
    assert run_dsh("run", "remember 42", cwd=project, env=dsh_env).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "dsh.toml").write_text((project / "dsh.toml").read_text(encoding="utf-8"), encoding="utf-8")
    llm.text("Other.")
    assert run_dsh("run", "unrelated", cwd=elsewhere, env=dsh_env).returncode == 0
    llm.text("It was 42.")
    done = run_dsh("run", "--continue", "which number?", cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    users = [m["content"] for m in llm.messages(2) if m["role"] == "user"]
    assert users == ["remember 42", "which number?"]
    both = run_dsh("run", "-c", "-r", "x", "y", cwd=project, env=dsh_env)
    assert both.returncode == 2, "--continue and --resume exclude each other"


def test_commands_run_on_uvloop_when_it_is_installed() -> None:
    """Every command's event loop is uvloop's (installed with dsh-cli on CPython, not on Windows)."""
    import asyncio

    import uvloop
    from dsh_cli._main import _run_async

    async def loop_is_uvloop() -> int:
        return int(isinstance(asyncio.get_running_loop(), uvloop.Loop))

    assert _run_async(loop_is_uvloop) == 1
