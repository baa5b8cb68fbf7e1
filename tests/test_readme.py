"""The README's promises: what ``make test`` needs, and where each figure of "What it costs" comes from."""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: ``| a text step | 30 µs | 31 µs | `benchmarks/loop.py`: text step |``: the last cell names the
#: script and the label under which it prints the row's figures
SOURCE = re.compile(r"^`(?P<script>benchmarks/[\w.]+\.py)`(?: [\w-]+)*: (?P<label>.+)$")


def costs_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## What it costs")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table_rows(section: str) -> list[list[str]]:
    """The body rows of the section's table, as stripped cells."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert len(lines) > 2, "the section has no table"
    assert set(lines[1].replace("|", "").strip()) <= set("-: "), lines[1]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[2:]]


def bench_glob() -> str:
    """The scripts ``make bench`` runs, as the glob of its recipe."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile[makefile.index("\nbench:") :]
    found = re.search(r"for script in (\S+); do \$\(BIN\)/python \$\$script", recipe)
    assert found, "make bench runs no benchmark script"
    return found.group(1)


def test_every_figure_of_the_cost_table_names_the_script_that_prints_it() -> None:
    """Each row ends with the script ``make bench`` runs and the label it prints the figure under."""
    rows = table_rows(costs_section())
    pattern = bench_glob()
    for row in rows:
        *figures, source = row[1:]
        # a number with its unit, or "—": not measured on that backend
        assert all(re.search(r"\d", figure) or figure == "—" for figure in figures), row
        assert any(figure != "—" for figure in figures), row
        named = SOURCE.match(source)
        assert named, f"{row[0]!r} does not name the script that printed it: {source!r}"
        script = named.group("script")
        assert (ROOT / script).is_file(), f"{row[0]!r}: {script} does not exist"
        assert fnmatch.fnmatch(script, pattern), f"{row[0]!r}: make bench does not run {script} ({pattern})"
        assert named.group("label") in (ROOT / script).read_text(encoding="utf-8"), (
            f"{row[0]!r}: {script} prints no figure labelled {named.group('label')!r}"
        )


def test_the_cost_table_says_when_and_on_what_it_was_measured() -> None:
    """The figures carry the date of their run and the machine it ran on."""
    section = costs_section()
    assert re.search(r"[Mm]easured on \d{4}-\d{2}-\d{2}\b", section), section
    assert re.search(r"\b\d+-core\b", section), section
    assert "make bench" in section


def make_test_dry_run() -> subprocess.CompletedProcess[str]:
    """``make -n test``: what ``make test`` would do, stopping where it would stop, nothing built.

    As a top-level make, even when the suite itself runs under ``make test``.
    """
    env = {key: value for key, value in os.environ.items() if key not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30, check=False
    )


@pytest.mark.parametrize(("program", "package"), [("bwrap", "bubblewrap"), ("rg", "ripgrep"), ("ip", "iproute2")])
def test_make_test_stops_at_once_naming_a_missing_package(
    program: str, package: str, path_without: Callable[..., str]
) -> None:
    """Without a program the suite runs for real, ``make test`` builds nothing and says in one line what to install."""
    path_without(program)
    done = make_test_dry_run()
    assert done.returncode != 0
    assert done.stdout == ""  # not even the venv
    (line,) = done.stderr.splitlines()
    named = re.search(r"make test needs (?P<names>[\w -]+), .* apt-get install (?P=names) \(Debian/Ubuntu\)", line)
    assert named, line
    assert package in named.group("names").split(), line


def test_make_test_runs_when_every_package_is_there(
    path_without: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every program present (stand-ins here), ``make test`` goes on to pytest, mypy and ruff."""
    farm = Path(path_without())
    for program in ("bwrap", "rg", "ip"):
        if not (farm / program).exists():
            (farm / program).write_text("#!/bin/sh\nexit 0\n")
            (farm / program).chmod(0o755)
    bindir = tmp_path / "postgres-bin"
    bindir.mkdir()
    for program in ("initdb", "postgres"):
        (bindir / program).write_text("")
    monkeypatch.setenv("DSH_POSTGRES_BINDIR", str(bindir))
    done = make_test_dry_run()
    assert done.returncode == 0, done.stderr
    assert "-m pytest" in done.stdout
    assert os.environ["PATH"] == str(farm)
