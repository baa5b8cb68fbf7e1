"""The ``budget`` plugin: every limit of ``[plugins.budget]``, checked before a turn, before each request and after each step.

Where each limit acts:

- ``agent/turn-gate`` (before the first step): a session limit already reached, or a cost limit
  with no prices known for the agent's model, ends the turn ``stopped`` with no model call;
- ``agent/request`` (each step, last listener): ``max_tokens`` is lowered to what the tightest token
  limit leaves (and what the cost limits leave at the model's output price), so one step cannot
  overshoot a limit by more than its prompt;
- ``agent/step-result`` and a tool guard: a tool call beyond ``max_tool_calls_per_turn`` in a turn
  is denied (the guard is armed for an agent only once one of its steps asks for too many);
- ``agent/turn-stop`` (after every step): any limit reached ends the turn ``stopped``, with a
  reason naming the key, the figure and the configured value;
- ``agent/turn-end``: ``budget/usage {turn, tokens, cost}`` is logged in the turn.

Sub-agents: a session whose ``meta.parent_id`` names a live agent and whose ``meta.extra.depth`` is
at least 1 (what the ``subagents`` plugin writes) is a sub-agent; a fork, which names a parent
too, spends on its own account. After each of its
steps it appends ``budget/subagent-usage`` to every live ancestor's log, so its usage counts
against their session limits (and turn limits), durably; and its own checks include its
ancestors' session limits, so a ``task`` tool cannot be used to escape a budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import attrs

from dsh_core import ContinuationStop, hookimpl
from dsh_core.llm import LlmCallConfig, ModelInfo, Prices

from ._config import BudgetConfig
from ._events import BudgetUsageEvent, SubagentUsageEvent
from ._tally import Tally

if TYPE_CHECKING:
    from dsh_core import AssistantMessage, Context, ToolExecution
    from dsh_core.vocabulary import Agent

__all__ = ["BudgetError", "BudgetPlugin"]


class BudgetError(ValueError):
    """A step was routed to a model whose prices are unknown while a cost limit is set."""


class _Account:
    """One live agent's tally, and how much of its own usage it has reported to its ancestors."""

    __slots__ = (
        "agent",
        "config",
        "events",
        "info",
        "is_subagent",
        "reported_cost",
        "reported_tokens",
        "reported_unpriced",
        "slack",
        "spent_mark",
        "tally",
    )

    def __init__(self, agent: Agent, tally: Tally) -> None:
        self.agent = agent
        self.tally = tally
        self.events = agent.session.events  # a live view of the log
        #: the last call config seen on agent/request and its model's info (the loop reuses one config)
        self.config: LlmCallConfig | None = None
        self.info: ModelInfo | None = None
        #: agent/request found this many tokens of room beyond the model's output limit when the
        #: session had used ``spent_mark``: until that much more is used, there is nothing to lower
        self.slack = 0.0
        self.spent_mark = 0
        #: whether its session is a sub-agent's (one that names a parent and records a depth; a fork
        #: also names a parent, but spends on its own account): a top-level agent checks only itself
        self.is_subagent = _is_subagent(agent.session)
        # Everything already in the log was reported by the instance that spent it.
        self.reported_tokens = tally.own_tokens
        self.reported_cost = tally.own_cost
        self.reported_unpriced = tally.own_unpriced


def _is_subagent(session: Any) -> bool:
    """A session a sub-agent provider made: it names its parent and records its depth (``extra.depth``)."""
    meta = session.meta
    depth = meta.extra.get("depth", 0)
    return meta.parent_id is not None and type(depth) is int and depth > 0


def _dearest(prices: Prices) -> float:
    cached = prices.cached_input if prices.cached_input is not None else 0.0
    return max(prices.input, prices.output, cached)


def _money(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


class BudgetPlugin:
    """Stops a turn before it spends more than ``[plugins.budget]`` allows (SPEC §10.3)."""

    name = "budget"
    Config = BudgetConfig

    def __init__(self) -> None:
        self._config = BudgetConfig()
        self._ctx: Context | None = None
        #: by agent object (a resumed session is a new agent, with a new account read from its log)
        self._accounts: dict[Agent, _Account] = {}
        self._infos: dict[tuple[str, str], ModelInfo | None] = {}
        #: the agents whose tool-call guard is armed, and the calls of their current step it denies
        self._denied: dict[Agent, tuple[frozenset[str], int, int]] = {}
        #: (turn, tool calls the model asked for in it) by agent
        self._calls: dict[Agent, tuple[int, int]] = {}
        self._limits = _Limits(self._config)

    def start(self, ctx: Context) -> None:
        if isinstance(ctx.config, BudgetConfig):
            self._config = ctx.config
        self._ctx = ctx
        config = self._config
        self._limits = _Limits(config)
        # Each check is registered only when a limit needs it: a step pays for what is configured.
        sessions = config.max_session_tokens is not None or config.max_session_cost is not None
        if sessions or config.wants_cost:
            ctx.register_plugin(_Gate(self), name="budget/turn-gate")
        if sessions or config.wants_cost or config.max_turn_tokens is not None:
            ctx.register_plugin(_Request(self), name="budget/request")
        if attrs.astuple(config) != attrs.astuple(BudgetConfig()):
            ctx.register_plugin(_Stop(self), name="budget/turn-stop")
        if config.max_tool_calls_per_turn is not None:
            ctx.register_plugin(_StepResult(self), name="budget/step-result")

    @property
    def config(self) -> BudgetConfig:
        """The limits in force."""
        return self._config

    # ------------------------------------------------------------------ reading

    def _info(self, provider: str, model: str) -> ModelInfo | None:
        key = (provider, model)
        try:
            return self._infos[key]
        except KeyError:
            pass
        info: ModelInfo | None = None
        if self._ctx is not None:
            try:
                info = self._ctx.llm.model_info(f"{provider}/{model}")
            except (LookupError, TypeError, ValueError):
                info = None
        self._infos[key] = info
        return info

    def prices_of(self, provider: str, model: str) -> Prices | None:
        """The prices of ``provider/model`` from its adapter's ``ModelInfo``, or ``None``."""
        info = self._info(provider, model)
        return None if info is None else info.prices

    def tally(self, agent: Agent) -> Tally:
        """``agent``'s session totals, up to date with its log."""
        return self._account(agent).tally

    def _account(self, agent: Agent) -> _Account:
        account = self._accounts.get(agent)
        if account is None:
            session = agent.session
            tally = Tally(self.prices_of, start=session.meta.seed_length)
            tally.read(session.events)
            account = self._accounts[agent] = _Account(agent, tally)
        else:
            account.tally.read(account.events)
        return account

    def _ancestors(self, agent: Agent) -> Iterator[Agent]:
        """The live agents above ``agent``: its parent session's, that one's parent's, and so on."""
        if self._ctx is None:
            return
        seen = {agent.id}
        session = agent.session
        while _is_subagent(session) and session.meta.parent_id not in seen:
            parent_id = session.meta.parent_id
            parent = self._ctx.agents.get(parent_id) if parent_id is not None else None
            if parent is None:
                return
            yield parent
            seen.add(parent.id)
            session = parent.session

    # ------------------------------------------------------------------ the limits

    def _session_verdict(self, agent: Agent, account: _Account) -> str | None:
        """Why no more may be spent on this session's account (or an ancestor's), or ``None``."""
        limits = self._limits
        tally = account.tally
        if tally.tokens >= limits.session_tokens or tally.cost >= limits.session_cost:
            return self._session_reason(agent, agent, tally)
        if account.is_subagent:
            for owner, totals in self._sessions(agent, tally)[1:]:
                if totals.tokens >= limits.session_tokens or totals.cost >= limits.session_cost:
                    return self._session_reason(agent, owner, totals)
        return None

    def _session_reason(self, agent: Agent, owner: Agent, totals: Tally) -> str:
        config = self._config
        whose = "this session" if owner is agent else f"session {owner.id!r} (this sub-agent's parent or above)"
        if config.max_session_tokens is not None and totals.tokens >= config.max_session_tokens:
            limit = config.max_session_tokens
            return f"max_session_tokens reached: {totals.tokens} tokens used by {whose}, the limit is {limit}"
        cost_limit = self._limits.session_cost
        return f"max_session_cost reached: {_money(totals.cost)} spent by {whose}, the limit is {_money(cost_limit)}"

    def _sessions(self, agent: Agent, tally: Tally) -> list[tuple[Agent, Tally]]:
        """``agent``'s totals and each live ancestor's, up to date."""
        found = [(agent, tally)]
        found.extend((ancestor, self._account(ancestor).tally) for ancestor in self._ancestors(agent))
        return found

    def _turn_verdict(self, tally: Tally) -> str | None:
        limits = self._limits
        if tally.turn_tokens >= limits.turn_tokens:
            return (
                f"max_turn_tokens reached: {tally.turn_tokens} tokens used in this turn, "
                f"the limit is {self._config.max_turn_tokens}"
            )
        if tally.turn_cost >= limits.turn_cost:
            return (
                f"max_turn_cost reached: {_money(tally.turn_cost)} spent in this turn, "
                f"the limit is {_money(limits.turn_cost)}"
            )
        if tally.turn_steps >= limits.steps:
            return (
                f"max_steps_per_turn reached: {tally.turn_steps} steps in this turn, "
                f"the limit is {self._config.max_steps_per_turn}"
            )
        if tally.turn_tool_calls >= limits.tool_calls:
            return (
                f"max_tool_calls_per_turn reached: {tally.turn_tool_calls} tool calls in this turn, "
                f"the limit is {self._config.max_tool_calls_per_turn}"
            )
        return None

    def _unpriced_verdict(self, agent: Agent, provider: str, model: str) -> str | None:
        """A cost limit with no prices to apply it: the turn is refused, saying so."""
        config = self._config
        key = "max_turn_cost" if config.max_turn_cost is not None else "max_session_cost"
        if self.prices_of(provider, model) is None:
            return (
                f"{key} is set but no prices are known for the model {provider}/{model}, so its cost cannot "
                f"be limited; give it input_price and output_price (for an OpenAI-compatible provider: "
                f"[plugins.openai.providers.{provider}.models.{model}]) or remove the cost limit"
            )
        account = self._account(agent)
        if config.max_session_cost is not None and (account.tally.unpriced or account.is_subagent):
            for owner, totals in self._sessions(agent, account.tally):
                if totals.unpriced:
                    return (
                        f"max_session_cost is set but the cost of session {owner.id!r} is unknown: some of its "
                        "usage was by a model with no prices"
                    )
        return None

    # ------------------------------------------------------------------ the hooks

    @hookimpl
    def dsh_agent_turn_end(self, agent: Agent, turn: int) -> None:
        """Log ``budget/usage`` for the turn, and report what is left to report upwards."""
        account = self._account(agent)
        if account.is_subagent:
            self._report(account)
        tally = account.tally
        agent.session.append(BudgetUsageEvent(turn=turn, tokens=tally.turn_tokens, cost=tally.turn_cost_or_none))

    @hookimpl
    def dsh_agent_disposed(self, agent: Agent) -> None:
        self._accounts.pop(agent, None)
        self._denied.pop(agent, None)
        self._calls.pop(agent, None)

    def turn_gate(self, agent: Agent) -> ContinuationStop | None:
        """Refuse a turn whose session budget is spent, or whose cost cannot be known."""
        account = self._account(agent)
        reason = self._session_verdict(agent, account)
        if reason is None and self._limits.wants_cost:
            provider, _, model = (agent.options.model or "").partition("/")
            if model and (self.prices_of(provider, model) is None or account.tally.unpriced or account.is_subagent):
                reason = self._unpriced_verdict(agent, provider, model)
        return None if reason is None else ContinuationStop(f"budget: {reason}")

    def request(self, agent: Agent, config: LlmCallConfig) -> LlmCallConfig | None:
        """Lower ``max_tokens`` to what the tightest limit leaves; refuse an unpriced model under a cost limit."""
        limits = self._limits
        account = self._accounts.get(agent)
        if account is not None and config is account.config:
            # Usage only grows with a reply or a sub-agent's record, and turn-stop (after every step,
            # the step's tools and their sub-agents included) has read those: no read is needed to
            # see that the room left is still more than the model can use.
            if account.tally.tokens - account.spent_mark < account.slack:
                return None
        account = self._account(agent)
        tally = account.tally
        if config is account.config:
            info = account.info
        else:
            info = account.info = self._info(config.provider, config.model)
            account.config = config
            account.slack = 0.0
        output_price = 0.0
        prices = None
        if limits.wants_cost:
            prices = None if info is None else info.prices
            if prices is None:
                reason = self._unpriced_verdict(agent, config.provider, config.model)
                raise BudgetError(f"budget: {reason}")
            output_price = prices.output
        left = limits.turn_tokens - tally.turn_tokens
        if output_price > 0:
            left = min(left, (limits.turn_cost - tally.turn_cost) * 1_000_000 / output_price)
        sessions = self._sessions(agent, tally) if account.is_subagent else ((agent, tally),)
        for _, totals in sessions:
            left = min(left, limits.session_tokens - totals.tokens)
            if output_price > 0:
                left = min(left, (limits.session_cost - totals.cost) * 1_000_000 / output_price)
        if left == math.inf:
            return None
        ceiling = max(1, math.floor(left))
        if info is not None and ceiling >= info.max_output_tokens:
            if config.max_tokens is None:
                # The model cannot write more than the limits leave: nothing to lower, and nothing
                # until that much more is spent (a token costs at most its dearest price).
                if not account.is_subagent:  # an ancestor's spending is not in this tally
                    dearest = 1.0 if prices is None or not output_price else _dearest(prices) / output_price
                    account.slack = (left - info.max_output_tokens) / max(1.0, dearest)
                    account.spent_mark = tally.tokens
                return None
            ceiling = info.max_output_tokens
        if config.max_tokens is not None and config.max_tokens <= ceiling:
            return None
        return attrs.evolve(config, max_tokens=ceiling)

    def turn_stop(self, agent: Agent) -> ContinuationStop | None:
        """After every step: report a sub-agent's usage upwards, then stop at the first limit reached."""
        account = self._account(agent)
        tally = account.tally
        if account.is_subagent:
            self._report(account)
        limits = self._limits
        if (  # one comparison per limit (an absent one is inf): the reasons are worded only when one is reached
            tally.turn_tokens < limits.turn_tokens
            and tally.turn_cost < limits.turn_cost
            and tally.turn_steps < limits.steps
            and tally.turn_tool_calls < limits.tool_calls
            and tally.tokens < limits.session_tokens
            and tally.cost < limits.session_cost
            and not account.is_subagent
        ):
            return None
        reason = self._turn_verdict(tally) or self._session_verdict(agent, account)
        return None if reason is None else ContinuationStop(f"budget: {reason}")

    def _report(self, account: _Account) -> None:
        """Append a sub-agent's own usage since its last report to every live ancestor's log."""
        tally = account.tally
        tokens = tally.own_tokens - account.reported_tokens
        if tokens == 0:
            return
        unpriced = tally.own_unpriced > account.reported_unpriced
        cost = None if unpriced else tally.own_cost - account.reported_cost
        account.reported_tokens = tally.own_tokens
        account.reported_cost = tally.own_cost
        account.reported_unpriced = tally.own_unpriced
        agent = account.agent
        for ancestor in self._ancestors(agent):
            session = ancestor.session
            turn = session.open_turn or session.last_turn
            session.append(SubagentUsageEvent(turn=turn, session_id=agent.id, tokens=tokens, cost=cost))

    def step_result(self, agent: Agent, message: AssistantMessage, turn: int) -> None:
        """Before a step's tools run: the calls beyond ``max_tool_calls_per_turn`` are to be denied.

        The calls are counted here, as the model asks for them (a step cut off at its token limit,
        whose calls never run, still counts: the count errs on the side of denying). The guard that
        denies them is armed for the agent the first time a step asks for more than the turn has
        left (and stays armed): a guard takes every call through the tool pipeline's gated path,
        which ordinary steps need not pay for.
        """
        calls = message.tool_calls
        if not calls:
            return
        counted = self._calls.get(agent)
        made = counted[1] if counted is not None and counted[0] == turn else 0
        self._calls[agent] = (turn, made + len(calls))
        allowed = max(0, int(self._limits.tool_calls) - made)
        armed = agent in self._denied
        if len(calls) <= allowed and not armed:
            return
        self._denied[agent] = (frozenset(call.id for call in calls[allowed:]), made, allowed)
        if not armed:
            agent.ctx.tools.guard(self._guard_for(agent))

    def _guard_for(self, agent: Agent) -> Callable[[ToolExecution], str | None]:
        def guard(execution: ToolExecution) -> str | None:
            """Deny this agent's calls that the current step asked for beyond the limit."""
            denied, made, allowed = self._denied.get(agent, (frozenset(), 0, 0))
            if execution.call_id not in denied:
                return None
            return (
                f"budget: max_tool_calls_per_turn reached: {made} tool calls were made in this turn and this "
                f"step may make {allowed} more; the limit is {self._config.max_tool_calls_per_turn}"
            )

        return guard


class _Limits:
    """The limits as plain numbers, ``inf`` for an absent one: each check is one comparison."""

    __slots__ = ("session_cost", "session_tokens", "steps", "tool_calls", "turn_cost", "turn_tokens", "wants_cost")

    def __init__(self, config: BudgetConfig) -> None:
        def number(value: float | None) -> float:
            return math.inf if value is None else value

        self.turn_tokens = number(config.max_turn_tokens)
        self.session_tokens = number(config.max_session_tokens)
        self.turn_cost = number(config.max_turn_cost)
        self.session_cost = number(config.max_session_cost)
        self.steps = number(config.max_steps_per_turn)
        self.tool_calls = number(config.max_tool_calls_per_turn)
        self.wants_cost = config.wants_cost


class _StepResult:
    """``agent/step-result`` of a budget with ``max_tool_calls_per_turn``: it sees each step's calls first."""

    def __init__(self, budget: BudgetPlugin) -> None:
        self._budget = budget

    @hookimpl
    def dsh_agent_step_result(self, agent: Agent, message: AssistantMessage, turn: int) -> None:
        self._budget.step_result(agent, message, turn)


class _Gate:
    """``agent/turn-gate`` of a budget with session or cost limits."""

    def __init__(self, budget: BudgetPlugin) -> None:
        self._budget = budget

    @hookimpl
    def dsh_agent_turn_gate(self, agent: Agent) -> ContinuationStop | None:
        return self._budget.turn_gate(agent)


class _Request:
    """``agent/request`` (the last listener, so it sees the final model) of a budget with token or cost limits."""

    def __init__(self, budget: BudgetPlugin) -> None:
        self._budget = budget

    @hookimpl(trylast=True)
    def dsh_agent_request(self, agent: Agent, config: LlmCallConfig) -> LlmCallConfig | None:
        return self._budget.request(agent, config)


class _Stop:
    """``agent/turn-stop`` of a budget with any limit."""

    def __init__(self, budget: BudgetPlugin) -> None:
        self._budget = budget

    @hookimpl
    def dsh_agent_turn_stop(self, agent: Agent) -> ContinuationStop | None:
        return self._budget.turn_stop(agent)
