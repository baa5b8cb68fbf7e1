"""Helpers for the budget tests: a harness with the plugin and a priced scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from dsh_budget import BudgetPlugin

from dsh_core import AgentOptions, Context, Harness, tool
from dsh_core.llm import Prices, Usage
from dsh_core.testing import Reply, ScriptedModel

MODEL = AgentOptions(model="scripted/test")
#: 1 per million input tokens, 10 per million output tokens
PRICES = Prices(input=1.0, output=10.0)


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


@asynccontextmanager
async def budgeted(
    model: ScriptedModel, limits: dict[str, Any], plugins: Sequence[object] = ()
) -> AsyncIterator[Context]:
    """A harness with the budget plugin set to ``limits``, ``model`` as provider ``scripted``, and ``noop``."""
    config = {"plugins": {"budget": limits}}
    async with Harness(config=config, plugins=[BudgetPlugin(), *plugins], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        ctx.tools.register(noop)
        yield ctx


def call(tokens_in: int, tokens_out: int) -> Reply:
    """A step that calls ``noop`` and used these tokens."""
    return ScriptedModel.tool_call("noop", usage=Usage(tokens_in, tokens_out))


def answer(text: str, tokens_in: int, tokens_out: int) -> Reply:
    """A final answer that used these tokens."""
    return ScriptedModel.text(text, usage=Usage(tokens_in, tokens_out))


def usage_records(events: Sequence[Any]) -> list[dict[str, Any]]:
    """The ``budget/usage`` records of a log, as JSON."""
    return [dict(e.data) for e in events if e.type == "budget/usage"]


def step_count(events: Sequence[Any]) -> int:
    return sum(1 for e in events if e.type == "step/start")
