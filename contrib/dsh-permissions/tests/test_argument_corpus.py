"""A generated corpus of bad tool arguments against the workspace tools with the permissions plugin loaded.

SPEC §9.2: whatever the model sends as a call's arguments, that call gets ``INVALID_ARGS`` and the
turn goes on. Each generated string goes through ``ctx.tools.execute`` (and so through the
permissions plugin's listeners, where a NUL once escaped as ``ValueError``), and batches of them
are played by a scripted model in a real agent turn, which must end normally.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from dsh_permissions import PermissionsPlugin
from dsh_workspace import WorkspacePlugin
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_core import AgentOptions, Harness, ToolExecution
from dsh_core.testing import Reply, ScriptedModel

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

BACKENDS = ("asyncio", "trio")

#: (tool, arguments that are valid for it): the base that the strategies spoil
VALID: dict[str, dict[str, Any]] = {
    "read_file": {"path": "notes.txt", "offset": 1, "limit": 5},
    "list_dir": {"path": "."},
    "glob": {"pattern": "*.txt", "path": "."},
    "grep": {"pattern": "x", "path": ".", "context": 1},
    "write_file": {"path": "out.txt", "content": "x"},
    "edit_file": {"path": "notes.txt", "old_text": "a", "new_text": "b"},
    "bash": {"command": "echo ran > ran.txt", "timeout": 5},
}
#: numeric arguments and a value out of their bounds
OUT_OF_BOUNDS: dict[str, tuple[str, st.SearchStrategy[Any]]] = {
    "read_file": ("offset", st.integers(max_value=0)),
    "grep": ("context", st.integers(max_value=-1) | st.integers(min_value=11)),
    "bash": ("timeout", st.floats(max_value=0, allow_nan=False) | st.floats(min_value=600.001, max_value=1e300)),
}
tools = st.sampled_from(sorted(VALID))
bad_chars = st.sampled_from(["\\u0000", "\\ud800", "\\udfff", "\\udbff", "\\ud83d"])


@st.composite
def deep(draw: st.DrawFn) -> tuple[str, str]:
    """A valid call with one value replaced by arrays or objects nested 65 to 100,000 deep (maybe unclosed)."""
    name = draw(tools)
    key = draw(st.sampled_from(sorted(VALID[name])))
    depth = draw(st.integers(65, 2_000) | st.just(100_000))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    closed = draw(st.booleans())
    nested = opener * depth + ("1" + closer * depth if closed else "")
    base = json.dumps({k: v for k, v in VALID[name].items() if k != key})
    return name, base[:-1] + (", " if len(base) > 2 else "") + json.dumps(key) + ": " + nested + "}"


@st.composite
def bad_strings(draw: st.DrawFn) -> tuple[str, str]:
    """A valid call with a NUL or a lone surrogate (escaped, or raw for surrogates) inside one string or key."""
    name = draw(tools)
    arguments = dict(VALID[name])
    strings = [key for key, value in arguments.items() if isinstance(value, str)]
    char = draw(bad_chars)
    text = json.dumps(arguments)
    if draw(st.booleans()):
        key = draw(st.sampled_from(strings))
        value = json.dumps(arguments[key])
        position = draw(st.integers(1, len(value) - 1))
        spoiled = value[:position] + char + value[position:]
        text = text.replace(f'"{key}": {value}', f'"{key}": {spoiled}', 1)
    else:
        text = text[:-1] + f', "k{char}y": 1}}'
    if char != "\\u0000" and draw(st.booleans()):
        text = text.replace(char, chr(int(char[2:], 16)))  # the raw surrogate, not its escape
    return name, text


@st.composite
def non_finite(draw: st.DrawFn) -> tuple[str, str]:
    """A number that no float holds, or that JSON does not have, or too many digits to convert."""
    name = draw(st.sampled_from(["read_file", "grep", "bash"]))
    key = OUT_OF_BOUNDS[name][0]
    number = draw(
        st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
        | st.integers(4301, 6000).map(lambda digits: "7" * digits)
    )
    base = json.dumps({k: v for k, v in VALID[name].items() if k != key})
    return name, base[:-1] + f', "{key}": {number}}}'


@st.composite
def schema_breaking(draw: st.DrawFn) -> tuple[str, str]:
    """A value out of its bounds, of the wrong type, a missing required key or an unknown one."""
    name = draw(tools)
    arguments = dict(VALID[name])
    how = draw(st.sampled_from(["bounds", "type", "missing", "extra"]))
    if how == "bounds" and name in OUT_OF_BOUNDS:
        key, values = OUT_OF_BOUNDS[name]
        arguments[key] = draw(values)
    elif how in ("type", "bounds"):
        key = draw(st.sampled_from(sorted(arguments)))
        wrong = st.lists(st.integers(), max_size=2) | st.dictionaries(st.text(max_size=2), st.none(), max_size=1)
        arguments[key] = draw(wrong | (st.integers() if isinstance(arguments[key], str) else st.text(max_size=3)))
    elif how == "missing":
        required = {"read_file": "path", "glob": "pattern", "grep": "pattern", "write_file": "content"}
        arguments.pop(required.get(name, next(iter(arguments))), None)
        if name == "list_dir":
            arguments = {"path": None}
    else:
        arguments[draw(st.sampled_from(["paht", "cmd", "extra"]))] = draw(st.integers() | st.text(max_size=3))
    return name, json.dumps(arguments)


@st.composite
def not_an_object(draw: st.DrawFn) -> tuple[str, str]:
    """Text that is not JSON at all, or JSON that is not an object."""
    name = draw(tools)
    text = draw(
        st.text(min_size=1, max_size=40).filter(lambda t: t.strip() and not _is_json_object(t))
        | st.sampled_from(["[]", "null", "1", '"path"', "true", "{", '{"path": "a",}', "{'path': 'a'}"])
        | st.just(json.dumps(VALID[name])[:-1])
    )
    return name, text


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


bad_calls = st.one_of(deep(), bad_strings(), non_finite(), schema_breaking(), not_an_object())


def workspace(tmp: Path) -> Path:
    ws = tmp / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "notes.txt").write_text("a\nb\n")
    return ws


def assert_untouched(ws: Path) -> None:
    assert not (ws / "ran.txt").exists()
    assert not (ws / "out.txt").exists()
    assert (ws / "notes.txt").read_text() == "a\nb\n"


CONFIG = {"plugins": {"permissions": {"sandbox": "off"}}}


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(corpus=st.lists(bad_calls, min_size=150, max_size=170, unique_by=lambda call: call[1]))
def test_every_bad_argument_string_is_invalid_args(
    backend: str, tmp_path: Path, corpus: list[tuple[str, str]]
) -> None:
    """At least 150 distinct bad strings: each is INVALID_ARGS from ctx.tools.execute, and no tool body runs."""
    assert len({arguments for _, arguments in corpus}) >= 150
    ws = workspace(tmp_path)

    async def main() -> None:
        async with Harness(config=CONFIG, plugins=[WorkspacePlugin, PermissionsPlugin], autoload=False) as ctx:
            for index, (name, arguments) in enumerate(corpus):
                execution = ToolExecution(
                    call_id=f"c{index}", name=name, arguments=arguments, agent_id="a1", cwd=str(ws)
                )
                result = await ctx.tools.execute(execution)
                assert result.error_code == "INVALID_ARGS", (name, arguments[:200], result)
                assert result.content[0].text.startswith("Error: ")  # type: ignore[union-attr]

    anyio.run(main, backend=backend)
    assert_untouched(ws)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(calls=st.lists(bad_calls, min_size=5, max_size=25))
def test_a_turn_full_of_bad_arguments_goes_on(backend: str, tmp_path: Path, calls: list[tuple[str, str]]) -> None:
    """A scripted model sends a reply of bad calls; each is answered INVALID_ARGS and the turn completes."""
    ws = workspace(tmp_path)
    model = ScriptedModel(
        [Reply(*(ScriptedModel.call(name, arguments) for name, arguments in calls)), "all answered"]
    )

    async def main() -> None:
        async with Harness(config=CONFIG, plugins=[WorkspacePlugin, PermissionsPlugin], autoload=False) as ctx:
            ctx.llm.register_adapter("scripted", model)
            options = AgentOptions(model="scripted/test")
            async with await ctx.agents.create("a1", agent_options=options, meta={"cwd": str(ws)}) as handle:
                with anyio.fail_after(60):
                    outcome = await handle.agent.run("go")
                events = list(handle.agent.session.events)
        assert (outcome.kind, outcome.text) == ("completed", "all answered")
        codes = [event.data.get("error_code") for event in events if event.type == "tool/result"]
        assert codes == ["INVALID_ARGS"] * len(calls)

    anyio.run(main, backend=backend)
    assert_untouched(ws)
