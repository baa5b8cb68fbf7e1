"""The distributions this repository ships, read from its ``pyproject.toml`` files.

Run as a script with the package index's list of project names (a file with one name per line, or
a TSV whose first column is the name) to check every name of ours against the whole index::

    python tests/distributions.py pypi.tsv

``tests/test_distributions.py`` pins what these functions read, and checks it against a snapshot
of the index's ``dsh*`` names, so CI needs no list of the index.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
#: the folders besides the root whose ``pyproject.toml`` is a distribution of ours: the contrib plugins
#: and the test suite's own plugins (never published, but installed beside the others)
PROJECT_GLOBS = ("contrib/dsh-*", "tests/plugins/dsh-*")

_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def normalize(name: str) -> str:
    """The name as the package index compares it (PEP 503): lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement(text: str) -> str:
    """A requirement's project name with its extras, normalised, without versions or markers:
    ``"psycopg[binary]>=3.2"`` → ``"psycopg[binary]"``."""
    found = _REQUIREMENT_NAME.match(text)
    if found is None:
        msg = f"not a requirement: {text!r}"
        raise ValueError(msg)
    name, extras = normalize(found[1]), found[2]
    if not extras:
        return name
    return f"{name}[{','.join(sorted(normalize(extra.strip()) for extra in extras.split(',')))}]"


@attrs.frozen
class Distribution:
    """One ``pyproject.toml``: what a user installs, what it imports as, what it needs and registers."""

    name: str
    folder: str
    import_packages: tuple[str, ...]
    dependencies: frozenset[str]
    extras: Mapping[str, frozenset[str]]
    plugins: frozenset[str]
    commands: frozenset[str]


def read(folder: Path) -> Distribution:
    data = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
    project = data["project"]
    entry_points = project.get("entry-points", {})
    return Distribution(
        name=normalize(project["name"]),
        folder=folder.relative_to(ROOT).as_posix() if folder != ROOT else ".",
        import_packages=tuple(data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]),
        dependencies=frozenset(requirement(r) for r in project.get("dependencies", ())),
        extras={
            extra: frozenset(requirement(r) for r in needs)
            for extra, needs in project.get("optional-dependencies", {}).items()
        },
        plugins=frozenset(entry_points.get("dsh", {})),
        commands=frozenset(entry_points.get("dsh.commands", {})),
    )


def distributions() -> dict[str, Distribution]:
    """Every distribution of the repository by (normalised) name."""
    folders = [ROOT, *sorted(folder for pattern in PROJECT_GLOBS for folder in ROOT.glob(pattern))]
    found = [read(folder.resolve()) for folder in folders if (folder / "pyproject.toml").is_file()]
    return {each.name: each for each in found}


def our_names(found: Iterable[Distribution]) -> dict[str, str]:
    """Every name the package index must not hold, normalised: each distribution and import package's,
    with what it is."""
    names: dict[str, str] = {}
    for each in found:
        names[each.name] = f"distribution of {each.folder}"
        for package in each.import_packages:
            names.setdefault(normalize(package), f"import package of {each.folder}")
    return names


def index_names(listing: Path) -> set[str]:
    """The project names of a list of the package index (first column; a header line ``name`` is skipped)."""
    with listing.open(encoding="utf-8", errors="replace") as lines:
        return {normalize(line.split("\t", 1)[0].strip()) for line in lines} - {"name", ""}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/distributions.py INDEX-NAMES-FILE", file=sys.stderr)
        return 2
    taken = index_names(Path(argv[0]))
    ours = our_names(distributions().values())
    clashes = sorted(name for name in ours if name in taken)
    for name in clashes:
        print(f"{name}: {ours[name]}, is a project on the package index")
    print(f"{len(ours)} names checked against {len(taken)} projects: {len(clashes)} taken")
    return 1 if clashes else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
