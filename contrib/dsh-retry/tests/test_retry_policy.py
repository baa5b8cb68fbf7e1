"""The retry policy: which failures are retried, after how long, how often, and the llm/retry record."""

from __future__ import annotations

import random
from typing import Any

import anyio
import dsh_retry
import importlib_metadata
import pytest
from dsh_retry import RetryConfig, RetryPlugin
from dsh_retry._plugin import backoff_delay

from dsh_core import AgentOptions, ConfigError, Harness, Retry
from dsh_core.llm import Failure, FailureCode
from dsh_core.testing import ScriptedModel

pytestmark = pytest.mark.anyio


class FakeAgent:
    """Just enough of an agent for the hook: an id and a session."""

    def __init__(self, session: object) -> None:
        self.session = session
        self.id = getattr(session, "id", "fake")


class Log:
    """A session stand-in that records appends."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def append(self, type: str, data: dict[str, Any]) -> None:
        self.events.append((type, data))


def plugin(seed: int = 0, **config: Any) -> RetryPlugin:
    """A RetryPlugin with seeded jitter and ``config`` in force, without a harness."""
    retry = RetryPlugin(rng=random.Random(seed))
    retry._config = RetryConfig(**config)
    return retry


def ask(
    retry: RetryPlugin,
    failure: Failure,
    attempt: int = 1,
    decision: Retry | None = None,
    log: Log | None = None,
) -> Retry | None:
    agent = FakeAgent(log if log is not None else Log())
    return retry.dsh_agent_request_error(agent, decision, failure, turn=3, step=2, attempt=attempt)


def test_front_is_exact() -> None:
    """The package exports the plugin and its config, and nothing else."""
    assert dsh_retry.__all__ == ["RetryConfig", "RetryPlugin"]
    assert set(dsh_retry.__all__) == {name for name in vars(dsh_retry) if not name.startswith("_")}


def test_entry_point() -> None:
    """The distribution registers the plugin as `retry` in the `dsh` group."""
    (entry,) = [ep for ep in importlib_metadata.entry_points(group="dsh") if ep.name == "retry"]
    assert entry.load() is RetryPlugin


def test_defaults() -> None:
    """Defaults per SPEC §8: 5 attempts, 0.5 s, 30 s, the transient codes."""
    assert RetryConfig() == RetryConfig(
        max_attempts=5,
        initial_delay=0.5,
        max_delay=30.0,
        codes=("RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT", "EMPTY_RESPONSE"),
    )


@pytest.mark.parametrize(
    ("attempt", "base"), [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (6, 16.0), (7, 30.0), (60, 30.0)]
)
def test_backoff_doubles_within_ten_percent_and_stops_at_the_cap(attempt: int, base: float) -> None:
    """initial·2^(attempt-1), capped at max_delay, ±10% jitter, never above max_delay."""
    config = RetryConfig()
    rng = random.Random(attempt)
    delays = [backoff_delay(config, attempt, rng) for _ in range(200)]
    assert all(base * 0.9 <= d <= min(base * 1.1, 30.0) for d in delays)
    assert len(set(delays)) > 1  # jittered, not constant


def test_backoff_is_repeatable_with_a_seed() -> None:
    """The same seed gives the same delays."""
    config = RetryConfig()
    first = [backoff_delay(config, n, random.Random(7)) for n in range(1, 5)]
    assert first == [backoff_delay(config, n, random.Random(7)) for n in range(1, 5)]


def test_huge_attempt_numbers_do_not_overflow() -> None:
    """A very late attempt still yields the cap, not an overflow."""
    assert backoff_delay(RetryConfig(), 10_000, random.Random(0)) <= 30.0


def test_a_retryable_failure_is_retried_with_backoff() -> None:
    """SERVER on attempt 2: Retry with a delay around 1 s."""
    decision = ask(plugin(), Failure("boom", "SERVER", 500), attempt=2)
    assert isinstance(decision, Retry)
    assert 0.9 <= decision.delay <= 1.1


def test_retry_after_is_used_when_within_the_cap() -> None:
    """The provider's retry_after wins over backoff when it is at most max_delay."""
    assert ask(plugin(), Failure("slow down", "RATE_LIMIT", 429, retry_after=12.5)) == Retry(12.5)
    assert ask(plugin(), Failure("slow down", "RATE_LIMIT", 429, retry_after=30.0)) == Retry(30.0)


def test_a_retry_after_beyond_the_cap_gives_up() -> None:
    """A provider asking for more than max_delay: no retry, and nothing logged."""
    log = Log()
    assert (
        ask(plugin(), Failure("come back tomorrow", "RATE_LIMIT", 429, retry_after=86_400), log=log) is None
    )
    assert log.events == []


@pytest.mark.parametrize("code", ["AUTH", "BAD_REQUEST", "CONTEXT_WINDOW_EXCEEDED", "ABORTED", "UNKNOWN"])
def test_other_codes_are_not_retried(code: FailureCode) -> None:
    """Only the configured codes are retried."""
    assert ask(plugin(), Failure("no", code)) is None


def test_configured_codes_replace_the_defaults() -> None:
    """codes = ["UNKNOWN"] retries UNKNOWN and no longer SERVER."""
    retry = plugin(codes=("UNKNOWN",))
    assert isinstance(ask(retry, Failure("?", "UNKNOWN")), Retry)
    assert ask(retry, Failure("boom", "SERVER")) is None


def test_max_attempts_counts_the_first_attempt() -> None:
    """With max_attempts=5, attempts 1-4 are retried and the 5th failure is final."""
    retry = plugin()
    assert [isinstance(ask(retry, Failure("x", "TIMEOUT"), attempt=n), Retry) for n in range(1, 7)] == [
        True,
        True,
        True,
        True,
        False,
        False,
    ]
    assert ask(plugin(max_attempts=1), Failure("x", "TIMEOUT"), attempt=1) is None


def test_an_earlier_decision_is_kept() -> None:
    """When an earlier listener already decided, the plugin leaves it and logs nothing."""
    log = Log()
    assert ask(plugin(), Failure("x", "SERVER"), decision=Retry(0), log=log) is None
    assert log.events == []


def test_each_retry_is_logged() -> None:
    """A retry appends llm/retry {turn, step, attempt, delay, failure} to the agent's session."""
    log = Log()
    failure = Failure("overloaded", "SERVER", 503, retry_after=2.0)
    assert ask(plugin(), failure, attempt=3, log=log) == Retry(2.0)
    assert log.events == [
        ("llm/retry", {"turn": 3, "step": 2, "attempt": 3, "delay": 2.0, "failure": failure.to_json()}),
    ]


async def test_config_comes_from_the_plugin_table() -> None:
    """[plugins.retry] fills the policy."""
    retry = RetryPlugin()
    config = {
        "plugins": {"retry": {"max_attempts": 2, "initial_delay": 1, "max_delay": 4.0, "codes": ["SERVER"]}}
    }
    async with Harness(config=config, plugins=[retry], autoload=False):
        assert retry.config == RetryConfig(
            max_attempts=2, initial_delay=1.0, max_delay=4.0, codes=("SERVER",)
        )


@pytest.mark.parametrize(
    "table", [{"max_attempts": 0}, {"initial_delay": -1}, {"codes": ["SERVER", "OOPS"]}, {"max_attempt": 3}]
)
async def test_bad_config_is_refused(table: dict[str, Any]) -> None:
    """Impossible values, unknown codes and unknown keys stop the start with a ConfigError."""
    with pytest.raises(ConfigError, match=r"plugins\.retry"):
        async with Harness(config={"plugins": {"retry": table}}, plugins=[RetryPlugin()], autoload=False):
            pass


def test_bad_values_are_refused_when_built_directly() -> None:
    """RetryConfig checks its values when constructed in code too."""
    with pytest.raises(ValueError, match="max_attempts"):
        RetryConfig(max_attempts=0)
    with pytest.raises(ValueError, match="OOPS"):
        RetryConfig(codes=("OOPS",))  # type: ignore[arg-type]


async def test_the_hook_runs_in_the_harness_and_logs_to_a_real_session() -> None:
    """Dispatched through agent/request-error, the plugin decides and appends to a real session."""
    retry = RetryPlugin(rng=random.Random(1))
    async with Harness(plugins=[retry], autoload=False) as ctx:
        session = await ctx.sessions.create("retrying")
        agent = FakeAgent(session)
        failure = Failure("gateway", "SERVER", 502)
        undecided: Retry | None = None
        decision = await ctx.events.waterfall(
            "agent/request-error",
            undecided,
            agent=agent,
            failure=failure,
            turn=1,
            step=1,
            attempt=1,
            signal=None,
        )
        assert isinstance(decision, Retry)
        (event,) = [e for e in session.events if e.type == "llm/retry"]
        assert event.data["attempt"] == 1
        assert event.data["delay"] == decision.delay
        assert event.data["failure"]["code"] == "SERVER"


async def test_an_agent_turn_survives_transient_failures() -> None:
    """An agent whose model fails twice (SERVER, then RATE_LIMIT) completes on the third attempt."""
    model = ScriptedModel(
        [
            ScriptedModel.failure("SERVER", "overloaded", status=503),
            ScriptedModel.failure("RATE_LIMIT", "slow down", status=429, retry_after=0),
            ScriptedModel.text("Finally."),
        ]
    )
    config = {"plugins": {"retry": {"initial_delay": 0}}}  # the loop skips a zero wait: no real sleeping
    async with Harness(config=config, plugins=[RetryPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("a", agent_options=AgentOptions(model="scripted/m")) as handle:
            outcome = await handle.agent.run("Hello?")
            retries = [e.data for e in handle.agent.session.events if e.type == "llm/retry"]
    assert outcome.reason == {"kind": "completed"}
    assert outcome.message.text == "Finally."
    assert [(r["attempt"], r["failure"]["code"], r["delay"]) for r in retries] == [
        (1, "SERVER", 0.0),
        (2, "RATE_LIMIT", 0.0),
    ]
    model.assert_consumed()


async def test_an_agent_turn_ends_in_error_when_attempts_run_out() -> None:
    """With max_attempts=2 a second failure ends the turn `error` after one retry."""
    model = ScriptedModel([ScriptedModel.failure("TIMEOUT"), ScriptedModel.failure("TIMEOUT")])
    config = {"plugins": {"retry": {"initial_delay": 0, "max_attempts": 2}}}
    async with Harness(config=config, plugins=[RetryPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("a", agent_options=AgentOptions(model="scripted/m")) as handle:
            outcome = await handle.agent.run("Hello?")
            retries = [e for e in handle.agent.session.events if e.type == "llm/retry"]
    assert outcome.reason["kind"] == "error"
    assert outcome.reason["failure"]["code"] == "TIMEOUT"
    assert len(retries) == 1


async def test_cancel_interrupts_the_wait_at_once() -> None:
    """A cancel during a long retry wait ends the turn `aborted` right away, not after the delay."""
    model = ScriptedModel([ScriptedModel.failure("RATE_LIMIT", "slow down", status=429, retry_after=25)])
    async with Harness(plugins=[RetryPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("a", agent_options=AgentOptions(model="scripted/m")) as handle:
            agent = handle.agent
            with anyio.fail_after(5):  # far below the 25 s the provider asked for
                agent.send("Hello?")
                await anyio.wait_all_tasks_blocked()  # the loop now sleeps in the retry wait
                assert [e.data["delay"] for e in agent.session.events if e.type == "llm/retry"] == [25.0]
                agent.cancel()
                await agent.when_idle()
            (end,) = [e.data for e in agent.session.events if e.type == "turn/end"]
    assert end["reason"]["kind"] == "aborted"
