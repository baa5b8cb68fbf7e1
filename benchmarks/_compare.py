"""Run a benchmark script against this tree and a baseline tree in the same run, and print ratios.

``python benchmarks/loop.py --against /tmp/base`` (the baseline is any checkout, e.g. made with
``git worktree add /tmp/base main~3``) runs the script's measurements in child processes, this tree
and the baseline alternately, each importing ``dsh_core`` and ``dsh_agent_loop`` from its own tree
and its contrib plugins from its own ``contrib/`` (``PYTHONPATH``, and the tree's own ``.venv`` when
it has one: a tree whose layout differs has entry points of its own); each figure is the best of the rounds, and the ratio is this tree over the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", type=Path, help="a baseline tree to compare with (its own checkout)")
    parser.add_argument("--rounds", type=int, default=3, help="child runs per tree (best one counts)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    return parser.parse_args()


def _python_of(tree: Path) -> str:
    """The tree's own venv when it has one (its entry points name its own modules), else ours."""
    own = tree / ".venv" / "bin" / "python"
    return str(own) if own.exists() else sys.executable


def _path_of(tree: Path, shims: Path) -> str:
    """``PYTHONPATH`` for a child of ``tree``: a tree without a venv of its own (run with ours, whose
    entry points name this tree's modules) gets a dist-info shim with its own entry points first."""
    if tree == HERE or (tree / ".venv" / "bin" / "python").exists():
        return str(tree)
    from loop import entry_point_shim  # the shim benchmarks/loop.py builds for its baseline

    shim = entry_point_shim(tree, shims / tree.name)
    plugins = sorted(str(folder) for folder in (tree / "contrib").glob("*") if folder.is_dir())  # its own, not ours
    return os.pathsep.join((str(shim), str(tree), *plugins))


def run_against(script: str, baseline: Path, rounds: int) -> None:
    """Print each figure for this tree and the baseline, best of ``rounds`` alternating child runs."""
    best: dict[str, dict[str, float]] = {"this": {}, "base": {}}
    trees = {"this": HERE, "base": baseline.resolve()}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-shim-") as shims:
        paths = {label: _path_of(tree, Path(shims)) for label, tree in trees.items()}
        _run_rounds(script, trees, paths, rounds, best)
    _print_against(trees, best, rounds)


def _run_rounds(
    script: str, trees: dict[str, Path], paths: dict[str, str], rounds: int, best: dict[str, dict[str, float]]
) -> None:
    for _ in range(rounds):
        for label, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": paths[label]}
            done = subprocess.run(
                [_python_of(tree), script, "--json"], env=env, cwd="/", capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                sys.exit(f"{script} failed under {tree}:\n{done.stderr}")
            figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
            for key, value in figures.items():
                best[label][key] = min(value, best[label].get(key, float("inf")))


def _print_against(trees: dict[str, Path], best: dict[str, dict[str, float]], rounds: int) -> None:
    print(f"this tree {HERE}  vs  baseline {trees['base']}  (best of {rounds} alternating runs, us)")
    width = max(len(key) for key in best["this"])
    for key, value in best["this"].items():
        base = best["base"].get(key)
        ratio = f"{value / base:6.2f}x" if base else "     -"
        shown = f"{base:10.2f}" if base is not None else "         -"
        print(f"  {key:<{width}}  {value:10.2f}  {shown}  {ratio}")


def main(script: str, measure: Callable[[], dict[str, float]], show: Callable[[dict[str, float]], None]) -> None:
    """The benchmark's entry point: ``--against`` compares, ``--json`` is a child's run, else print."""
    args = parse_args()
    if args.against is not None:
        run_against(script, args.against, args.rounds)
    elif args.json:
        print(json.dumps(measure()))
    else:
        show(measure())
