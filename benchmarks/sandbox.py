"""The cost of the sandbox: a ``bash`` call of ``true`` confined against unconfined, and against an older dsh.

Run: ``.venv/bin/python benchmarks/sandbox.py [--baseline DIR ...]``. Prints figures, asserts nothing.
Each figure is one ``bash`` call through the whole tool pipeline (workspace + permissions
plugins, the sandbox required), as the harness's user (root in CI): the median and the fastest of
``ROUNDS`` rounds of ``CALLS`` calls, each round measuring every variant in turn. ``unconfined``
is the same call in full-access mode; ``confined, max_processes = 40`` is below what pid_max can
hold, which as root makes the cap a pids cgroup of each command's own (a ``mkdir``, a write and an
``sh`` that enters it and becomes bwrap).

Each round of each variant runs in a fresh child process of this script. ``--baseline DIR`` also
measures the sandbox of another checkout of dsh, e.g. main before the sandbox changed
(``git worktree add /tmp/dsh-before <commit>``): its child has that checkout's packages, and its
core's entry points, first on ``sys.path``; in this same run, and the ratio is printed.
Give it more than once to compare several checkouts in one run (each round measures them all).
Budget (issue 14): the confined call no slower than the sandbox before issue 14 (``8d38d42``).

``--bwrap-alone RUNS`` then also times the bwrap process alone (no harness), interleaved: this
sandbox's command line, the same without the five hidden ``/etc`` paths (an ablation, to show what
they cost), and ``8d38d42``'s command line (written out below); wall time, and the CPU time of
bwrap and everything it ran (``wait4``).
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
from collections.abc import Sequence
from pathlib import Path

import anyio

from dsh_core import Harness, ToolExecution

#: rounds, each measuring every variant in turn (so that load from elsewhere hits them alike)
ROUNDS = 6
CALLS = 15
WARM_UP = 3


#: the max_processes of the variant below what a pid namespace's pid_max can hold
SMALL_CAP = 40


async def measure(variant: str) -> list[float]:
    """Seconds of each of ``CALLS`` ``bash true`` calls in ``variant`` (a mode, ``:N`` a max_processes)."""
    from dsh_permissions import PermissionsPlugin
    from dsh_workspace import WorkspacePlugin

    mode, _, cap = variant.partition(":")
    permissions: dict[str, object] = {"mode": mode, "sandbox": "required"}
    if cap:
        permissions["max_processes"] = int(cap)
    config = {"plugins": {"permissions": permissions}}
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


def old_bwrap_argv(bwrap: str, argv: Sequence[str], cwd: str) -> list[str]:
    """The sandbox before issue 14 (``8d38d42``'s ``bwrap_argv``, workspace-write): the whole root, read-only."""
    return [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--bind", cwd, cwd, "--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session",
            "--chdir", cwd, "--", *argv]  # fmt: skip


def without_etc_hidden(argv: Sequence[str]) -> list[str]:
    """``argv`` without the mounts that hide paths below /etc (the ablation)."""
    out: list[str] = []
    index = 0
    while index < len(argv):
        if argv[index] in ("--ro-bind", "--dir") and index + 2 < len(argv) and argv[index + 2].startswith("/etc/"):
            index += 3
            continue
        out.append(argv[index])
        index += 1
    return out


def run_bwrap(argv: Sequence[str], pass_fds: Sequence[int], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds (bwrap and all it ran) of one run of ``argv``, which must succeed."""
    start = time.perf_counter()
    process = subprocess.Popen(
        argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=pass_fds, start_new_session=True
    )
    for fd in pass_fds:
        os.close(fd)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - start
    if process.returncode != 0:
        msg = f"bwrap failed (exit {process.returncode}): {list(argv)}"
        raise RuntimeError(msg)
    return elapsed, usage.ru_utime + usage.ru_stime


async def bwrap_alone(runs: int) -> dict[str, list[tuple[float, float]]]:
    """``runs`` interleaved runs of each bwrap command line of ``bwrap true`` (see the module's docstring)."""
    from dsh_permissions import BwrapSandbox, Confinement

    sandbox = BwrapSandbox("required", "bwrap", lambda agent: "workspace-write")
    figures: dict[str, list[tuple[float, float]]] = {
        "bwrap: this sandbox": [], "bwrap: without the /etc hidden paths (ablation)": [], "bwrap: 8d38d42's": [],
    }  # fmt: skip
    try:
        with tempfile.TemporaryDirectory() as workspace:
            execution = ToolExecution(call_id="c", name="bash", arguments="{}", agent_id="a", cwd=workspace)
            true = ["/usr/bin/env", "true"]
            status = await sandbox.status()
            if not status.available or status.executable is None:
                msg = f"the sandbox cannot hold here: {status.reason}"
                raise RuntimeError(msg)
            for _ in range(runs):
                for name in figures:
                    confined = await sandbox.wrap(true, cwd=workspace, execution=execution)
                    assert isinstance(confined, Confinement)
                    argv: Sequence[str] = confined.argv
                    if name.startswith("bwrap: without"):
                        argv = without_etc_hidden(argv)
                    elif name == "bwrap: 8d38d42's":
                        argv = old_bwrap_argv(status.executable, true, workspace)
                    fds = confined.pass_fds if "--file" in argv else ()
                    for fd in set(confined.pass_fds) - set(fds):
                        os.close(fd)
                    figures[name].append(run_bwrap(argv, fds, workspace))
    finally:
        sandbox.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", type=Path, action="append", default=[], help="a checkout of an older dsh to compare with"
    )
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds (default {ROUNDS}; more for a busy machine)")
    parser.add_argument("--bwrap-alone", type=int, default=0, metavar="RUNS", help="also time bwrap alone, RUNS times")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(anyio.run(measure, args.child)))
        return
    small = f"confined, max_processes = {SMALL_CAP}"
    figures: dict[str, list[float]] = {"unconfined": [], "confined": [], small: []}
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
            figures[small] += child_round(f"workspace-write:{SMALL_CAP}")
            for checkout in args.baseline:
                figures[str(checkout)] += child_round("workspace-write", checkout, metadata[checkout])
    user = "root" if os.geteuid() == 0 else "a normal user"
    print(f"bash `true` through the tool pipeline, {args.rounds} rounds of {CALLS} calls each, as {user}:")
    medians = {name: statistics.median(times) for name, times in figures.items()}
    width = max(len(name) for name in figures)
    for name, times in figures.items():
        print(f"  {name:<{width}}  median {medians[name] * 1e3:7.2f} ms   fastest {min(times) * 1e3:7.2f} ms")
    print(f"  confined / unconfined: {medians['confined'] / medians['unconfined']:.2f}x (median)")
    print(f"  max_processes = {SMALL_CAP} / the default: {medians[small] / medians['confined']:.2f}x (median)")
    for checkout in args.baseline:
        ratio = medians["confined"] / medians[str(checkout)]
        fastest = min(figures["confined"]) / min(figures[str(checkout)])
        print(f"  confined / the sandbox of {checkout}: {ratio:.2f}x median, {fastest:.2f}x fastest")
    if args.bwrap_alone:
        alone = anyio.run(bwrap_alone, args.bwrap_alone)
        print(f"bwrap alone (no harness), {args.bwrap_alone} interleaved runs each:")
        width = max(len(name) for name in alone)
        for name, runs in alone.items():
            wall = statistics.median(run[0] for run in runs)
            cpu = statistics.median(run[1] for run in runs)
            print(f"  {name:<{width}}  median {wall * 1e3:7.2f} ms   cpu {cpu * 1e3:6.2f} ms")
        base = statistics.median(run[0] for run in alone["bwrap: 8d38d42's"])
        print(f"  this sandbox / 8d38d42's: {statistics.median(r[0] for r in alone['bwrap: this sandbox']) / base:.2f}x")


if __name__ == "__main__":
    main()
