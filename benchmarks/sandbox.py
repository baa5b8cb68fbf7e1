"""The cost of the sandbox: a ``bash`` call of ``true`` confined against unconfined, and against an older dsh.

Run: ``.venv/bin/python benchmarks/sandbox.py [--baseline DIR ...]``. Prints figures, asserts nothing.
Each figure is one ``bash`` call through the whole tool pipeline (workspace + permissions
plugins, the sandbox required), as the harness's user (root in CI): the median and the fastest of
``ROUNDS`` rounds of ``CALLS`` calls, each round measuring every variant in turn. ``unconfined``
is the same call in full-access mode.

Each round of each variant runs in a fresh child process of this script. ``--baseline DIR`` also
measures the sandbox of another checkout of dsh, e.g. main before the sandbox changed
(``git worktree add /tmp/dsh-before <commit>``): its child has that checkout's packages, and its
core's entry points, first on ``sys.path``; in this same run, and the ratio is printed.
Give it more than once to compare several checkouts in one run (each round measures them all).
Budget (issue 14): the confined call no slower than the sandbox before issue 14 (``8d38d42``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import anyio

from dsh_core import Harness, ToolExecution

#: rounds, each measuring every variant in turn (so that load from elsewhere hits them alike)
ROUNDS = 6
CALLS = 15
WARM_UP = 3


async def measure(mode: str) -> list[float]:
    """Seconds of each of ``CALLS`` ``bash true`` calls in ``mode``, through the tool pipeline."""
    from dsh_permissions import PermissionsPlugin
    from dsh_workspace import WorkspacePlugin

    config = {"plugins": {"permissions": {"mode": mode, "sandbox": "required"}}}
    times = []
    with tempfile.TemporaryDirectory() as workspace:
        async with Harness(config=config, plugins=[WorkspacePlugin, PermissionsPlugin], autoload=False) as ctx:
            for index in range(WARM_UP + CALLS):
                execution = ToolExecution(
                    call_id=f"c{index}", name="bash", arguments='{"command": "true"}', agent_id="a", cwd=workspace
                )
                start = time.perf_counter()
                result = await ctx.tools.execute(execution)
                elapsed = time.perf_counter() - start
                if result.is_error:
                    msg = f"bash true failed in {mode}: {result.content}"
                    raise RuntimeError(msg)
                if index >= WARM_UP:
                    times.append(elapsed)
    return times


def entry_points_of(checkout: Path, into: Path) -> Path:
    """A ``*.dist-info`` under ``into`` declaring ``checkout``'s own entry points (its core plugins' module paths).

    The harness finds its default plugins through the installed distribution's entry points, which
    name this checkout's modules; put first on ``sys.path``, this one shadows them for the child.
    """
    with (checkout / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]
    info = into / f"{project['name'].replace('-', '_')}-{project.get('version', '0')}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project.get('version', '0')}\n")
    groups = project.get("entry-points", {})
    lines = [f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in table.items()) for group, table in groups.items()]
    (info / "entry_points.txt").write_text("\n".join(lines))
    return into


def child_round(mode: str, checkout: Path | None = None, metadata: Path | None = None) -> list[float]:
    """One round of calls in ``mode``, measured by this script run as a fresh child process.

    With ``checkout`` (and its ``metadata``), on that checkout's packages; else on this environment's.
    """
    env = dict(os.environ)
    if checkout is not None and metadata is not None:
        packages = [metadata, checkout, checkout / "contrib" / "dsh-permissions", checkout / "contrib" / "dsh-workspace"]
        env["PYTHONPATH"] = os.pathsep.join(str(path) for path in packages)
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode], env=env, capture_output=True, text=True, check=True, cwd=checkout
    )
    return [float(seconds) for seconds in json.loads(done.stdout)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", type=Path, action="append", default=[], help="a checkout of an older dsh to compare with"
    )
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds (default {ROUNDS}; more for a busy machine)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(anyio.run(measure, args.child)))
        return
    figures: dict[str, list[float]] = {"unconfined": [], "confined": []}
    with tempfile.TemporaryDirectory() as scratch:
        metadata = {}
        for index, checkout in enumerate(args.baseline):
            figures[str(checkout)] = []
            metadata[checkout] = entry_points_of(checkout, Path(scratch) / str(index))
        for _ in range(args.rounds):
            # Every variant in a fresh child process, this checkout's too, so that none is measured
            # in a process that has already run (and grown through) the others.
            figures["unconfined"] += child_round("full-access")
            figures["confined"] += child_round("workspace-write")
            for checkout in args.baseline:
                figures[str(checkout)] += child_round("workspace-write", checkout, metadata[checkout])
    user = "root" if os.geteuid() == 0 else "a normal user"
    print(f"bash `true` through the tool pipeline, {args.rounds} rounds of {CALLS} calls each, as {user}:")
    medians = {name: statistics.median(times) for name, times in figures.items()}
    width = max(len(name) for name in figures)
    for name, times in figures.items():
        print(f"  {name:<{width}}  median {medians[name] * 1e3:7.2f} ms   fastest {min(times) * 1e3:7.2f} ms")
    print(f"  confined / unconfined: {medians['confined'] / medians['unconfined']:.2f}x (median)")
    for checkout in args.baseline:
        ratio = medians["confined"] / medians[str(checkout)]
        fastest = min(figures["confined"]) / min(figures[str(checkout)])
        print(f"  confined / the sandbox of {checkout}: {ratio:.2f}x median, {fastest:.2f}x fastest")


if __name__ == "__main__":
    main()
