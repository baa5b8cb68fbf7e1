"""The ``retry`` plugin: a retry policy for failed model requests, on ``agent/request-error``."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import attrs

from dsh_core import Retry, hookimpl
from dsh_core.llm import Failure
from dsh_core.session_log import LogEvent, log_event

from ._config import RetryConfig

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["RetryEvent", "RetryPlugin", "backoff_delay"]


def backoff_delay(config: RetryConfig, attempt: int, rng: random.Random) -> float:
    """The wait after failed attempt ``attempt`` (from 1): ``initial_delay·2^(attempt-1)``,
    capped at ``max_delay``, times a jitter of ±10%, and never more than ``max_delay``."""
    exponent = min(attempt - 1, 64)  # 2**64 · initial is past any cap; avoids overflow to inf
    base = min(config.initial_delay * 2.0**exponent, config.max_delay)
    return min(base * rng.uniform(0.9, 1.1), config.max_delay)


@log_event("llm/retry", in_turn=True)
@attrs.frozen(kw_only=True)
class RetryEvent(LogEvent):
    """A failed model request of ``turn``/``step`` is retried: ``attempt`` failed with ``failure``, and
    the next one starts after ``delay`` seconds."""

    turn: int
    step: int
    attempt: int
    delay: float
    failure: Failure


class RetryPlugin:
    """Retries a failed model request when its failure code is retryable and attempts remain.

    The delay is the provider's ``retry_after`` when it is at most ``max_delay`` (a longer one
    gives up: waiting that long is the user's call, not a policy's), else exponential backoff with
    jitter (``backoff_delay``). Each retry appends ``llm/retry {turn, step, attempt, delay,
    failure}`` to the agent's session; ``attempt`` is the attempt that failed. A decision an
    earlier listener already made is left alone. The agent loop does the waiting, and a cancel
    interrupts it at once.

    ``rng`` draws the jitter (pass ``random.Random(seed)`` for repeatable delays).
    """

    name = "retry"
    Config = RetryConfig

    def __init__(self, *, rng: random.Random | None = None) -> None:
        self._rng = rng if rng is not None else random.Random()
        self._config = RetryConfig()

    def start(self, ctx: Context) -> None:
        if isinstance(ctx.config, RetryConfig):
            self._config = ctx.config

    @property
    def config(self) -> RetryConfig:
        """The policy in force."""
        return self._config

    def delay_for(self, failure: Failure, attempt: int) -> float | None:
        """Seconds to wait before retrying after ``failure`` ended attempt ``attempt``; ``None``: give up."""
        config = self._config
        if failure.code not in config.codes or attempt >= config.max_attempts:
            return None
        if failure.retry_after is not None:
            return failure.retry_after if failure.retry_after <= config.max_delay else None
        return backoff_delay(config, attempt, self._rng)

    @hookimpl
    def dsh_agent_request_error(
        self, agent: Any, decision: Retry | None, failure: Failure, turn: int, step: int, attempt: int
    ) -> Retry | None:
        """Retry after a delay when the policy allows; keep an earlier listener's decision."""
        if decision is not None:
            return None
        delay = self.delay_for(failure, attempt)
        if delay is None:
            return None
        record = RetryEvent(turn=turn, step=step, attempt=attempt, delay=delay, failure=failure)
        agent.session.append(record.type, record.to_data())  # as (type, data): any session-like log takes it
        return Retry(delay=delay)
