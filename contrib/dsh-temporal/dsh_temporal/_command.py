"""``dsh worker``: serve sessions hosted on Temporal until SIGTERM or SIGINT, then exit 0.

A subcommand found through the ``dsh.commands`` entry point. It runs a harness from the usual
configuration layers (plus this plugin, serving), connects to ``[plugins.temporal]`` and serves
its task queue. On SIGTERM or SIGINT it stops taking work, lets a running turn finish within its
heartbeat timeout (or hands it back to another worker), stops the harness and returns 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio

from dsh_core import ConfigError, Context, DshError, Harness

from ._config import TemporalConfig
from ._plugin import TemporalPlugin

__all__ = ["add_arguments", "help", "main", "run"]

help = "serve sessions hosted on Temporal (the task queue of [plugins.temporal]) until SIGTERM/SIGINT"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The worker's own options; ``--config``/``--set`` come from ``dsh`` (or ``main``)."""
    parser.add_argument("--address", help="the Temporal frontend host:port (default: plugins.temporal.address)")
    parser.add_argument("--namespace", help="the Temporal namespace (default: plugins.temporal.namespace)")
    parser.add_argument("--task-queue", help="the task queue to serve (default: plugins.temporal.task_queue)")
    parser.add_argument("--identity", help="this worker's name in Temporal (default: pid@host)")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    names = {"address": "address", "namespace": "namespace", "task_queue": "task_queue"}
    return {key: getattr(args, attr) for attr, key in names.items() if getattr(args, attr, None)}


def _harness(args: argparse.Namespace, plugin: TemporalPlugin) -> AbstractAsyncContextManager[Context]:
    """The harness of the usual configuration layers (through ``dsh_cli`` when it is installed)."""
    try:
        import dsh_cli
    except ImportError:  # ``python -m dsh_temporal worker`` without the CLI: the --config file only
        path = getattr(args, "config", None)
        if path is not None:
            return Harness.from_file(Path(path), plugins=[plugin])
        return Harness(config={}, plugins=[plugin])
    return dsh_cli.open_harness(dsh_cli.config_from_args(args), plugins=[plugin])


async def _serve(args: argparse.Namespace) -> int:
    from ._worker import serve  # temporalio: only when a worker really starts

    plugin = TemporalPlugin(serving=True)
    stop = anyio.Event()
    async with _harness(args, plugin) as ctx:
        try:
            config = TemporalConfig(**{**_as_dict(plugin.config), **_overrides(args)})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"plugins.temporal: {exc}", path="plugins.temporal") from exc
        async with anyio.create_task_group() as tg:

            async def on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        stop.set()
                        return

            tg.start_soon(on_signal)

            def ready() -> None:
                print(f"dsh worker: serving {config.task_queue!r} at {config.address}", flush=True)

            await serve(ctx, config, stop, identity=getattr(args, "identity", None), on_ready=ready)
            tg.cancel_scope.cancel()
    return 0


def _as_dict(config: TemporalConfig) -> dict[str, Any]:
    return {
        "address": config.address,
        "namespace": config.namespace,
        "task_queue": config.task_queue,
        "heartbeat_timeout": config.heartbeat_timeout,
    }


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit status (0 after a graceful stop).

    Temporal's SDK needs asyncio, so the worker runs its own asyncio loop.
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_serve(args))
    except DshError as exc:  # a configuration problem: one line, like every dsh command
        print(f"dsh worker: {exc}", file=sys.stderr)
        return 3


def main(argv: list[str] | None = None) -> int:
    """``python -m dsh_temporal worker [--config FILE] ...``: the command without the dsh CLI."""
    parser = argparse.ArgumentParser(prog="dsh worker", description=help)
    parser.add_argument("--config", help="a dsh.toml to read the harness configuration from")
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE")
    add_arguments(parser)
    return run(parser.parse_args(argv))
