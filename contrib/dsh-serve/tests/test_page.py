"""The built-in page in a real browser: Debian's chromium driven by Playwright (no browser download).

The page talks to a real server over the native API only. Playwright's expectations wait for what
the page shows (they retry until it appears or a timeout fails the test); nothing sleeps.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright

from dsh_core import Reasoning
from dsh_core.testing import Reply, ScriptedModel

from .serve_kit import Served, serving

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: headless, and nothing a test does not ask for: no sandbox (tests run as root), no GPU, no
#: background traffic to any host
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    """One chromium per module; ``launch`` gives it a fresh temporary profile (user-data-dir)."""
    launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
    try:
        yield launched
    finally:
        launched.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "w").mkdir()
    with serving(tmp_path / "s", tmp_path / "w") as server:
        yield server


class Tab:
    """A browser tab on the page, which records every request it makes."""

    def __init__(self, browser: Browser, served: Served) -> None:
        self.served = served
        self.context = browser.new_context()
        self.page: Page = self.context.new_page()
        self.requests: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def open(self, session: str | None = None) -> Page:
        fragment = f"#token={self.served.token}" + (f"&session={session}" if session else "")
        self.page.goto(f"{self.served.url}/{fragment}")
        return self.page

    def hosts(self) -> set[str]:
        return {urlsplit(url).netloc for url in self.requests}

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab(browser: Browser, served: Served) -> Iterator[Tab]:
    opened = Tab(browser, served)
    try:
        yield opened
    finally:
        assert opened.errors == []  # the page's script never failed
        assert opened.hosts() <= {urlsplit(served.url).netloc}  # no request to another host
        opened.close()


def _new_session(page: Page) -> str:
    page.click("#new-session")
    expect(page.locator("#session-title")).not_to_have_text("no session selected")
    return page.locator("#session-title").inner_text()


def _say(page: Page, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def test_a_new_session_streams_a_markdown_answer(tab: Tab, served: Served) -> None:
    """Create a session, type a prompt: the answer shows as rendered Markdown, the session is listed."""
    served.model.add(ScriptedModel.text("Here is **bold** and `code`:\n\n- one\n- two", chunks=6))
    page = tab.open()
    ident = _new_session(page)
    _say(page, "hello there")
    expect(page.locator(".msg.user")).to_have_text("hello there")
    answer = page.locator(".msg.assistant")
    expect(answer.locator("strong")).to_have_text("bold")
    expect(answer.locator("code")).to_have_text("code")
    expect(answer.locator("li")).to_have_count(2)
    expect(page.locator("#status")).to_have_attribute("data-status", "idle")
    expect(page.locator(f'#sessions li[data-session-id="{ident}"] .title')).to_have_text("hello there")


def test_reasoning_and_tool_calls_show_with_arguments_and_results(tab: Tab, served: Served) -> None:
    """Reasoning is shown; a tool call shows its name, arguments and result."""
    served.model.add(
        Reply(Reasoning("let me think"), ScriptedModel.call("wait_gate", {}), chunks=2),
        "The gate is open.",
    )
    page = tab.open()
    _new_session(page)
    _say(page, "open the gate")
    served.wait_gate_entered_blocking()
    card = page.locator('.tool[data-tool="wait_gate"]')
    expect(card).to_have_attribute("data-state", "running")
    expect(page.locator(".reasoning .body")).to_have_text("let me think")
    expect(page.locator("#send")).to_have_text("Steer")
    served.open_gate_blocking()
    expect(card).to_have_attribute("data-state", "done")
    expect(card.locator(".result")).to_have_text("the gate opened")
    expect(card.locator("summary")).to_contain_text("wait_gate(")
    expect(page.locator(".msg.assistant").last).to_contain_text("The gate is open.")


def test_steer_while_a_turn_runs_then_cancel(tab: Tab, served: Served) -> None:
    """While a tool runs, the prompt steers the turn; Cancel ends the next, hanging, step aborted."""
    served.model.add(ScriptedModel.tool_call("wait_gate", {}), ScriptedModel.hang("thinking about left"))
    page = tab.open()
    _new_session(page)
    _say(page, "start")
    served.wait_gate_entered_blocking()
    expect(page.locator("#status")).to_have_attribute("data-status", "running")
    _say(page, "go left")
    expect(page.locator(".msg.steering.pending")).to_have_text("go left")
    served.open_gate_blocking()
    expect(page.locator(".msg.steering:not(.pending)")).to_have_text("go left")
    expect(page.locator(".msg.assistant").last).to_contain_text("thinking about left")
    page.click("#cancel")
    expect(page.locator(".turn-end")).to_contain_text("aborted")
    expect(page.locator("#status")).to_have_attribute("data-status", "idle")
    assert "go left" in str(served.model.requests[-1].messages[-1].content)


def test_a_reload_mid_stream_shows_the_turn_in_progress(tab: Tab, served: Served) -> None:
    """Reloading while the model streams shows the chunks so far, and the turn still running."""
    served.model.add(ScriptedModel.hang("half an answer"))
    page = tab.open()
    ident = _new_session(page)
    _say(page, "tell me")
    expect(page.locator(".msg.assistant")).to_contain_text("half an answer")
    page.reload()
    expect(page.locator("#session-title")).to_have_text(ident)
    expect(page.locator(".msg.user")).to_have_text("tell me")
    expect(page.locator(".msg.assistant")).to_contain_text("half an answer")
    expect(page.locator("#status")).to_have_attribute("data-status", "running")
    page.click("#cancel")
    expect(page.locator("#status")).to_have_attribute("data-status", "idle")


def test_a_second_tab_on_the_same_session_sees_the_other_tabs_prompt(browser: Browser, tab: Tab, served: Served) -> None:
    """Two tabs follow one session: what one sends, both show, with the answer."""
    served.model.add("an answer for both")
    first = tab.open()
    ident = _new_session(first)
    other = Tab(browser, served)
    try:
        second = other.open(session=ident)
        expect(second.locator("#session-title")).to_have_text(ident)
        _say(first, "from the first tab")
        for page in (first, second):
            expect(page.locator(".msg.user")).to_have_text("from the first tab")
            expect(page.locator(".msg.assistant")).to_contain_text("an answer for both")
        assert other.errors == []
        assert other.hosts() <= {urlsplit(served.url).netloc}
    finally:
        other.close()


XSS = (
    'Look: <img src="http://evil.example/pixel.png" onerror="window.pwned = 1">'
    " <script>window.pwned = 2</script>"
    " ![tracker](http://evil.example/tracker.png)"
    " [click](javascript:window.pwned=3)"
    " [fine](https://example.org/)"
)


def test_model_output_never_runs_a_script_or_loads_a_resource(tab: Tab, served: Served) -> None:
    """HTML and Markdown images in an answer show as text; nothing runs, nothing is fetched."""
    served.model.add(ScriptedModel.text(XSS, chunks=7))
    page = tab.open()
    _new_session(page)
    _say(page, "show me something")
    answer = page.locator(".msg.assistant")
    expect(answer).to_contain_text('<img src="http://evil.example/pixel.png"')
    expect(answer).to_contain_text("<script>window.pwned = 2</script>")
    expect(answer).to_contain_text("[image: tracker]")
    expect(answer.locator("a")).to_have_count(1)
    expect(answer.locator("a")).to_have_attribute("href", "https://example.org/")
    assert answer.locator("img, script, iframe").count() == 0
    assert page.evaluate("window.pwned") is None
    assert not any("evil.example" in url for url in tab.requests)


def test_approval_cards_allow_deny_with_a_reason_and_edit(tab: Tab, served: Served) -> None:
    """A call waiting for approval shows a card: edit its arguments and allow it; deny another with
    words the model is told; a reload mid-wait shows the card again."""
    served.model.add(
        ScriptedModel.tool_call("write_note", {"text": "draft"}),
        ScriptedModel.tool_call("write_note", {"text": "second"}),
        "all done",
    )
    page = tab.open()
    ident = _new_session(page)
    _say(page, "write two notes")
    card = page.locator('.approval[data-call-id="call_1"]')
    expect(card).to_contain_text("write_note asks for approval: it writes a note")
    page.reload()  # the request is in the log: the card comes back
    expect(page.locator("#session-title")).to_have_text(ident)
    expect(card.locator(".approval-arguments")).to_have_value('{\n  "text": "draft"\n}')
    card.locator(".approval-arguments").fill('{"text": "edited"}')
    card.locator(".approve-once").click()
    expect(card).to_have_attribute("data-state", "once")
    expect(card).to_contain_text("allowed once by serve (arguments edited)")
    second = page.locator('.approval[data-call-id="call_2"]')
    second.locator(".approval-reason").fill("one note is enough")
    second.locator(".approve-deny").click()
    expect(second).to_have_attribute("data-state", "deny")
    expect(second).to_contain_text("denied by serve: one note is enough")
    expect(page.locator('.tool[data-call-id="call_2"]')).to_have_attribute("data-state", "error")
    expect(page.locator(".msg.assistant").last).to_contain_text("all done")
    assert served.notes == ["edited"]
    assert "one note is enough" in str(served.model.requests[-1].messages[-1].content)


def test_a_bad_edit_shows_the_servers_refusal_and_stays_pending(tab: Tab, served: Served) -> None:
    """Arguments the tool refuses are shown as the server's error; the card stays answerable."""
    served.model.add(ScriptedModel.tool_call("write_note", {"text": "x"}), "ok")
    page = tab.open()
    _new_session(page)
    _say(page, "write")
    card = page.locator('.approval[data-call-id="call_1"]')
    card.locator(".approval-arguments").fill('{"text": 7}')
    card.locator(".approve-once").click()
    expect(card.locator(".approval-error")).to_contain_text("pending")
    expect(card).to_have_attribute("data-state", "pending")
    card.locator(".approval-arguments").fill("{not json")
    card.locator(".approve-once").click()
    expect(card.locator(".approval-error")).to_contain_text("not JSON")
    card.locator(".approve-always").click()  # the arguments are still not JSON: refused in the page
    card.locator(".approval-arguments").fill('{"text": "x"}')
    card.locator(".approve-always").click()
    expect(card).to_have_attribute("data-state", "always")
    expect(page.locator('.tool[data-call-id="call_1"]')).to_have_attribute("data-state", "done")
    assert served.notes == ["x"]


def test_a_file_edit_shows_a_diff_and_a_failed_one_shows_none(tab: Tab, served: Served) -> None:
    """An edit_file call shows removed, added and unchanged lines; a failed edit shows no diff."""
    served.model.add(
        ScriptedModel.tool_call("edit_file", {"path": "a.py", "old_text": "one\ntwo\nthree", "new_text": "one\n2\nthree"}),
        ScriptedModel.tool_call("edit_file", {"path": "b.py", "old_text": "missing", "new_text": "x"}),
        "edited",
    )
    page = tab.open()
    _new_session(page)
    _say(page, "edit")
    good = page.locator('.tool[data-call-id="call_1"]')
    expect(good).to_have_attribute("data-state", "done")
    expect(good.locator(".diff-path")).to_have_text("edit a.py")
    rows = good.locator(".diff-line")
    expect(rows).to_have_count(4)
    assert rows.all_inner_texts() == ["  one", "- two", "+ 2", "  three"]
    assert good.locator(".diff-line.del").inner_text() == "- two"
    assert good.locator(".diff-line.add").inner_text() == "+ 2"
    bad = page.locator('.tool[data-call-id="call_2"]')
    expect(bad).to_have_attribute("data-state", "error")
    expect(bad.locator(".diff")).to_have_count(0)
    expect(page.locator(".msg.assistant").last).to_contain_text("edited")


def test_the_todo_list_shows_the_latest_plan_and_survives_a_reload(tab: Tab, served: Served) -> None:
    """Each todo_write replaces the list shown above the chat; a reload shows the latest one again."""
    first = [
        {"id": "a", "content": "read the code", "status": "in_progress"},
        {"id": "b", "content": "write <b>the</b> fix", "status": "pending"},
    ]
    later = [
        {"id": "a", "content": "read the code", "status": "completed"},
        {"id": "b", "content": "write <b>the</b> fix", "status": "in_progress"},
    ]
    served.model.add(
        ScriptedModel.tool_call("todo_write", {"todos": first}),
        ScriptedModel.tool_call("todo_write", {"todos": later}),
        "planned",
    )
    page = tab.open()
    ident = _new_session(page)
    expect(page.locator("#todos")).to_be_hidden()
    _say(page, "plan it")
    expect(page.locator(".msg.assistant").last).to_contain_text("planned")
    todos = page.locator("#todos .todo")
    expect(todos).to_have_count(2)
    expect(todos.nth(0)).to_have_attribute("data-status", "completed")
    expect(todos.nth(1)).to_have_attribute("data-status", "in_progress")
    expect(todos.nth(1).locator(".todo-text")).to_have_text("write <b>the</b> fix")  # text, not HTML
    expect(page.locator("#todos .todos-title")).to_have_text("Plan · 1 open of 2")
    page.reload()
    expect(page.locator("#session-title")).to_have_text(ident)
    expect(todos.nth(0)).to_have_attribute("data-status", "completed")
    expect(page.locator("#todos")).to_be_visible()


def test_a_question_card_is_answered_with_an_option_and_typed_text(tab: Tab, served: Served) -> None:
    """ask_user shows a card (options to pick, a box to type); a reload mid-wait shows it again; an
    unanswered question is refused in the page; the answers reach the model and the card shows them."""
    questions = [
        {"id": "db", "question": "Which database?", "options": ["postgres", "sqlite"]},
        {"id": "extras", "question": "Which extras?", "options": ["docs", "tests"], "multi_select": True},
        {"id": "name", "question": "Project name?"},
    ]
    served.model.add(ScriptedModel.tool_call("ask_user", {"questions": questions}), "set up")
    page = tab.open()
    ident = _new_session(page)
    _say(page, "set it up")
    card = page.locator('.question[data-call-id="call_1"]')
    expect(card).to_contain_text("Which database?")
    page.reload()  # asked and logged: the card comes back
    expect(page.locator("#session-title")).to_have_text(ident)
    card.locator('input[type="radio"][value="sqlite"]').check()
    card.locator('input[type="checkbox"][value="docs"]').check()
    card.locator('input[type="checkbox"][value="tests"]').check()
    card.locator(".question-submit").click()
    expect(card.locator(".question-error")).to_contain_text("Project name?")
    expect(card).to_have_attribute("data-state", "pending")
    card.locator('[data-question-id="name"] .question-other').fill("zebra")
    card.locator(".question-submit").click()
    expect(card).to_have_attribute("data-state", "answered")
    expect(card).to_contain_text("answered by serve")
    expect(card.locator(".question-answer")).to_have_text(["sqlite", "docs, tests", "zebra"])
    expect(page.locator(".msg.assistant").last).to_contain_text("set up")
    told = str(served.model.requests[-1].messages[-1].content)
    assert "zebra" in told
    assert "sqlite" in told
