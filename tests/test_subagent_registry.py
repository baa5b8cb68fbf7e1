"""Tests for dsh_core.services.subagents: the provider registry, its scoping, and the request/result values."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Generator
from typing import Any

import anyio
import attrs
import pytest

from dsh_core import Context, DuplicateRegistrationError, Harness, ScopeDisposedError
from dsh_core.llm import Failure
from dsh_core.services.subagents import (
    SubagentProvider,
    SubagentRefusedError,
    SubagentRegistryPlugin,
    SubagentRequest,
    SubagentResult,
    SubagentRun,
    SubagentsView,
    UnknownSubagentProviderError,
)
from dsh_core.vocabulary import Agent

pytestmark = pytest.mark.anyio


class Settled:
    """An awaitable that yields a value once it is set (awaitable any number of times)."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.value: SubagentResult | None = None

    async def _wait(self) -> SubagentResult:
        await self.done.wait()
        assert self.value is not None
        return self.value

    def __await__(self) -> Generator[Any, None, SubagentResult]:
        return self._wait().__await__()


class FakeRun:
    """A run whose result the test settles by hand."""

    def __init__(self, run_id: str) -> None:
        self.id = run_id
        self.agent: Agent | None = None
        self.cancelled = 0
        self.disposed = 0
        self._result = Settled()

    def finish(self, value: SubagentResult) -> None:
        self._result.value = value
        self._result.done.set()

    @property
    def result(self) -> Awaitable[SubagentResult]:
        return self._result

    def cancel(self) -> None:
        self.cancelled += 1

    async def dispose(self) -> None:
        self.disposed += 1


class FakeProvider:
    """Starts FakeRuns and remembers the requests; refuses a prompt of 'no'."""

    def __init__(self) -> None:
        self.requests: list[SubagentRequest] = []
        self.runs: list[FakeRun] = []

    async def start(self, request: SubagentRequest) -> FakeRun:
        if request.prompt == "no":
            msg = "not this one"
            raise SubagentRefusedError(msg)
        self.requests.append(request)
        run = FakeRun(f"run-{len(self.runs) + 1}")
        self.runs.append(run)
        return run


@pytest.fixture
async def ctx() -> AsyncIterator[Context]:
    async with Harness(plugins=[SubagentRegistryPlugin()], autoload=False) as root:
        yield root


def request(prompt: str = "do it") -> SubagentRequest:
    return SubagentRequest(description="a task", prompt=prompt)


class TestRegistry:
    async def test_the_plugin_provides_ctx_subagents(self, ctx: Context) -> None:
        """The registry plugin is named subagent-registry and provides the `subagents` service."""
        assert SubagentRegistryPlugin.name == "subagent-registry"
        assert SubagentRegistryPlugin.provides == ("subagents",)
        assert isinstance(ctx.subagents, SubagentsView)
        assert ctx.subagents.list() == ()

    async def test_register_get_list_and_dispose(self, ctx: Context) -> None:
        """A registered provider is listed and found by name; its disposer withdraws it (idempotent)."""
        first, second = FakeProvider(), FakeProvider()
        undo = ctx.subagents.register_provider("one", first)
        ctx.subagents.register_provider("two", second)
        assert ctx.subagents.list() == ("one", "two")
        assert ctx.subagents.get("one") is first
        assert ctx.subagents.get("three") is None
        assert isinstance(first, SubagentProvider)
        undo()
        undo()
        assert ctx.subagents.list() == ("two",)

    async def test_a_duplicate_name_is_refused_naming_the_first_owner(self, ctx: Context) -> None:
        """Registering a taken name raises DuplicateRegistrationError and keeps the first provider."""
        first = FakeProvider()
        owner = ctx.child("plugin:first")
        owner.subagents.register_provider("one", first)
        with pytest.raises(
            DuplicateRegistrationError, match=r"'one' is already registered by 'plugin:first'"
        ):
            ctx.subagents.register_provider("one", FakeProvider())
        assert ctx.subagents.get("one") is first

    async def test_a_registration_ends_with_its_context(self, ctx: Context) -> None:
        """Disposing the context a provider was registered through withdraws it."""
        scope = ctx.child("plugin:temp")
        scope.subagents.register_provider("temp", FakeProvider())
        assert ctx.subagents.list() == ("temp",)
        await scope.dispose()
        assert ctx.subagents.list() == ()
        with pytest.raises(ScopeDisposedError):
            scope.subagents.register_provider("again", FakeProvider())
        assert ctx.subagents.list() == ()

    async def test_bad_registrations_are_typed_errors(self, ctx: Context) -> None:
        """A name that is not a str is a TypeError, an empty one a ValueError, a provider without start a TypeError."""
        with pytest.raises(TypeError, match="name must be a str"):
            ctx.subagents.register_provider(1, FakeProvider())
        with pytest.raises(ValueError, match="must not be empty"):
            ctx.subagents.register_provider(" ", FakeProvider())
        with pytest.raises(TypeError, match=r"async start\(request\)"):
            ctx.subagents.register_provider("x", object())
        assert ctx.subagents.list() == ()


class TestStart:
    async def test_start_delegates_and_the_result_is_awaitable(self, ctx: Context) -> None:
        """start() hands the request to the named provider and returns its run."""
        provider = FakeProvider()
        ctx.subagents.register_provider("fake", provider)
        run = await ctx.subagents.start("fake", request())
        assert isinstance(run, SubagentRun)
        assert provider.requests == [request()]
        assert run.id == "run-1"
        assert run.agent is None
        provider.runs[0].finish(SubagentResult("42", "completed"))
        with anyio.fail_after(5):
            result = await run.result
            again = await run.result
        assert result == SubagentResult("42", "completed")
        assert again is result
        run.cancel()
        assert provider.runs[0].cancelled == 1

    async def test_unknown_provider_names_the_registered_ones(self, ctx: Context) -> None:
        """An unknown name raises UnknownSubagentProviderError (a LookupError) listing what exists."""
        ctx.subagents.register_provider("fake", FakeProvider())
        with pytest.raises(
            LookupError, match=r"no sub-agent provider named 'nope'.*registered: fake"
        ) as info:
            await ctx.subagents.start("nope", request())
        assert isinstance(info.value, UnknownSubagentProviderError)
        assert info.value.name == "nope"

    async def test_start_takes_a_request(self, ctx: Context) -> None:
        """Anything but a SubagentRequest is a TypeError."""
        ctx.subagents.register_provider("fake", FakeProvider())
        with pytest.raises(TypeError, match="takes a SubagentRequest, got dict"):
            await ctx.subagents.start("fake", {"prompt": "x"})

    async def test_a_refusal_propagates(self, ctx: Context) -> None:
        """A provider's SubagentRefusedError (a ValueError) reaches the caller."""
        ctx.subagents.register_provider("fake", FakeProvider())
        with pytest.raises(ValueError, match="not this one"):
            await ctx.subagents.start("fake", request("no"))

    async def test_runs_are_disposed_with_the_starting_context(self, ctx: Context) -> None:
        """Disposing the context that started a run disposes the run; one disposed first is not disposed again."""
        provider = FakeProvider()
        ctx.subagents.register_provider("fake", provider)
        scope = ctx.child("caller")
        kept = await scope.subagents.start("fake", request())
        released = await scope.subagents.start("fake", request())
        await released.dispose()
        await scope.dispose()
        assert [run.disposed for run in provider.runs] == [1, 1]
        assert kept.id == "run-1"

    async def test_a_disposed_context_cannot_start(self, ctx: Context) -> None:
        """start() through a disposed context raises before the provider is asked."""
        provider = FakeProvider()
        ctx.subagents.register_provider("fake", provider)
        scope = ctx.child("caller")
        view = scope.subagents
        await scope.dispose()
        with pytest.raises(ScopeDisposedError, match="cannot start a sub-agent"):
            await view.start("fake", request())
        assert provider.requests == []


class TestValues:
    def test_request_fields_and_defaults(self) -> None:
        """A request holds the task, an optional tool subset (a tuple, deduplicated) and depth 1 by default."""
        made = SubagentRequest(description="d", prompt="p", tools=["a", "b", "a"], parent_id="p1")
        assert made.tools == ("a", "b")
        assert made.depth == 1
        assert made.parent_ctx is None
        assert attrs.evolve(made, depth=3).depth == 3
        assert SubagentRequest(description="d", prompt="p").tools is None

    @pytest.mark.parametrize(
        ("fields", "error", "match"),
        [
            ({"prompt": ""}, ValueError, "prompt must not be empty"),
            ({"description": "  "}, ValueError, "description must not be empty"),
            ({"prompt": 3}, TypeError, "prompt must be a str"),
            ({"tools": "abc"}, TypeError, "sequence of tool names"),
            ({"tools": ["a", 1]}, TypeError, "tool names"),
            ({"depth": 0}, ValueError, "must be >= 1"),
            ({"depth": 1.0}, TypeError, "depth must be an int"),
            ({"parent_id": 5}, TypeError, "parent_id must be a str or None"),
        ],
    )
    def test_request_rejects_bad_values(
        self, fields: dict[str, object], error: type[Exception], match: str
    ) -> None:
        """Bad request fields are typed errors naming the field."""
        base: dict[str, object] = {"description": "d", "prompt": "p"}
        with pytest.raises(error, match=match):
            SubagentRequest(**{**base, **fields})  # type: ignore[arg-type]

    def test_result_ok_and_failure(self) -> None:
        """ok is true for completed, stopped and max-tokens; a failed result carries its Failure."""
        assert SubagentResult("x", "completed").ok
        assert SubagentResult("x", "max-tokens").ok
        assert not SubagentResult("", "aborted").ok
        failed = SubagentResult("", "error", Failure("boom", "SERVER"))
        assert not failed.ok
        assert failed.failure is not None
        assert failed.failure.message == "boom"
        with pytest.raises(ValueError, match="stop_reason must not be empty"):
            SubagentResult("", "")
        with pytest.raises(TypeError, match="failure"):
            SubagentResult("", "error", "boom")  # type: ignore[arg-type]
