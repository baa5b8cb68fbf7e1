"""step_budget: end a turn after N steps, and let the model ask how many are left."""

from __future__ import annotations

from typing import Any

import anyio
import attrs

from dsh_core import AgentOptions, Context, ContinuationStop, Harness, ToolExecution, hookimpl, tool
from dsh_core.testing import ScriptedModel


@attrs.frozen
class StepBudgetConfig:
    max_steps: int = 4


class StepBudgetPlugin:
    name = "step-budget"                 # the entry-point name; config lives in [plugins.step-budget]
    provides = ("step_budget",)          # ctx.step_budget, for other plugins
    requires = ("tools", "system_prompt")
    Config = StepBudgetConfig

    def __init__(self) -> None:
        self.tokens: dict[str, int] = {}
        self.max_steps = 0

    def start(self, ctx: Context) -> None:
        self.max_steps = ctx.config.max_steps
        ctx.provide("step_budget", self)
        ctx.system_prompt.section("step-budget", f"You have at most {self.max_steps} steps per turn.")

        @tool
        def steps_left(execution: ToolExecution) -> str:
            """How many steps this turn may still take."""
            return str(self.max_steps - execution.step)

        ctx.tools.register(steps_left)

    @hookimpl
    def dsh_agent_turn_stop(self, step: int) -> ContinuationStop | None:
        """Serial, first result wins: a ContinuationStop ends the turn `stopped`."""
        return ContinuationStop(f"step budget of {self.max_steps} reached") if step >= self.max_steps else None

    @hookimpl
    def dsh_session_event(self, session: Any, event: Any) -> None:
        """Synchronous, after every append: keep it cheap."""
        usage = event.data.get("usage") if event.type == "assistant/message" else None
        if usage:
            self.tokens[session.id] = self.tokens.get(session.id, 0) + usage["output_tokens"]


async def main() -> None:
    from dsh_core.llm import Usage

    model = ScriptedModel(
        [ScriptedModel.tool_call("steps_left", usage=Usage(10, 3)) for _ in range(5)]
    )
    budget = StepBudgetPlugin()
    config = {"plugins": {"step-budget": {"max_steps": 2}}}
    async with Harness(config, plugins=[budget], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("demo", agent_options=AgentOptions(model="scripted/x")) as handle:
            outcome = await handle.agent.run("Work until the budget runs out.")
    print(outcome.reason)          # {'kind': 'stopped', 'reason': 'step budget of 2 reached'}
    print(budget.tokens)           # {'demo': 6}
    assert outcome.reason["kind"] == "stopped"
    assert budget.tokens == {"demo": 6}


if __name__ == "__main__":
    anyio.run(main)
