"""Tool arguments from the model (SPEC §9.2): whatever the string holds, the call gets INVALID_ARGS, never an exception."""

from __future__ import annotations

import pytest

from dsh_core import Context, Harness, Tool, ToolExecution, ToolResult, tool
from dsh_core.tools import MAX_ARGUMENT_DEPTH

pytestmark = pytest.mark.anyio

ran: list[object] = []


def _echo(text: str, count: int = 1, data: object = None, ratio: float | None = None) -> str:
    ran.append(text)
    return text * count


echo = Tool(
    name="echo",
    description="Echo the text.",
    function=_echo,
    parameters={
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "count": {"type": "integer", "minimum": 0, "maximum": 5},
            "data": {},
            "ratio": {"type": ["number", "null"]},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
)


async def run(arguments: str) -> ToolResult:
    ran.clear()
    async with Harness(autoload=False) as ctx:
        ctx.tools.register(echo)
        return await ctx.tools.execute(ToolExecution(call_id="c1", name="echo", arguments=arguments))


def message(result: ToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"text": "x", "data": ' + "[" * 100_000 + "]" * 100_000 + "}", "nest more than 64 levels deep"),
        ('{"text": "x", "data": ' + "[" * 100_000, "nest more than 64 levels deep"),
        ('{"text": "x", "data": {"a": ' + "[" * 65 + "]" * 65 + "}}", "arguments.data.a[0][0]"),
        ('{"text": "a\\u0000b"}', "arguments.text holds a NUL character (\\u0000) at character 1"),
        ('{"text": "a\x00b"}', "not valid JSON (Invalid control character"),
        ('{"text": "x", "data": {"k\\u0000": 1}}', "a key of arguments.data holds a NUL character"),
        ('{"text": "\\ud800"}', "arguments.text holds a lone surrogate (\\ud800)"),
        ('{"text": "ok \\udfff"}', "a lone surrogate (\\udfff) at character 3"),
        ('{"text": "\ud83d"}', "arguments.text holds a lone surrogate (\\ud83d)"),
        ('{"text": "x", "data": {"list": ["fine", "\\udc00"]}}', "arguments.data.list[1] holds a lone surrogate"),
        ('{"text": "x", "ratio": NaN}', "not valid JSON (NaN is not a JSON number)"),
        ('{"text": "x", "ratio": -Infinity}', "not valid JSON (-Infinity is not a JSON number)"),
        ('{"text": "x", "ratio": 1e400}', "arguments.ratio"),
        ('{"text": "x", "count": ' + "9" * 5000 + "}", "Exceeds the limit (4300 digits)"),
        ('{"text": "x", "count": -1}', "at arguments.count: -1 is less than the minimum of 0"),
        ('{"text": "x", "count": 6}', "at arguments.count: 6 is greater than the maximum of 5"),
        ('{"text": 5}', "at arguments.text: 5 is not of type 'string'"),
        ('{"text": "x"} trailing', "not valid JSON (Extra data at line 1 column 15)"),
        ('"just a string"', "must be a JSON object, got a string"),
    ],
)
async def test_bad_arguments_are_invalid_args(arguments: str, expected: str) -> None:
    """Deep nesting, NUL, lone surrogates, non-finite and huge numbers and schema bounds: INVALID_ARGS, body never runs."""
    result = await run(arguments)
    assert (result.is_error, result.error_code) == (True, "INVALID_ARGS"), message(result)
    assert expected in message(result)
    assert ran == []


async def test_surrogate_pairs_and_ordinary_escapes_are_fine() -> None:
    """An escaped surrogate pair is one ordinary character; \\n and \\u00e9 pass as they are."""
    result = await run('{"text": "\\ud83d\\ude00 caf\\u00e9\\n"}')
    assert result.error_code is None, message(result)
    assert message(result) == "\U0001f600 café\n"


async def test_nesting_up_to_the_limit_is_accepted() -> None:
    """Nesting within the limit is ordinary arguments (the limit counts containers below the object)."""
    depth = MAX_ARGUMENT_DEPTH - 1
    result = await run('{"text": "x", "data": {"a": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}}")
    assert result.error_code is None, message(result)


async def test_a_long_schema_violation_is_clipped() -> None:
    """jsonschema quotes the offending value; a huge one is cut so the message stays readable."""
    result = await run('{"text": "x", "count": "' + "y" * 100_000 + '"}')
    assert result.error_code == "INVALID_ARGS"
    assert len(message(result)) < 1000
    assert "[...]" in message(result)


async def test_many_problems_are_summarised() -> None:
    """More than ten schema problems: the first ten, then how many more."""

    @tool
    def many(values: list[int]) -> str:
        return ""

    async with Harness(autoload=False) as ctx:
        ctx.tools.register(many)
        arguments = '{"values": [' + ", ".join(['"s"'] * 15) + "]}"
        result = await ctx.tools.execute(ToolExecution(call_id="c", name="many", arguments=arguments))
    assert result.error_code == "INVALID_ARGS"
    assert message(result).count("\n- at ") == 10
    assert "- and 5 more problems" in message(result)


async def test_is_parallel_safe_never_raises_for_deep_arguments(dsh_ctx: Context) -> None:
    """The loop asks is_parallel_safe with the raw string before executing: deep nesting is just 'no'."""
    dsh_ctx.tools.register(echo)
    assert dsh_ctx.tools.is_parallel_safe("echo", '{"text": ' + "[" * 100_000 + "}") is False
