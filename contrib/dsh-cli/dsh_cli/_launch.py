"""Starting what a command needs: the harness from the layered configuration, the model check, the agent.

Every failure here happens before a session is created or touched, and becomes a ``CliError``
(exit status ``SETUP``) with one line that names the problem and the way out.
"""

from __future__ import annotations

import inspect
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

from dsh_core import AgentHandle, AgentOptions, ConfigError, Context, DshError, Harness, PluginError
from dsh_core.session_log import TurnStartEvent

from ._config import EffectiveConfig
from ._errors import CliError

__all__ = [
    "DEMO_HINT",
    "api_key_env",
    "check_model",
    "latest_session_id",
    "maybe_await",
    "new_session_id",
    "open_agent",
    "open_harness",
    "persistence_of",
    "resolve_cwd",
    "resolve_session_id",
    "session_ids",
]

#: The way out for someone without an API key.
DEMO_HINT: Final = "run `dsh demo` for an offline tour that needs no key"

#: The variables of the providers built into dsh-openai, for adapters that do not say theirs.
_BUILTIN_KEYS: Final[Mapping[str, str]] = {"deepseek": "DEEPSEEK_API_KEY", "openai": "OPENAI_API_KEY"}

_UNSET: Final = object()


async def maybe_await(value: Any) -> Any:
    """``await value`` when it is awaitable (a service method may be sync or async)."""
    return await value if inspect.isawaitable(value) else value


def new_session_id() -> str:
    """A fresh session id that sorts by creation time: ``20260130-154501-3fa2c1``."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def resolve_cwd(raw: str | None) -> Path:
    """The workspace directory: ``--cwd`` made absolute, or the current directory."""
    path = Path(raw).expanduser() if raw else Path.cwd()
    path = path.resolve()
    if not path.is_dir():
        msg = f"--cwd {raw}: no such directory"
        raise CliError(msg)
    return path


@asynccontextmanager
async def open_harness(config: EffectiveConfig, plugins: Sequence[object] = ()) -> AsyncIterator[Context]:
    """Start every installed plugin with ``config``; stop them all on exit.

    :raises CliError: for a configuration a plugin refuses (naming the file or flag that set the
        value) or a plugin that cannot start.
    """
    harness = Harness(config=dict(config.data), plugins=plugins, autoload=True, source="dsh configuration")
    try:
        ctx = await harness.start()
    except ConfigError as exc:
        from ._install_hints import missing_table_hint

        raise CliError(config.explain(exc), hint=missing_table_hint(exc.path)) from exc
    except PluginError as exc:
        raise CliError(str(exc)) from exc
    try:
        yield ctx
    finally:
        await harness.stop()


def api_key_env(adapter: object, provider: str, config: EffectiveConfig) -> str | None:
    declared = getattr(adapter, "api_key_env", _UNSET)
    if declared is not _UNSET:
        return str(declared) if declared else None
    configured = config.get(f"plugins.openai.providers.{provider}.api_key_env")
    if isinstance(configured, str):
        return configured or None
    if type(adapter).__module__.startswith("dsh_harness_openai"):
        return _BUILTIN_KEYS.get(provider)
    return None


def check_model(
    ctx: Context,
    model: str,
    config: EffectiveConfig,
    environ: Mapping[str, str] | None = None,
    *,
    given_by: str | None = None,
) -> None:
    """Fail early, with one clear line, when ``model`` cannot be called: unknown provider or model, no API key.

    ``given_by`` names where the model string came from when not the configuration (``/model``).
    """
    environ = os.environ if environ is None else environ
    try:
        provider, _, adapter = ctx.llm.resolve(model)
        ctx.llm.model_info(model)
    except (TypeError, ValueError, LookupError) as exc:
        where = given_by or config.origin("plugins.cli.model") or "configuration"
        msg = f"unknown model {model!r} (from {where}): {exc}"
        raise CliError(msg) from exc
    env = api_key_env(adapter, provider, config)
    if env is not None and not environ.get(env, "").strip():
        msg = (
            f"no API key for {provider!r}: the environment variable {env} is not set; set it, or {DEMO_HINT}"
        )
        raise CliError(msg)


def persistence_of(ctx: Context, doing: str) -> Any:
    """The ``session_persistence`` service, or a ``CliError`` saying that ``doing`` needs one."""
    persistence = ctx.get_service("session_persistence")
    if persistence is None:
        msg = (
            f"cannot {doing}: no session persistence plugin is loaded "
            "(pip install dsh-harness-persistence-jsonl, or remove it from plugins.disable)"
        )
        raise CliError(msg)
    return persistence


async def session_ids(persistence: Any) -> list[str]:
    """The ids of the stored sessions (``list()`` may give ids or records with an ``id``)."""
    listed = await maybe_await(persistence.list())
    ids = []
    for item in listed:
        ident = (
            item if isinstance(item, str) else getattr(item, "id", None) or getattr(item, "session_id", None)
        )
        if isinstance(ident, str):
            ids.append(ident)
    return ids


async def resolve_session_id(ctx: Context, wanted: str) -> str:
    """The stored session ``wanted`` names: its exact id, or the one id it is a prefix of."""
    persistence = persistence_of(ctx, f"resume session {wanted!r}")
    if await maybe_await(persistence.exists(wanted)):
        return wanted
    matches = [ident for ident in await session_ids(persistence) if ident.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(sorted(matches)[:5])
        msg = f"session {wanted!r} is ambiguous: it starts {len(matches)} stored sessions ({shown})"
        raise CliError(msg)
    msg = f"no stored session {wanted!r}; `dsh sessions list` shows the stored sessions"
    raise CliError(msg)


async def latest_session_id(ctx: Context, cwd: Path) -> str:
    """The most recently updated stored session started in ``cwd`` (``-c/--continue``).

    Sessions without a turn, and child sessions (forks, sub-agents: they name a parent), are not
    candidates.

    :raises CliError: when this workspace has no stored session.
    """
    persistence = persistence_of(ctx, "continue the latest session")
    best: tuple[float, str] | None = None
    for item in await maybe_await(persistence.list()):
        if isinstance(item, str):  # a store that lists ids only: load each to read its cwd
            loaded = await persistence.read(item) if hasattr(persistence, "read") else await persistence.load(item)
            where, parent = loaded.meta.cwd, loaded.meta.parent_id
            events = tuple(loaded.events)
            turns = any(event.type == TurnStartEvent.type for event in events)
            updated = events[-1].time if events else 0.0
            ident = item
        else:
            where, parent = getattr(item, "cwd", None), getattr(item, "parent_id", None)
            turns = int(getattr(item, "turns", 0) or 0) > 0
            updated = float(getattr(item, "modified", None) or getattr(item, "created", None) or 0.0)
            ident = str(item.id)
        if where != str(cwd) or parent or not turns:
            continue
        if best is None or (updated, ident) > best:
            best = (updated, ident)
    if best is None:
        msg = f"no stored session to continue in {cwd}; start one with `dsh chat` or `dsh run PROMPT`"
        raise CliError(msg)
    return best[1]


Setup = Callable[[Context], "Awaitable[None] | None"]


async def open_agent(
    ctx: Context, *, model: str, cwd: Path, resume: str | None = None, setup: Setup | None = None
) -> AgentHandle:
    """Create a new agent (a fresh session in ``cwd``) or resume a stored session.

    :raises CliError: for a session that is not stored, or no persistence plugin to resume from.
    """
    options = AgentOptions(model=model)
    try:
        if resume is not None:
            session_id = await resolve_session_id(ctx, resume)
            handle: AgentHandle = await ctx.agents.resume(session_id, agent_options=options, setup=setup)
            return handle
        meta = {"cwd": str(cwd)}
        handle = await ctx.agents.create(new_session_id(), meta=meta, agent_options=options, setup=setup)
        return handle
    except CliError:
        raise
    except DshError as exc:
        raise CliError(str(exc)) from exc
