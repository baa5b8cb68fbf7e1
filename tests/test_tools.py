"""Tests for dsh_core.services.tools: the scoped registry, schemas and the execution pipeline."""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import pytest

import dsh_core
from dsh_core import CancelSignal, Context, DuplicateRegistrationError, hookimpl
from dsh_core.tools import Tool, ToolError, tool
from dsh_core.vocabulary import Accept, Allow, Ask, Deny, Image, Reject, Text, ToolExecution, ToolResult

pytestmark = pytest.mark.anyio


# ---------------------------------------------------------------------- tools used below


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


class Unit(enum.Enum):
    CM = "cm"
    M = "m"


@attrs.frozen
class Box:
    width: int
    unit: Unit = Unit.CM


@tool
def measure(box: Box, units: list[Unit], execution: ToolExecution) -> dict[str, Any]:
    """Describe a box."""
    assert isinstance(box, Box)
    assert all(isinstance(unit, Unit) for unit in units)
    return {"width": box.width, "unit": box.unit.value, "cwd": execution.cwd}


def call(name: str, arguments: str = "{}", **fields: Any) -> ToolExecution:
    return ToolExecution(call_id="call-1", name=name, arguments=arguments, **fields)


def text_of(result: ToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, Text))


# ---------------------------------------------------------------------- listeners


class Recorder:
    """Hears every tools/* event and records it."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    @hookimpl
    def dsh_tools_pre_execute(self, execution: ToolExecution) -> None:
        self.events.append(("pre", execution))

    @hookimpl
    def dsh_tools_post_execute(self, result: ToolResult) -> None:
        self.events.append(("post", result))

    @hookimpl
    def dsh_tools_result(self, execution: ToolExecution, result: ToolResult) -> None:
        self.events.append(("result", result))


class PreDecides:
    def __init__(self, decision: Allow | Deny | Ask) -> None:
        self.decision = decision

    @hookimpl
    async def dsh_tools_pre_execute(self, execution: ToolExecution) -> Allow | Deny | Ask:
        return self.decision


class PostDecides:
    def __init__(self, decision: Accept | Reject) -> None:
        self.decision = decision

    @hookimpl
    def dsh_tools_post_execute(self, execution: ToolExecution, result: ToolResult) -> Accept | Reject:
        return self.decision


class Approval:
    def __init__(self, answer: bool | Exception) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str]] = []

    async def approve(self, execution: ToolExecution, reason: str) -> bool:
        self.asked.append((execution.name, reason))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


# ---------------------------------------------------------------------- results and error codes


async def test_sync_body_result_becomes_json_text(dsh_ctx: Context) -> None:
    """A successful call returns the body's value; a non-str JSON value becomes JSON text."""
    dsh_ctx.tools.register(add)
    result = await dsh_ctx.tools.execute(call("add", '{"a": 2, "b": 3}'))
    assert result == ToolResult(content=(Text("5"),))
    assert not result.is_error
    assert result.error_code is None


async def test_body_return_shapes(dsh_ctx: Context) -> None:
    """str -> one Text, blocks -> themselves, a ToolResult -> as is, dict -> compact JSON."""
    image = Image("image/png", "AAAA")
    returns: dict[str, Any] = {
        "s": "plain",
        "blocks": [Text("a"), image],
        "custom": ToolResult(content=(Text("mine"),), is_error=True),
        "obj": {"k": [1, "é"]},
        "none": None,
    }
    for name, value in returns.items():
        dsh_ctx.tools.register(Tool(name=name, function=lambda value=value: value))
    tools = dsh_ctx.tools
    assert (await tools.execute(call("s"))).content == (Text("plain"),)
    assert (await tools.execute(call("blocks"))).content == (Text("a"), image)
    custom = await tools.execute(call("custom"))
    assert (custom.is_error, custom.error_code, text_of(custom)) == (True, "TOOL_ERROR", "mine")
    assert text_of(await tools.execute(call("obj"))) == '{"k":[1,"é"]}'
    assert text_of(await tools.execute(call("none"))) == "null"


async def test_body_returning_non_json_is_a_tool_error(dsh_ctx: Context) -> None:
    """A value that is not JSON (a set) is reported to the model as TOOL_ERROR."""
    dsh_ctx.tools.register(Tool(name="bad", function=lambda: {1, 2}))
    result = await dsh_ctx.tools.execute(call("bad"))
    assert (result.is_error, result.error_code) == (True, "TOOL_ERROR")
    assert "'bad'" in text_of(result)


async def test_unknown_tool_lists_the_available_ones(dsh_ctx: Context) -> None:
    """UNKNOWN_TOOL names the missing tool and every tool the agent could call."""
    dsh_ctx.tools.register(add)
    dsh_ctx.tools.register(echo)
    result = await dsh_ctx.tools.execute(call("ad"))
    assert (result.is_error, result.error_code) == (True, "UNKNOWN_TOOL")
    assert "'ad'" in text_of(result)
    assert "Available tools: add, echo." in text_of(result)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": 1,', "not valid JSON"),
        ("[1, 2]", "must be a JSON object, got an array"),
        ('{"a": NaN, "b": 1}', "not valid JSON"),
        ('{"a": "1", "b": 2}', "at arguments.a: '1' is not of type 'integer'"),
        ('{"a": 1}', "at arguments: 'b' is a required property"),
        ('{"a": 1, "b": 2, "c": 3}', "Additional properties are not allowed"),
    ],
)
async def test_invalid_arguments(dsh_ctx: Context, arguments: str, expected: str) -> None:
    """Arguments that are not JSON, not an object, or break the schema give INVALID_ARGS; the body never runs."""
    ran: list[int] = []

    @tool
    def add2(a: int, b: int) -> int:
        ran.append(a)
        return a + b

    dsh_ctx.tools.register(add2)
    result = await dsh_ctx.tools.execute(call("add2", arguments))
    assert (result.is_error, result.error_code) == (True, "INVALID_ARGS")
    assert expected in text_of(result)
    assert ran == []


async def test_invalid_arguments_lists_every_error_with_its_path(dsh_ctx: Context) -> None:
    """Each schema violation is listed with the path where it happened."""
    dsh_ctx.tools.register(measure)
    result = await dsh_ctx.tools.execute(call("measure", '{"box": {"width": "w"}, "units": ["cm", "km"]}'))
    assert result.error_code == "INVALID_ARGS"
    assert "- at arguments.box.width: 'w' is not of type 'integer'" in text_of(result)
    assert "- at arguments.units[1]: 'km' is not one of ['cm', 'm']" in text_of(result)


async def test_empty_arguments_mean_no_arguments(dsh_ctx: Context) -> None:
    """An empty arguments string is an empty object (models send it for tools without parameters)."""
    dsh_ctx.tools.register(Tool(name="ping", function=lambda: "pong"))
    assert text_of(await dsh_ctx.tools.execute(call("ping", ""))) == "pong"


async def test_body_exception_is_a_tool_error(dsh_ctx: Context) -> None:
    """A raising body gives TOOL_ERROR naming the tool and the exception."""
    dsh_ctx.tools.register(explode)
    result = await dsh_ctx.tools.execute(call("explode", '{"reason": "disk full"}'))
    assert (result.is_error, result.error_code) == (True, "TOOL_ERROR")
    assert "tool 'explode' failed: ValueError: disk full" in text_of(result)


class QuotaError(ToolError):
    """A plugin's own model-facing error."""


@pytest.mark.parametrize("kind", ["sync", "async", "subclass", "with timeout"])
async def test_tool_error_is_the_models_text(
    dsh_ctx: Context, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A body raising ToolError gives TOOL_ERROR with 'Error: ' and its message as written, no traceback logged."""

    def fail(path: str) -> str:
        error = QuotaError if kind == "subclass" else ToolError
        raise error(f"{path!r} is outside the workspace; give a path below it")

    async def fail_async(path: str) -> str:
        await anyio.lowlevel.checkpoint()
        return fail(path)

    body = fail if kind in ("sync", "subclass") else fail_async
    dsh_ctx.tools.register(
        Tool(
            name="refuse",
            function=body,
            parameters={"type": "object", "properties": {"path": {"type": "string"}}},
            timeout=30 if kind == "with timeout" else None,
        )
    )
    caplog.set_level(logging.DEBUG)
    result = await dsh_ctx.tools.execute(call("refuse", '{"path": "/etc"}'))
    assert (result.is_error, result.error_code) == (True, "TOOL_ERROR")
    assert text_of(result) == "Error: '/etc' is outside the workspace; give a path below it"
    assert [record for record in caplog.records if record.exc_info] == []


def test_tool_error_is_public_and_a_dsh_error() -> None:
    """ToolError is the same class from dsh_core and dsh_core.tools, under DshError, carrying its message."""
    assert dsh_core.ToolError is ToolError
    error = ToolError("no such file")
    assert isinstance(error, dsh_core.DshError)
    assert (str(error), error.message) == ("no such file", "no such file")


async def test_arguments_reach_the_body_converted(dsh_ctx: Context) -> None:
    """Enum and attrs parameters arrive as members and instances; the execution is injected."""
    dsh_ctx.tools.register(measure)
    result = await dsh_ctx.tools.execute(
        call("measure", '{"box": {"width": 3, "unit": "m"}, "units": ["cm"]}', cwd="/w")
    )
    assert text_of(result) == '{"width":3,"unit":"m","cwd":"/w"}'


async def test_timeout(dsh_ctx: Context) -> None:
    """A body that outlives the tool's timeout is stopped and reported as TIMEOUT."""

    @tool(timeout=0.01)
    async def slow() -> str:
        await anyio.sleep_forever()
        return "never"

    dsh_ctx.tools.register(slow)
    result = await dsh_ctx.tools.execute(call("slow"))
    assert (result.is_error, result.error_code) == (True, "TIMEOUT")
    assert "0.01 s" in text_of(result)


async def test_abort_through_the_signal(dsh_ctx: Context) -> None:
    """Cancelling execution.signal while the body runs ends the call ABORTED, not raised."""
    signal = CancelSignal()
    recorder = Recorder()
    dsh_ctx.register_plugin(recorder)

    @tool
    async def wait() -> str:
        signal.cancel("user pressed stop")
        await anyio.sleep_forever()
        return "never"

    dsh_ctx.tools.register(wait)
    result = await dsh_ctx.tools.execute(call("wait", signal=signal))
    assert (result.is_error, result.error_code) == (True, "ABORTED")
    assert [kind for kind, _ in recorder.events] == ["pre", "result"]


async def test_signal_cancelled_before_start_never_runs_the_body(dsh_ctx: Context) -> None:
    """A call whose signal is already cancelled is ABORTED before any policy or body runs."""
    ran: list[bool] = []
    dsh_ctx.tools.register(Tool(name="t", function=lambda: ran.append(True)))
    signal = CancelSignal()
    signal.cancel()
    result = await dsh_ctx.tools.execute(call("t", signal=signal))
    assert result.error_code == "ABORTED"
    assert ran == []


class ResultsOnly:
    """Hears tools/result only: the pipeline up to the body has no listener (no cancel scope armed)."""

    def __init__(self) -> None:
        self.results: list[ToolResult] = []

    @hookimpl
    def dsh_tools_result(self, result: ToolResult) -> None:
        self.results.append(result)


async def test_abort_reaches_what_a_plain_function_returned_to_await(dsh_ctx: Context) -> None:
    """A plain function returning an awaitable that waits: cancelling the signal ends the call ABORTED
    and skips tools/post-execute, with nothing listening before the body."""
    signal = CancelSignal()
    heard = ResultsOnly()
    dsh_ctx.register_plugin(heard)

    async def wait() -> str:
        signal.cancel("user pressed stop")
        await anyio.sleep_forever()
        return "never"

    dsh_ctx.tools.register(Tool(name="wait", function=lambda: wait()))
    with anyio.fail_after(5):
        result = await dsh_ctx.tools.execute(call("wait", signal=signal))
    assert (result.is_error, result.error_code) == (True, "ABORTED")
    assert heard.results == [result]


async def test_outer_cancellation_of_a_plain_function_s_awaitable_propagates(dsh_ctx: Context) -> None:
    """Cancellation from outside reaches a plain function's awaitable and is not turned into a result."""
    outer_scope = anyio.CancelScope()
    returned: list[ToolResult] = []

    async def hang() -> str:
        outer_scope.cancel()
        await anyio.sleep_forever()
        return "never"

    dsh_ctx.tools.register(Tool(name="hang", function=lambda: hang()))
    with outer_scope:
        returned.append(await dsh_ctx.tools.execute(call("hang", signal=CancelSignal())))
    assert outer_scope.cancelled_caught
    assert returned == []


async def test_the_body_sees_every_field_of_the_execution(dsh_ctx: Context) -> None:
    """The execution a body receives is the caller's, every field kept, with ``parsed`` added."""
    seen: list[ToolExecution] = []

    @tool
    def look(n: int, execution: ToolExecution) -> str:
        """Record the execution."""
        seen.append(execution)
        return str(n)

    dsh_ctx.tools.register(look)
    given = ToolExecution(
        call_id="c-7", name="look", arguments='{"n": 3}', parsed=None, agent_id="a", session_id="s",
        turn=2, step=5, cwd="/tmp", ctx=dsh_ctx, signal=CancelSignal(),
    )
    # every field is given above: a new field must be given here too (and kept by the pipeline)
    assert {field.name for field in attrs.fields(ToolExecution)} == {
        "call_id", "name", "arguments", "parsed", "agent_id", "session_id", "turn", "step", "cwd", "ctx", "signal",
    }
    await dsh_ctx.tools.execute(given)
    (execution,) = seen
    assert execution == attrs.evolve(given, parsed={"n": 3})
    assert (execution.ctx, execution.signal) == (given.ctx, given.signal)  # not compared by ==


@pytest.mark.parametrize("with_signal", [False, True])
@pytest.mark.parametrize("tool_timeout", [None, 5.0])
async def test_outer_cancellation_propagates(
    dsh_ctx: Context, with_signal: bool, tool_timeout: float | None
) -> None:
    """Cancellation from outside the pipeline is never swallowed into a result."""
    outer_scope = anyio.CancelScope()
    returned: list[ToolResult] = []

    @tool(timeout=tool_timeout)
    async def hang() -> str:
        outer_scope.cancel()
        await anyio.sleep_forever()
        return "never"

    dsh_ctx.tools.register(hang)
    with outer_scope:
        returned.append(
            await dsh_ctx.tools.execute(call("hang", signal=CancelSignal() if with_signal else None))
        )
    assert outer_scope.cancelled_caught
    assert returned == []


# ---------------------------------------------------------------------- decisions and approval


async def test_pre_execute_deny(dsh_ctx: Context) -> None:
    """Deny(reason) gives DENIED with the reason; the body never runs."""
    ran: list[bool] = []
    dsh_ctx.tools.register(Tool(name="rm", function=lambda: ran.append(True)))
    dsh_ctx.register_plugin(PreDecides(Deny("rm is not allowed here.")))
    recorder = Recorder()
    dsh_ctx.register_plugin(recorder)
    result = await dsh_ctx.tools.execute(call("rm"))
    assert (result.is_error, result.error_code) == (True, "DENIED")
    assert "was denied: rm is not allowed here. Do not repeat" in text_of(result)
    assert ran == []
    assert [kind for kind, _ in recorder.events] == ["pre", "post", "result"]


async def test_ask_without_approval_channel_is_denied(dsh_ctx: Context) -> None:
    """Ask with no approval service is a denial saying that no approval channel exists."""
    dsh_ctx.tools.register(add)
    dsh_ctx.register_plugin(PreDecides(Ask("adding needs a human")))
    result = await dsh_ctx.tools.execute(call("add", '{"a": 1, "b": 1}'))
    assert result.error_code == "DENIED"
    assert "no approval channel" in text_of(result)
    assert "adding needs a human" in text_of(result)


@pytest.mark.parametrize(
    ("answer", "code", "says"),
    [
        (True, None, "2"),
        (False, "DENIED", "rejected"),
        (OSError("tty gone"), "DENIED", "asking for approval failed (OSError: tty gone)"),
    ],
)
async def test_ask_goes_to_the_approval_service(
    dsh_ctx: Context, answer: bool | Exception, code: str | None, says: str
) -> None:
    """Ask consults ctx.approval: approved runs the body, rejected or failing denies."""
    approval = Approval(answer)
    dsh_ctx.child("plugin:approval").provide("approval", approval)
    dsh_ctx.tools.register(add)
    dsh_ctx.register_plugin(PreDecides(Ask("confirm")))
    result = await dsh_ctx.tools.execute(call("add", '{"a": 1, "b": 1}'))
    assert approval.asked == [("add", "confirm")]
    assert result.error_code == code
    assert says in text_of(result)


async def test_guard_denies_after_pre_execute_allowed(dsh_ctx: Context) -> None:
    """A guard's deny wins even when pre-execute explicitly allowed the call."""
    dsh_ctx.tools.register(add)
    dsh_ctx.register_plugin(PreDecides(Allow()))
    seen: list[ToolExecution] = []

    def no_adding(execution: ToolExecution) -> str | None:
        seen.append(execution)
        return "policy forbids add" if execution.name == "add" else None

    dsh_ctx.tools.guard(no_adding)
    result = await dsh_ctx.tools.execute(call("add", '{"a": 1, "b": 1}'))
    assert result.error_code == "DENIED"
    assert "policy forbids add" in text_of(result)
    assert seen[0].parsed == {"a": 1, "b": 1}


async def test_guard_order_never_changes_the_outcome(start_harness: Callable[..., Any]) -> None:
    """The same guards registered in either order give the identical result."""

    def deny_a(execution: ToolExecution) -> str:
        return "reason A"

    async def deny_b(execution: ToolExecution) -> str:
        return "reason B"

    def allow(execution: ToolExecution) -> None:
        return None

    def broken(execution: ToolExecution) -> None:
        raise RuntimeError("guard bug")

    results = []
    for order in ([deny_a, allow, deny_b, broken], [broken, deny_b, allow, deny_a]):
        async with start_harness() as ctx:
            ctx.tools.register(add)
            for guard in order:
                ctx.tools.guard(guard)
            results.append(await ctx.tools.execute(call("add", '{"a": 1, "b": 1}')))
    assert results[0] == results[1]
    assert results[0].error_code == "DENIED"
    assert "reason A" in text_of(results[0])
    assert "reason B" in text_of(results[0])


async def test_a_raising_guard_denies(dsh_ctx: Context) -> None:
    """A guard that raises fails closed."""

    def broken(execution: ToolExecution) -> None:
        raise RuntimeError("guard bug")

    dsh_ctx.tools.register(add)
    dsh_ctx.tools.guard(broken)
    result = await dsh_ctx.tools.execute(call("add", '{"a": 1, "b": 1}'))
    assert result.error_code == "DENIED"
    assert "guard bug" in text_of(result)


async def test_scoped_guard_covers_only_its_agent(dsh_ctx: Context) -> None:
    """A guard registered through agent.ctx denies that agent's calls only, and leaves with it."""
    dsh_ctx.tools.register(add)
    a = dsh_ctx.child("agent:a", agent_id="a")
    a.tools.guard(lambda execution: "not for a")
    arguments = '{"a": 1, "b": 1}'
    assert (await dsh_ctx.tools.execute(call("add", arguments, agent_id="a"))).error_code == "DENIED"
    assert (await dsh_ctx.tools.execute(call("add", arguments, agent_id="b"))).error_code is None
    await a.dispose()
    assert (await dsh_ctx.tools.execute(call("add", arguments, agent_id="a"))).error_code is None


async def test_post_execute_accept_replaces_content_and_adds_context(dsh_ctx: Context) -> None:
    """Accept(content, additional_context) replaces what the model sees and adds notes."""
    dsh_ctx.tools.register(add)
    dsh_ctx.register_plugin(PostDecides(Accept(content="redacted", additional_context=("note",))))
    recorder = Recorder()
    dsh_ctx.register_plugin(recorder)
    result = await dsh_ctx.tools.execute(call("add", '{"a": 1, "b": 1}'))
    assert result == ToolResult(content=(Text("redacted"),), additional_context=("note",))
    assert recorder.events[-1] == ("result", result)


async def test_post_execute_reject_turns_the_result_into_an_error(dsh_ctx: Context) -> None:
    """Reject(feedback) makes an error result carrying the feedback."""
    dsh_ctx.tools.register(add)
    dsh_ctx.register_plugin(PostDecides(Reject("run the linter first")))
    result = await dsh_ctx.tools.execute(call("add", '{"a": 1, "b": 1}'))
    assert (result.is_error, result.error_code) == (True, "DENIED")
    assert "run the linter first" in text_of(result)


async def test_pipeline_event_order_and_parsed_arguments(dsh_ctx: Context) -> None:
    """pre -> body -> post -> result, and listeners see the parsed arguments."""
    recorder = Recorder()
    dsh_ctx.register_plugin(recorder)
    dsh_ctx.tools.register(add)
    result = await dsh_ctx.tools.execute(call("add", '{"a": 1, "b": 2}'))
    kinds = [kind for kind, _ in recorder.events]
    assert kinds == ["pre", "post", "result"]
    assert recorder.events[0][1].parsed == {"a": 1, "b": 2}
    assert recorder.events[2][1] is result


async def test_early_errors_skip_policy_but_are_reported(dsh_ctx: Context) -> None:
    """Unknown tools and invalid arguments skip pre/post but still reach tools/result."""
    recorder = Recorder()
    dsh_ctx.register_plugin(recorder)
    dsh_ctx.tools.register(add)
    await dsh_ctx.tools.execute(call("nope"))
    await dsh_ctx.tools.execute(call("add", "not json"))
    assert [kind for kind, _ in recorder.events] == ["result", "result"]


async def test_a_raising_listener_propagates(dsh_ctx: Context) -> None:
    """A plugin that raises in pre-execute is a plugin bug, not a tool result: it propagates."""

    class Broken:
        @hookimpl
        def dsh_tools_pre_execute(self, execution: ToolExecution) -> None:
            raise LookupError("plugin bug")

    dsh_ctx.register_plugin(Broken())
    dsh_ctx.tools.register(add)
    with pytest.raises(LookupError, match="plugin bug"):
        await dsh_ctx.tools.execute(call("add", '{"a": 1, "b": 1}'))


async def test_a_wrong_decision_type_propagates(dsh_ctx: Context) -> None:
    """A listener returning something that is not a decision is a TypeError for its author."""

    class Wrong:
        @hookimpl
        def dsh_tools_pre_execute(self, execution: ToolExecution) -> str:
            return "yes"

    dsh_ctx.register_plugin(Wrong())
    dsh_ctx.tools.register(add)
    with pytest.raises(TypeError, match="tools/pre-execute listener returned 'yes'"):
        await dsh_ctx.tools.execute(call("add", '{"a": 1, "b": 1}'))


async def test_around_wrappers_nest_in_call_order(dsh_ctx: Context) -> None:
    """tools/execute wrappers nest: the first in call order is outermost, the body innermost."""
    trail: list[str] = []

    def wrapper(label: str, tryfirst: bool = False, trylast: bool = False) -> object:
        class Wrapper:
            @hookimpl(tryfirst=tryfirst, trylast=trylast)
            async def dsh_tools_execute(
                self, execution: ToolExecution, call_next: Callable[[], Awaitable[ToolResult]]
            ) -> ToolResult:
                trail.append(f"{label}:enter")
                result = await call_next()
                trail.append(f"{label}:exit")
                return attrs.evolve(result, content=(*result.content, Text(label)))

        return Wrapper()

    @tool
    def body() -> str:
        trail.append("body")
        return "b"

    dsh_ctx.register_plugin(wrapper("inner", trylast=True))
    dsh_ctx.register_plugin(wrapper("outer", tryfirst=True))
    dsh_ctx.register_plugin(wrapper("middle"))
    dsh_ctx.tools.register(body)
    result = await dsh_ctx.tools.execute(call("body"))
    assert trail == [
        "outer:enter",
        "middle:enter",
        "inner:enter",
        "body",
        "inner:exit",
        "middle:exit",
        "outer:exit",
    ]
    assert text_of(result) == "binnermiddleouter"


async def test_around_wrapper_may_answer_without_the_body(dsh_ctx: Context) -> None:
    """A wrapper can return its own result (a cache), and the body never runs."""
    ran: list[bool] = []

    class Cache:
        @hookimpl
        def dsh_tools_execute(
            self, execution: ToolExecution, call_next: Callable[[], Awaitable[ToolResult]]
        ) -> ToolResult:
            return ToolResult(content=(Text("cached"),))

    dsh_ctx.register_plugin(Cache())
    dsh_ctx.tools.register(Tool(name="t", function=lambda: ran.append(True)))
    assert text_of(await dsh_ctx.tools.execute(call("t"))) == "cached"
    assert ran == []


# ---------------------------------------------------------------------- registry, scopes, schemas


async def test_schemas_are_sorted_frozen_and_cached(dsh_ctx: Context) -> None:
    """schemas() lists name/description/parameters by name and is rebuilt only on change."""
    dsh_ctx.tools.register(echo)
    dsh_ctx.tools.register(add)
    first = dsh_ctx.tools.schemas()
    assert [schema["name"] for schema in first] == ["add", "echo"]
    assert first[0] == {"name": "add", "description": "Add two integers.", "parameters": add.parameters}
    assert dsh_ctx.tools.schemas() is first
    dispose = dsh_ctx.tools.register(explode)
    assert [schema["name"] for schema in dsh_ctx.tools.schemas()] == ["add", "echo", "explode"]
    dispose()
    assert [schema["name"] for schema in dsh_ctx.tools.schemas()] == ["add", "echo"]
    with pytest.raises(TypeError):
        first[0]["name"] = "x"


async def test_scoped_tool_is_private_shadows_and_vanishes(dsh_ctx: Context) -> None:
    """An agent's tool is seen only by it, shadows a global one, and leaves with its context."""

    @tool(name="echo")
    def loud_echo(text: str) -> str:
        """Echo loudly."""
        return text.upper()

    @tool
    def secret() -> str:
        return "s"

    dsh_ctx.tools.register(echo)
    a = dsh_ctx.child("agent:a", agent_id="a")
    a.tools.register(loud_echo)
    a.tools.register(secret)

    assert dsh_ctx.tools.names() == ("echo",)
    assert dsh_ctx.tools.names("a") == ("echo", "secret")
    assert a.tools.names() == ("echo", "secret")  # an agent's view defaults to its own agent
    assert dsh_ctx.tools.names("b") == ("echo",)
    assert [s["description"] for s in dsh_ctx.tools.schemas("a")] == ["Echo loudly.", ""]
    assert dsh_ctx.tools.get("echo", "a") is loud_echo
    assert text_of(await dsh_ctx.tools.execute(call("echo", '{"text": "hi"}', agent_id="a"))) == "HI"
    assert text_of(await dsh_ctx.tools.execute(call("echo", '{"text": "hi"}', agent_id="b"))) == "hi"
    assert (await dsh_ctx.tools.execute(call("secret", agent_id="b"))).error_code == "UNKNOWN_TOOL"

    await a.dispose()
    assert dsh_ctx.tools.names("a") == ("echo",)
    assert text_of(await dsh_ctx.tools.execute(call("echo", '{"text": "hi"}', agent_id="a"))) == "hi"


async def test_duplicate_name_in_one_scope_names_the_owner(dsh_ctx: Context) -> None:
    """A second tool of the same name in the same scope is refused, naming who has it."""
    dsh_ctx.child("plugin:math").tools.register(add)
    with pytest.raises(
        DuplicateRegistrationError, match=r"tool 'add' is already registered globally by 'plugin:math'"
    ):
        dsh_ctx.tools.register(add)
    a = dsh_ctx.child("agent:a", agent_id="a")
    a.tools.register(add)  # another scope: fine, it shadows
    with pytest.raises(DuplicateRegistrationError, match="for agent 'a' by 'agent:a'"):
        a.tools.register(add)


async def test_stale_disposer_never_removes_a_later_tool(dsh_ctx: Context) -> None:
    """A tool's disposer is exact and idempotent."""
    dispose = dsh_ctx.tools.register(add)
    dispose()
    dsh_ctx.tools.register(add)
    dispose()
    assert dsh_ctx.tools.names() == ("add",)


async def test_register_accepts_a_typed_function_and_refuses_bad_schemas(dsh_ctx: Context) -> None:
    """A plain typed function is made a tool; an invalid JSON Schema is refused at register."""

    def triple(x: int) -> int:
        """Triple it."""
        return 3 * x

    dsh_ctx.tools.register(triple)
    assert text_of(await dsh_ctx.tools.execute(call("triple", '{"x": 2}'))) == "6"
    broken = Tool(
        name="broken", function=print, parameters={"type": "object", "properties": {"x": {"type": 5}}}
    )
    with pytest.raises(ValueError, match="'broken': its parameters are not a valid JSON Schema"):
        dsh_ctx.tools.register(broken)


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object", "required": "x"},
        {"type": "object", "properties": {"x": {"type": "string", "minLength": -1}}},
        {"type": "object", "properties": {"x": {"type": ["integer", "integer"]}}},
    ],
)
async def test_simple_but_ill_formed_schema_is_refused_at_register(
    dsh_ctx: Context, parameters: dict[str, Any]
) -> None:
    """A schema in the fast acceptor's subset but refused by the meta-schema is still refused at register."""
    with pytest.raises(ValueError, match="'odd': its parameters are not a valid JSON Schema"):
        dsh_ctx.tools.register(Tool(name="odd", function=print, parameters=parameters))


async def test_is_parallel_safe(dsh_ctx: Context) -> None:
    """The runtime asks the visible tool; unknown tools and bad arguments are not parallel safe."""

    @tool(parallel_safe=lambda arguments: arguments.get("path", "").startswith("/tmp"))
    def write(path: str) -> str:
        return path

    dsh_ctx.tools.register(write)
    assert dsh_ctx.tools.is_parallel_safe("write", '{"path": "/tmp/x"}')
    assert not dsh_ctx.tools.is_parallel_safe("write", '{"path": "/etc/x"}')
    assert not dsh_ctx.tools.is_parallel_safe("write", "not json")
    assert not dsh_ctx.tools.is_parallel_safe("nope", "{}")
    assert dsh_ctx.tools.is_parallel_safe("write", {"path": "/tmp/y"})


async def test_execute_refuses_what_is_not_an_execution(dsh_ctx: Context) -> None:
    """Passing anything but a ToolExecution is a TypeError at the boundary."""
    with pytest.raises(TypeError, match="takes a ToolExecution, got dict"):
        await dsh_ctx.tools.execute({"name": "add", "arguments": "{}"})


async def test_restrict_hides_schemas_and_refuses_calls_for_that_agent_only() -> None:
    """tools.restrict through agent.ctx narrows what that agent sees; others are unaffected."""
    from dsh_core import Harness, ToolExecution, tool

    @tool
    def alpha() -> str:
        """A."""
        return "a"

    @tool
    def beta() -> str:
        """B."""
        return "b"

    async with Harness(autoload=False) as ctx:
        ctx.tools.register(alpha)
        ctx.tools.register(beta)
        agent_ctx = ctx.child("agent:a", agent_id="a")
        agent_ctx.tools.restrict(["alpha", "beta"])
        agent_ctx.tools.restrict(["alpha"])  # narrows further
        assert [s["name"] for s in ctx.tools.schemas("a")] == ["alpha"]
        assert [s["name"] for s in ctx.tools.schemas("b")] == ["alpha", "beta"]
        refused = await ctx.tools.execute(ToolExecution(call_id="c1", name="beta", arguments="{}", agent_id="a"))
        assert refused.error_code == "UNKNOWN_TOOL"
        with pytest.raises(ValueError, match=r"agent\.ctx"):
            ctx.tools.restrict(["alpha"])
        await agent_ctx.dispose()
        assert [s["name"] for s in ctx.tools.schemas("a")] == ["alpha", "beta"]


async def test_arguments_that_overflow_a_float_are_invalid_args_not_a_crash() -> None:
    """{"x": 1e400} is JSON text but not a finite float: INVALID_ARGS, never an exception."""
    from dsh_core import Harness, ToolExecution, tool

    @tool
    def num(x: float) -> str:
        """Echo."""
        return str(x)

    async with Harness(autoload=False) as ctx:
        ctx.tools.register(num)
        result = await ctx.tools.execute(ToolExecution(call_id="c1", name="num", arguments='{"x": 1e400}'))
    assert result.error_code == "INVALID_ARGS"
    assert "arguments.x" in result.content[0].text  # type: ignore[union-attr]


async def test_agent_layers_leave_with_the_agent() -> None:
    """Scoped tools, guards, restrictions and prompt sections leave no per-agent state behind."""
    from dsh_core import Harness, tool

    @tool
    def mine() -> str:
        """Mine."""
        return "m"

    async with Harness(autoload=False) as ctx:
        runtime = ctx.tools.runtime
        prompt = ctx.get_service("system_prompt")._service
        for index in range(20):
            agent_ctx = ctx.child(f"agent:{index}", agent_id=f"a{index}")
            agent_ctx.tools.register(mine)
            agent_ctx.tools.guard(lambda execution: None)
            agent_ctx.tools.restrict(["mine"])
            agent_ctx.system_prompt.section("note", "hello")
            ctx.tools.schemas(f"a{index}")
            await agent_ctx.dispose()
        ctx.tools.schemas("someone-else")
        assert set(runtime._tools) == {None}
        assert runtime._guards == {}
        assert runtime._allowlists == {}
        assert set(runtime._schema_cache) <= {None}
        assert all(scope is None for scope in prompt._sections)
