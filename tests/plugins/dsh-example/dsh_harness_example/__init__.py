"""A plugin found through the ``dsh`` entry point: provides a ``greeter`` service, hears sessions."""

from __future__ import annotations

import attrs

from dsh_core import Context, hookimpl


@attrs.frozen
class ExampleConfig:
    greeting: str = "hello"
    times: int = 1


class Greeter:
    def __init__(self, greeting: str, times: int) -> None:
        self.greeting = greeting
        self.times = times

    def greet(self, name: str) -> str:
        return " ".join([f"{self.greeting}, {name}"] * self.times)


class ExamplePlugin:
    provides = ("greeter",)
    Config = ExampleConfig

    def __init__(self) -> None:
        self.seen: list[str] = []

    def start(self, ctx: Context) -> None:
        config: ExampleConfig = ctx.config
        ctx.provide("greeter", Greeter(config.greeting, config.times))

    @hookimpl
    def dsh_session_created(self, session: object) -> None:
        self.seen.append(str(getattr(session, "id", "?")))
