"""dsh end to end against its peers and two floors: harness-process CPU over real HTTP streaming.

A local OpenAI-compatible server (``_e2e_server.py``) runs in a process of its own and streams
server-sent events over HTTP/1.1. Each contender (``_e2e_contenders.py``) runs in a child process
of its own, and the figure is that process's CPU time (``time.process_time``: all its threads, none
of the server's), so a busy, shared machine disturbs it less than wall time would:

* **chunk, back to back** — (a turn of ``--chunks`` + 1 text chunks sent at once - a turn of 1) / ``--chunks``;
* **chunk, paced** — the same with the chunks 1 ms apart (``--paced-chunks`` of them), as a model
  streams: every chunk is a wake-up of its own;
* **tool step** — (a turn of ``--tool-steps`` calls of ``ping`` then one chunk - a turn of one chunk) / ``--tool-steps``;
* **session, concurrent** — ``--sessions`` sessions at once, each a turn of one tool step then 20
  chunks sent at once: CPU / sessions (after a warm-up run of 20 sessions).

Each turn type is played ``--repeats`` times after a warm-up and the least CPU counts; a child
prints its figures as JSON. Rounds interleave every contender (in a rotating order) and a figure is
the median over ``--rounds``. Contenders:

* ``dsh`` (asyncio), ``dsh-jsonl`` (persistence-jsonl on, in ``$TMPDIR``), ``dsh-trio``: the real
  ``openai`` adapter plugin (httpx, httpx-sse) through the loop and the session log; with
  ``--baseline-tree PATH`` (another checkout, e.g. ``git worktree add /tmp/main main``) the same
  three again as ``base:dsh``... from that tree's code (its own ``.venv`` if it has one), for
  "same run vs main" ratios. This tree's alternatives run beside them: ``dsh-httpx`` (the
  plugin's ``http_transport = "httpx"``: httpx's own transport on asyncio) and ``dsh-uvloop``
  (asyncio on uvloop's event loop, as the CLI and ``dsh serve`` run);
* ``openai-agents``, ``pydantic-ai``, ``langchain`` (``create_agent`` over ``langchain-openai``),
  each with its own OpenAI client, on asyncio. They live in a benchmark venv of their own
  (``--peers-venv``, made and filled from PyPI on first use; ``--no-install`` never installs); a peer
  that cannot be installed or fails is skipped with a printed line, never an error;
* ``floor-socket`` (asyncio streams on a raw socket + ``json.loads``; ``floor-socket-uvloop`` the
  same on uvloop) and ``floor-httpx`` (bare httpx ``aiter_lines`` + ``json.loads``, httpx's own
  transport): the least any client pays for the same stream.

``--only dsh,floor`` runs the contenders whose names start with one of those words (``peers``
names the three peers); ``--json`` prints the medians as one object. Figures only, never asserted.
The load average is printed before and after: compare figures of one run only.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
#: figure -> what it is, in µs of harness-process CPU
FIGURES = {
    "chunk": "per chunk, back to back",
    "chunk paced": "per chunk, 1 ms apart",
    "tool step": "per tool step",
    "session concurrent": "per session, all at once",
}
PACE_US = 1000
CONCURRENT_CHUNKS = 20
WARM_UP_SESSIONS = 20
#: peer -> (what pip installs, the modules that must import)
PEERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "openai-agents": (("openai-agents",), ("agents",)),
    "pydantic-ai": (("pydantic-ai-slim[openai]",), ("pydantic_ai", "pydantic_ai.models.openai")),
    "langchain": (("langchain", "langchain-openai"), ("langchain.agents", "langchain_openai")),
}
DEFAULT_PEERS_VENV = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dsh-bench" / "e2e-peers"
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; figures are medians (5)")
    parser.add_argument(
        "--repeats", type=int, default=2, help="turns of each kind per child; the least counts (2)"
    )
    parser.add_argument(
        "--only", default="", help="comma-separated name prefixes: dsh, base, floor, peers, langchain..."
    )
    parser.add_argument("--baseline-tree", type=Path, help="another checkout whose dsh runs as base:dsh...")
    parser.add_argument(
        "--peers-venv", type=Path, default=DEFAULT_PEERS_VENV, help="the peers' venv (made on use)"
    )
    parser.add_argument("--no-install", action="store_true", help="never pip-install a missing peer: skip it")
    parser.add_argument("--chunks", type=int, default=2000, help="chunks of the back-to-back turn (2000)")
    parser.add_argument(
        "--paced-chunks", type=int, default=300, help="chunks of the paced turn, 1 ms apart (300)"
    )
    parser.add_argument("--tool-steps", type=int, default=10, help="tool steps of the tool turn (10)")
    parser.add_argument("--sessions", type=int, default=200, help="sessions of the concurrent run (200)")
    parser.add_argument("--json", action="store_true", help="print the medians as one JSON object")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a child's run: --child KIND
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="asyncio", help=argparse.SUPPRESS)
    parser.add_argument("--persist", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--http-transport", help=argparse.SUPPRESS)
    parser.add_argument("--uvloop", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


# ---------------------------------------------------------------------- a child: one contender


def model(chunks: int, pace_us: int = 0, tools: int = 0) -> str:
    return f"e2e-{chunks}-{pace_us}-{tools}"


async def measure(turn: Callable[[str], Awaitable[int]], args: argparse.Namespace) -> dict[str, float]:
    """The contender's figures in µs (see the module docstring)."""
    import anyio

    async def least(name: str, chunks: int) -> float:
        best = float("inf")
        for repeat in range(args.repeats + 1):  # the first is a warm-up
            gc.collect()
            start = time.process_time()
            got = await turn(name)
            elapsed = time.process_time() - start
            if got != chunks:
                msg = f"{name}: the final answer had {got} chunks, not {chunks}"
                raise RuntimeError(msg)
            if repeat:
                best = min(best, elapsed)
        return best

    async def concurrent() -> float:
        name = model(CONCURRENT_CHUNKS, 0, 1)
        counts: list[int] = []

        async def one() -> None:
            counts.append(await turn(name))

        elapsed = 0.0
        for sessions in (min(args.sessions, WARM_UP_SESSIONS), args.sessions):  # a warm-up, then the run
            counts.clear()
            gc.collect()
            start = time.process_time()
            async with anyio.create_task_group() as group:
                for _ in range(sessions):
                    group.start_soon(one)
            elapsed = time.process_time() - start
            if counts != [CONCURRENT_CHUNKS] * sessions:
                msg = f"concurrent: answers of {sorted(set(counts))} chunks, not {CONCURRENT_CHUNKS}"
                raise RuntimeError(msg)
        return elapsed

    one = await least(model(1), 1)
    figures = {
        "chunk": (await least(model(args.chunks + 1), args.chunks + 1) - one) / args.chunks,
        "chunk paced": (
            await least(model(args.paced_chunks + 1, PACE_US), args.paced_chunks + 1)
            - await least(model(1, PACE_US), 1)
        )
        / args.paced_chunks,
        "tool step": (await least(model(1, 0, args.tool_steps), 1) - one) / args.tool_steps,
        "session concurrent": await concurrent() / args.sessions,
    }
    return {key: value * 1e6 for key, value in figures.items()}


def child(args: argparse.Namespace) -> None:
    """Measure one contender; ``benchmarks/`` leaves ``sys.path`` first, since its scripts' names
    (``mcp.py``, ``otel.py``...) would shadow packages the peers import."""
    import importlib.util

    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != BENCH]
    spec = importlib.util.spec_from_file_location("_e2e_contenders", BENCH / "_e2e_contenders.py")
    assert spec is not None
    assert spec.loader is not None
    contenders = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(contenders)
    import anyio

    async def run() -> dict[str, float]:
        options: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="dsh-e2e-") as root:
            if args.persist:
                options["persist_root"] = root
            if args.http_transport:
                options["http_transport"] = args.http_transport
            async with contenders.OPENERS[args.child](args.base_url, **options) as turn:
                return await measure(turn, args)

    loop_options = {"use_uvloop": True} if args.uvloop else {}
    figures: dict[str, Any] = anyio.run(run, backend=args.backend, backend_options=loop_options)
    if args.child == "dsh":
        import dsh_core

        figures["dsh_core"] = dsh_core.__file__  # the parent checks which tree's code ran
    print(json.dumps(figures))


# ---------------------------------------------------------------------- the parent: rounds


class Contender:
    """One column of the table: which client, run by which Python, with which ``PYTHONPATH``."""

    def __init__(
        self,
        name: str,
        kind: str,
        python: str,
        path: str | None = None,
        *flags: str,
        tree: Path | None = None,
    ) -> None:
        self.name, self.kind, self.python, self.path, self.flags = name, kind, python, path, flags
        #: the checkout whose ``dsh_core`` the child must import (dsh only)
        self.tree = tree
        self.runs: list[dict[str, float]] = []
        self.failed = ""

    def run(self, base_url: str, args: argparse.Namespace) -> None:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        if self.path is not None:
            env["PYTHONPATH"] = self.path
        command = [
            self.python,
            str(BENCH / "e2e.py"),
            "--child",
            self.kind,
            "--base-url",
            base_url,
            *self.flags,
        ]
        for option in ("repeats", "chunks", "paced_chunks", "tool_steps", "sessions"):
            command += [f"--{option.replace('_', '-')}", str(getattr(args, option))]
        done = subprocess.run(command, env=env, cwd="/", capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            self.failed = f"exit {done.returncode}: {last}"
            print(f"  {self.name} failed, left out: {self.failed}", file=sys.stderr)
            return
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        imported = Path(figures.pop("dsh_core", "/")).resolve()
        if self.tree is not None and not imported.is_relative_to(self.tree):
            self.failed = f"it imported {imported}, not the dsh_core of {self.tree}"
            print(f"  {self.name} left out: {self.failed}", file=sys.stderr)
            return
        self.runs.append(figures)

    def median(self, figure: str) -> float | None:
        values = [run[figure] for run in self.runs if figure in run]
        return statistics.median(values) if values else None


def wanted(name: str, only: list[str]) -> bool:
    if not only:
        return True
    return any(name.startswith(word) or (word == "peers" and name in PEERS) for word in only)


def peers_python(args: argparse.Namespace, names: list[str]) -> tuple[str | None, list[str]]:
    """The peers' venv Python and the peers that import there (installing the missing ones unless
    ``--no-install``); every peer left out gets a printed line."""
    venv = args.peers_venv
    python = venv / "bin" / "python"

    def importable(peer: str) -> bool:
        modules = PEERS[peer][1]
        code = "import " + ", ".join(modules)
        return (
            python.exists()
            and subprocess.run([python, "-c", code], capture_output=True, check=False).returncode == 0
        )

    missing = [peer for peer in names if not importable(peer)]
    if missing and not args.no_install:
        print(f"installing {', '.join(missing)} into {venv} (PyPI; once)", file=sys.stderr)
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=False, capture_output=True)
        packages = [package for peer in missing for package in PEERS[peer][0]]
        if python.exists():
            subprocess.run([python, "-m", "pip", "install", "-q", *packages], check=False)
        missing = [peer for peer in names if not importable(peer)]
    for peer in missing:
        print(f"  skipping {peer}: it does not import in {venv}", file=sys.stderr)
    found = [peer for peer in names if peer not in missing]
    return (str(python) if found else None), found


def contenders(args: argparse.Namespace, shims: Path) -> list[Contender]:
    from _compare import _path_of, _python_of

    only = [word.strip() for word in args.only.split(",") if word.strip()]
    this_python = _python_of(HERE)
    chosen = [
        Contender("floor-socket", "floor-socket", this_python, str(HERE)),
        Contender("floor-socket-uvloop", "floor-socket", this_python, str(HERE), "--uvloop"),
        Contender("floor-httpx", "floor-httpx", this_python, str(HERE)),
    ]
    trees = [("", HERE)] + ([("base:", args.baseline_tree.resolve())] if args.baseline_tree else [])
    for prefix, tree in trees:
        python, path = _python_of(tree), _path_of(tree, shims)
        chosen += [
            Contender(f"{prefix}dsh", "dsh", python, path, tree=tree),
            Contender(f"{prefix}dsh-jsonl", "dsh", python, path, "--persist", tree=tree),
            Contender(f"{prefix}dsh-trio", "dsh", python, path, "--backend", "trio", tree=tree),
        ]
        if not prefix:  # this tree's alternatives (issue 36): options main does not know
            chosen += [
                Contender("dsh-httpx", "dsh", python, path, "--http-transport", "httpx", tree=tree),
                Contender("dsh-uvloop", "dsh", python, path, "--uvloop", tree=tree),
            ]
    chosen = [contender for contender in chosen if wanted(contender.name, only)]
    peers = [peer for peer in PEERS if wanted(peer, only)]
    if peers:
        peer_python, found = peers_python(args, peers)
        chosen += [Contender(peer, peer, peer_python) for peer in found if peer_python is not None]
    return chosen


def start_server() -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, str(BENCH / "_e2e_server.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    port = int(server.stdout.readline())
    return server, f"http://127.0.0.1:{port}/v1"


def show(chosen: list[Contender], args: argparse.Namespace, loads: tuple[str, str]) -> None:
    ran = [contender for contender in chosen if contender.runs]
    print(
        f"e2e: harness-process CPU, µs, medians of {args.rounds} interleaved rounds "
        f"(least of {args.repeats} per child); load average before {loads[0]}, after {loads[1]}"
    )
    print(
        f"  chunk: {args.chunks} back to back; chunk paced: {args.paced_chunks} at {PACE_US} µs; "
        f"tool step: {args.tool_steps} steps; session concurrent: {args.sessions} sessions x "
        f"(1 tool step + {CONCURRENT_CHUNKS} chunks)"
    )
    medians = {contender.name: {figure: contender.median(figure) for figure in FIGURES} for contender in ran}
    rows = ratio_rows(medians)
    width = max([len(name) for name in medians] + [len(row[0]) for row in rows] + [14])
    print(f"  {'':<{width}}" + "".join(f"{figure:>20}" for figure in FIGURES))
    for name, figures in medians.items():
        cells = "".join(f"{value:20.1f}" if value is not None else f"{'-':>20}" for value in figures.values())
        print(f"  {name:<{width}}{cells}")
    print("  ratios (same run):")
    for label, top, bottom in rows:
        cells = "".join(f"{ratio(medians[top][f], medians[bottom][f]):>20}" for f in FIGURES)
        print(f"  {label:<{width}}{cells}")
    for contender in chosen:
        if contender.failed and not contender.runs:
            print(f"  {contender.name}: left out ({contender.failed})")


def ratio(top: float | None, bottom: float | None) -> str:
    return f"{top / bottom:.2f}x" if top is not None and bottom else "-"


def ratio_rows(medians: dict[str, dict[str, float | None]]) -> list[tuple[str, str, str]]:
    """(label, numerator, denominator) of each ratio line the run can print."""
    rows: list[tuple[str, str, str]] = []
    for dsh in ("dsh", "dsh-jsonl", "dsh-trio", "dsh-httpx", "dsh-uvloop"):
        if dsh in medians:
            rows += [
                (f"{dsh}/{floor}", dsh, floor)
                for floor in ("floor-socket", "floor-httpx")
                if floor in medians
            ]
        if f"base:{dsh}" in medians and dsh in medians:
            rows.append((f"{dsh}/base", dsh, f"base:{dsh}"))
    if "dsh" in medians:
        rows += [(f"{peer}/dsh", peer, "dsh") for peer in PEERS if peer in medians]
    return rows


def main() -> None:
    args = parse_args()
    if args.child:
        child(args)
        return
    loads = "{:.2f} {:.2f} {:.2f}"
    before = loads.format(*os.getloadavg())
    server, base_url = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="dsh-e2e-shim-") as shims:
            chosen = contenders(args, Path(shims))
            for round_ in range(args.rounds):
                turn = round_ % len(chosen) if chosen else 0
                for contender in chosen[turn:] + chosen[:turn]:  # a rotating order
                    if not contender.failed:
                        contender.run(base_url, args)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    after = loads.format(*os.getloadavg())
    if args.json:
        print(json.dumps({c.name: {f: c.median(f) for f in FIGURES} for c in chosen if c.runs}))
    else:
        show(chosen, args, (before, after))


if __name__ == "__main__":
    main()
