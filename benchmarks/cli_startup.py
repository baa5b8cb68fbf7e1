"""How fast ``dsh`` starts: ``dsh run`` to its first byte of output, and ``import dsh_cli``, against a baseline.

Prints, for this tree and one or more baseline trees measured in the same run: ``python -c
pass``; ``python -c "import dsh_cli"``; and the time from starting ``dsh run "hi"`` to the first
byte of its answer on stdout, the model being an instant one (a loopback OpenAI-compatible server,
``dsh_harness_openai.testing.LlmServer``, that answers at once, so what is measured is dsh: imports,
configuration, plugin starts, session creation, the request, the stream). Nothing leaves the
machine. Each figure is also given as a ratio to ``python -c pass`` and to each baseline.

Two measures of each run: wall time (to the first byte; best and median), and the **CPU time of
the child process** (user + system, from ``RUSAGE_CHILDREN``, for the whole ``dsh run``), which a
machine shared with other work disturbs far less than wall time. Rounds are interleaved, the
trees' order rotating from round to round (so a drift of the machine's load spreads over all of
them), and each round compares the trees with one another: the verdict is the **median of the
per-round CPU ratios**, printed with their quartiles so the noise is visible.

Budget (issue 18): this tree's first byte and import time each at most half of the baseline's,
as a ratio of the totals and of the net figures (less ``python -c pass`` in the same tree: what dsh
adds to the interpreter's start; for ``import dsh_cli`` that is nearly all that can change).

``--breakdown`` then runs ``dsh run`` under ``-X importtime`` in both trees and prints the import
time on the path to the first byte by cause (``CAUSES``: each module's own time goes to its package
or to the nearest module that imported it; each row is its best of the rounds).

The baseline (default ``1d609ea``, main when issue 18's budget was set) is either a directory (a
checkout with its venv, e.g. ``git worktree add DIR 1d609ea && make -C DIR .venv/.installed``) or
a git ref, checked out under ``/tmp`` with its own venv built by its Makefile on first use. Both
trees run what ``make demo`` installs: the test suite's own plugins (``tests/plugins/``), when
installed in this tree's venv, are disabled (``DSH_DISABLE_PLUGINS``), and both run with compiled
bytecode (``PYTHONPYCACHEPREFIX`` in a temporary directory, warmed first), as an installed dsh would.

``--estimate-without PLUGINS`` adds this tree with those plugins disabled to the same run: what a
lazy import of them (a plugin front that imports its heavy dependencies only when used) would gain.

``--budget 1.0`` checks "no slower than the baseline" instead (issue 32: against the main it
started from, and the main of the same day, ``--baseline DIR --baseline DIR``; ``--baseline`` may
be given more than once).

    python benchmarks/cli_startup.py [--rounds 15] [--baseline REF|DIR ...] [--breakdown] [--budget 0.5]
                                     [--estimate-without temporal,persistence-postgres]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import NamedTuple

from dsh_harness_openai.testing import LlmServer, chunk

ROOT = Path(__file__).resolve().parent.parent

#: main on 2026-12-02, when issue 18's start-up budget ("half of today's main") was set
DEFAULT_BASELINE = "1d609ea"

#: ``--breakdown``'s causes: a label and its packages. Each module's own import time goes to the
#: cause of the module itself or, failing that, of the nearest module that imported it ("other":
#: none), so the rows add up to all imports and a dependency counts for whoever brought it in.
CAUSES: Mapping[str, tuple[str, ...]] = {
    "dsh_core": ("dsh_core",),
    "jsonschema (dsh_core's tool defaults)": ("jsonschema",),
    "dsh_cli": ("dsh_cli",),
    "dsh_agent_loop": ("dsh_agent_loop",),
    "dsh_harness_openai": ("dsh_harness_openai", "dsh_openai"),
    "httpx": ("httpx", "httpx_sse"),
    "click, pygments (httpx's CLI)": ("click", "pygments"),
    "httpcore, h11": ("httpcore", "h11"),
    "trio (httpcore imports it)": ("trio",),
    "rich": ("rich",),
    "prompt_toolkit": ("prompt_toolkit",),
    "anyio": ("anyio", "sniffio"),
    "attrs, cattrs": ("attr", "attrs", "cattr", "cattrs"),
    "temporalio (dsh-temporal)": ("temporalio",),
    "psycopg (dsh-persistence-postgres)": ("psycopg", "psycopg_binary", "psycopg_pool"),
    "opentelemetry (dsh-otel)": ("opentelemetry",),
    "mcp (dsh-mcp)": ("mcp",),
    "dsh-temporal": ("dsh_temporal",),
    "dsh-persistence-postgres": ("dsh_persistence_postgres",),
    "other contrib plugins": (
        "dsh_compaction",
        "dsh_mcp",
        "dsh_otel",
        "dsh_permissions",
        "dsh_persistence_jsonl",
        "dsh_retry",
        "dsh_subagents",
        "dsh_workspace",
    ),
    "importlib.metadata (entry points)": ("importlib_metadata", "zipp", "email", "csv"),
    "dsh-budget": ("dsh_budget",),
    "dsh-serve": ("dsh_serve",),
    "everyday tools (todo, questions, web, skills, spill, jobs)": (
        "dsh_todo",
        "dsh_questions",
        "dsh_web",
        "dsh_skills",
        "dsh_spill",
        "dsh_jobs",
    ),
    "yaml (dsh-skills)": ("yaml",),
}

_IMPORT_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| (\s*)(\S+)")


def _baseline_tree(ref: str) -> Path:
    """``ref`` as a directory with a venv, or a worktree of it under /tmp with its own venv (built once)."""
    given = Path(ref).expanduser()
    if given.is_dir():
        if not (given / ".venv" / "bin" / "dsh").exists():
            sys.exit(f"--baseline {ref}: no .venv/bin/dsh there; run `make .venv/.installed` in it first")
        return given.resolve()
    sha = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = Path(tempfile.gettempdir()) / f"dsh-bench-baseline-{sha}"
    if not (tree / ".git").exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), sha], cwd=ROOT, check=True)
    if not (tree / ".venv" / ".installed").exists():
        print(f"building the baseline venv in {tree} (once) ...", file=sys.stderr)
        subprocess.run(["make", ".venv/.installed"], cwd=tree, check=True, stdout=subprocess.DEVNULL)
    return tree


def _label(tree: Path) -> str:
    sha = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True, check=False
    ).stdout.strip()
    return f"baseline {sha or tree.name}"


def _test_plugins() -> list[str]:
    """The entry-point names of the test suite's plugin distributions (``make demo`` does not install them)."""
    names = []
    for project in sorted((ROOT / "tests" / "plugins").glob("*/pyproject.toml")):
        data = tomllib.loads(project.read_text(encoding="utf-8"))
        names += list(data.get("project", {}).get("entry-points", {}).get("dsh", {}))
    return names


def _project(root: Path, base_url: str) -> Path:
    project = root / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "dsh.toml").write_text(
        f"""
[plugins.cli]
model = "local/instant"

[plugins.openai.providers.local]
base_url = "{base_url}"
models = {{ instant = {{ context_window = 32768, max_output_tokens = 4096 }} }}

[plugins.persistence-jsonl]
root = "{root / "sessions"}"
""",
        encoding="utf-8",
    )
    return project


def _environment(root: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    env.update(
        HOME=str(root / "home"),
        XDG_CONFIG_HOME=str(root / "home" / ".config"),
        XDG_STATE_HOME=str(root / "home" / ".local" / "state"),
        PYTHONPYCACHEPREFIX=str(root / "pycache"),
        DSH_DISABLE_PLUGINS=",".join(_test_plugins()),
    )
    return env


class _Sample(NamedTuple):
    """One run: wall seconds (to the first byte, for ``dsh run``) and the child's CPU seconds (user + system)."""

    wall: float
    cpu: float


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> _Sample:
    cpu = _children_cpu()
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return _Sample(time.perf_counter() - start, _children_cpu() - cpu)


def _first_byte(dsh: Path, env: dict[str, str], cwd: Path, server: LlmServer) -> _Sample:
    server.stream(chunk(content="hello"), chunk(finish="stop"))
    cpu = _children_cpu()
    start = time.perf_counter()
    process = subprocess.Popen(
        [str(dsh), "run", "hi"],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    first = process.stdout.read(1)
    elapsed = time.perf_counter() - start
    process.stdout.read()
    process.stdout.close()
    if process.wait() != 0 or first != b"h":
        msg = f"{dsh} run failed (status {process.returncode}, first byte {first!r})"
        raise RuntimeError(msg)
    return _Sample(elapsed, _children_cpu() - cpu)


def _import_times(dsh: Path, env: dict[str, str], cwd: Path, server: LlmServer) -> dict[str, float]:
    """One ``dsh run`` under ``-X importtime``: seconds per cause, and ``all imports``."""
    server.stream(chunk(content="hello"), chunk(finish="stop"))
    done = subprocess.run(
        [str(dsh), "run", "hi"],
        env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    )
    # the report is in post-order (a module after what it imported, one level deeper): rebuild the tree
    stack: list[tuple[int, _Import]] = []
    for line in done.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match is None:
            continue
        micros, depth, module = int(match[1]), len(match[2]) // 2, match[3]
        children: list[_Import] = []
        while stack and stack[-1][0] > depth:
            children.insert(0, stack.pop()[1])
        stack.append((depth, _Import(module, micros, children)))
    roots = [node for _, node in stack]
    figures = {"all imports": sum(node.micros for node in roots) / 1e6}
    _charge(roots, "other", figures)
    return figures


class _Import(NamedTuple):
    """One line of ``-X importtime``: a module, its cumulative microseconds, what it imported."""

    module: str
    micros: int
    children: list[_Import]


def _cause_of(module: str) -> str | None:
    for label, packages in CAUSES.items():
        if any(module == package or module.startswith(f"{package}.") for package in packages):
            return label
    return None


def _charge(nodes: list[_Import], inherited: str, figures: dict[str, float]) -> None:
    """Add each module's own time (its cumulative time less its imports') to its cause."""
    for node in nodes:
        cause = _cause_of(node.module) or inherited
        own = node.micros - sum(child.micros for child in node.children)
        figures[cause] = figures.get(cause, 0.0) + own / 1e6
        _charge(node.children, cause, figures)


def _breakdown(runs: Mapping[str, _Run], cwd: Path, server: LlmServer, rounds: int) -> None:
    best: dict[str, dict[str, float]] = {label: {} for label in runs}
    for _ in range(rounds):
        for label, run in runs.items():
            for cause, seconds in _import_times(
                run.tree / ".venv" / "bin" / "dsh", run.env, cwd, server
            ).items():
                best[label][cause] = min(seconds, best[label].get(cause, float("inf")))
    print(f"\nimports of `dsh run` by cause, best of {rounds} each, ms (see CAUSES)")
    print(f"  {'':<58}" + "".join(f" {label:>24}" for label in runs))
    for cause in ("all imports", *CAUSES, "other"):
        print(f"  {cause:<58}" + "".join(f" {best[label].get(cause, 0.0) * 1e3:24.1f}" for label in runs))


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    """The lower quartile, the median and the upper quartile of ``values``."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    low, middle, high = statistics.quantiles(values, n=4)
    return low, middle, high


class _Run(NamedTuple):
    """A tree and the environment its commands run in."""

    tree: Path
    env: dict[str, str]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--baseline",
        action="append",
        help=f"a git ref, or a checkout with its venv; may be repeated (default {DEFAULT_BASELINE})",
    )
    parser.add_argument(
        "--breakdown", action="store_true", help="also the import time of `dsh run` per cause"
    )
    parser.add_argument(
        "--budget", type=float, default=0.5, help="the ratio to the baseline within budget (1.0: no slower)"
    )
    parser.add_argument(
        "--estimate-without",
        metavar="PLUGINS",
        help="also this tree with these plugins (comma-separated) disabled: an estimate of what making "
        "their import lazy would gain",
    )
    options = parser.parse_args()
    bases = [_baseline_tree(ref) for ref in options.baseline or [DEFAULT_BASELINE]]
    with LlmServer() as server, tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        root = Path(tmp)
        env = _environment(root)
        runs: dict[str, _Run] = {"this tree": _Run(ROOT, env)}
        if options.estimate_without:
            disabled = f"{env['DSH_DISABLE_PLUGINS']},{options.estimate_without}".strip(",")
            runs[f"without {options.estimate_without}"] = _Run(ROOT, {**env, "DSH_DISABLE_PLUGINS": disabled})
        baselines = []
        for base in bases:
            label = _label(base)
            baselines.append(label)
            runs[label] = _Run(base, env)
        (root / "home").mkdir()
        project = _project(root, server.base_url)
        probes: dict[str, dict[str, Callable[[], _Sample]]] = {}
        for label, (tree, run_env) in runs.items():
            python = tree / ".venv" / "bin" / "python"
            dsh = tree / ".venv" / "bin" / "dsh"
            probes[label] = {
                "python -c pass": partial(_timed, [str(python), "-c", "pass"], run_env, project),
                "import dsh_cli": partial(_timed, [str(python), "-c", "import dsh_cli"], run_env, project),
                "dsh run: first byte": partial(_first_byte, dsh, run_env, project, server),
            }
        for measures in probes.values():  # warm up: compile the bytecode, fill the OS caches
            for probe in measures.values():
                probe()
        labels = list(probes)
        samples: dict[tuple[str, str], list[_Sample]] = {}
        for number in range(options.rounds):
            shift = number % len(labels)  # each round starts with the next tree
            for label in labels[shift:] + labels[:shift]:
                for name, probe in probes[label].items():
                    samples.setdefault((label, name), []).append(probe())
        _report(samples, labels, baselines, options.rounds, options.budget)
        if options.breakdown:
            _breakdown(runs, project, server, max(3, options.rounds // 3))


def _report(
    samples: Mapping[tuple[str, str], list[_Sample]],
    labels: list[str],
    baselines: list[str],
    rounds: int,
    budget: float,
) -> None:
    print(f"dsh startup, {rounds} rounds interleaved (the trees' order rotating), ms")
    print("  wall: best [median]; cpu: the child's user + system, median [best]")
    width = max(len(label) for label in labels)
    names = ("python -c pass", "import dsh_cli", "dsh run: first byte")
    for name in names:
        for label in labels:
            values = samples[(label, name)]
            wall = [sample.wall for sample in values]
            cpu = [sample.cpu for sample in values]
            print(
                f"  {name:<22} {label:<{width}}  wall {min(wall) * 1e3:7.1f} [{statistics.median(wall) * 1e3:7.1f}]"
                f"  cpu {statistics.median(cpu) * 1e3:7.1f} [{min(cpu) * 1e3:7.1f}]"
            )
    for name in names[1:]:
        print(f"\n  {name}: this tree / baseline, per round (lower quartile, median, upper quartile)")
        for label in labels:
            if label in baselines:
                continue
            for baseline in baselines:
                mine, theirs = samples[(label, name)], samples[(baseline, name)]
                cpu = _quartiles([a.cpu / b.cpu for a, b in zip(mine, theirs, strict=True)])
                wall = _quartiles([a.wall / b.wall for a, b in zip(mine, theirs, strict=True)])
                # net: what dsh adds to the interpreter's start (python -c pass) in each tree
                net_mine = statistics.median(a.cpu for a in mine) - statistics.median(
                    a.cpu for a in samples[(label, "python -c pass")]
                )
                net_theirs = statistics.median(b.cpu for b in theirs) - statistics.median(
                    b.cpu for b in samples[(baseline, "python -c pass")]
                )
                # below a millisecond the difference is the interpreter's noise, not dsh
                net = f"{net_mine / net_theirs:.3f}" if net_theirs > 1e-3 and net_mine > 0 else "n/a"
                verdict = "within" if cpu[1] <= budget else "OVER"
                print(
                    f"    {label} / {baseline}: cpu {cpu[0]:.3f} {cpu[1]:.3f} {cpu[2]:.3f}"
                    f" (net of python -c pass {net}); wall {wall[0]:.2f} {wall[1]:.2f} {wall[2]:.2f}"
                    f"  -> {verdict} the {budget} budget (median cpu ratio)"
                )


if __name__ == "__main__":
    main()
