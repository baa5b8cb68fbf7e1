"""How fast ``dsh`` starts: ``dsh run`` to its first byte of output, and ``import dsh_cli``, against a baseline.

Prints, for this tree and a baseline tree measured in the same run (runs interleaved, best of N):
``python -c pass``; ``python -c "import dsh_cli"``; and the time from starting ``dsh run "hi"`` to
the first byte of its answer on stdout, the model being an instant one (a loopback
OpenAI-compatible server, ``dsh_openai.testing.LlmServer``, that answers at once, so what is
measured is dsh: imports, configuration, plugin starts, session creation, the request, the
stream). Each figure is also given as a ratio to ``python -c pass`` and to the baseline.

Budget (issue 18): this tree's first byte and import time each at most half of the baseline's.

The baseline is a git worktree of ``--baseline REF`` (default: main before the CLI's startup work,
the parent of the commit that added ``dsh_cli/_commands.py``) under ``/tmp``, with its own venv
built by its Makefile on first use (``make .venv/.installed``; later runs reuse it). Both trees
run with compiled bytecode (``PYTHONPYCACHEPREFIX`` in a temporary directory, warmed first), as
an installed dsh would.

    python benchmarks/cli_startup.py [--rounds 15] [--baseline REF]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dsh_openai.testing import LlmServer, chunk

ROOT = Path(__file__).resolve().parent.parent


def _default_baseline() -> str:
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "contrib/dsh-cli/dsh_cli/_commands.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return f"{added[-1]}^" if added else "HEAD"


def _baseline_tree(ref: str) -> Path:
    """A worktree of ``ref`` with its own venv (built once, then reused)."""
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
    env.update(
        HOME=str(root / "home"),
        XDG_CONFIG_HOME=str(root / "home" / ".config"),
        XDG_STATE_HOME=str(root / "home" / ".local" / "state"),
        PYTHONPYCACHEPREFIX=str(root / "pycache"),
    )
    return env


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start


def _first_byte(dsh: Path, env: dict[str, str], cwd: Path, server: LlmServer) -> float:
    server.stream(chunk(content="hello"), chunk(finish="stop"))
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
    if process.wait() != 0 or first != b"h":
        msg = f"{dsh} run failed (status {process.returncode}, first byte {first!r})"
        raise RuntimeError(msg)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--baseline", default=None, help="the git ref to compare with")
    options = parser.parse_args()
    ref = options.baseline or _default_baseline()
    ref = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    trees = {"this tree": ROOT, f"baseline {ref}": _baseline_tree(ref)}
    with LlmServer() as server, tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        root = Path(tmp)
        env = _environment(root)
        (root / "home").mkdir()
        project = _project(root, server.base_url)
        probes: dict[str, dict[str, Callable[[], float]]] = {}
        for label, tree in trees.items():
            python = tree / ".venv" / "bin" / "python"
            dsh = tree / ".venv" / "bin" / "dsh"
            probes[label] = {
                "python -c pass": lambda p=python: _timed([str(p), "-c", "pass"], env, project),
                "import dsh_cli": lambda p=python: _timed([str(p), "-c", "import dsh_cli"], env, project),
                "dsh run: first byte": lambda d=dsh: _first_byte(d, env, project, server),
            }
        for measures in probes.values():  # warm up: compile the bytecode, fill the OS caches
            for probe in measures.values():
                probe()
        samples: dict[tuple[str, str], list[float]] = {}
        for _ in range(options.rounds):
            for label, measures in probes.items():
                for name, probe in measures.items():
                    samples.setdefault((label, name), []).append(probe())
    print(f"dsh startup, best of {options.rounds} (median in brackets), runs interleaved")
    best = {key: min(values) for key, values in samples.items()}
    this, baseline = list(trees)
    for name in ("python -c pass", "import dsh_cli", "dsh run: first byte"):
        for label in trees:
            values = samples[(label, name)]
            ratio = f"  ({best[(label, name)] / best[(label, 'python -c pass')]:.1f}x python -c pass)"
            print(
                f"  {name:<22} {label:<28} {best[(label, name)] * 1e3:7.1f} ms"
                f"  [{statistics.median(values) * 1e3:7.1f}]{ratio if name != 'python -c pass' else ''}"
            )
        if name != "python -c pass":
            share = best[(this, name)] / best[(baseline, name)]
            verdict = "within" if share <= 0.5 else "OVER"
            print(f"  {'':<22} this tree / baseline: {share:.2f}  ({verdict} the 0.5 budget)")


if __name__ == "__main__":
    main()
