"""The hookspec catalogue is the contract: names, modes, and the generated docs page."""

from __future__ import annotations

from pathlib import Path

from dsh_core import hookspecs
from dsh_core._catalog_doc import render_event_catalog
from dsh_core.host import event_name_for, spec_of

DOCS = Path(__file__).resolve().parent.parent / "docs" / "events.md"

EXPECTED_MODES = {
    "agent/created": "notify",
    "agent/disposed": "notify",
    "agent/session-start": "notify",
    "agent/status": "notify",
    "agent/queued": "notify",
    "agent/prompt-submit": "waterfall",
    "agent/session-prefix": "waterfall",
    "agent/turn-gate": "serial",
    "agent/pre-step": "serial",
    "agent/request": "waterfall",
    "agent/request-error": "waterfall",
    "agent/step-result": "waterfall",
    "agent/turn-continuation": "waterfall",
    "agent/turn-stop": "serial",
    "agent/turn-end": "notify",
    "agent/error": "notify",
    "session/created": "notify",
    "session/disposed": "notify",
    "session/event": "notify",
    "session/flush": "parallel",
    "tools/pre-execute": "waterfall",
    "tools/execute": "around",
    "tools/post-execute": "waterfall",
    "tools/result": "notify",
    "approval/answer": "serial",
}


def test_catalog_matches_spec_section_4() -> None:
    """Every event of SPEC §4 is declared once with its mode and its contract hook name."""
    specs = {spec.event: spec for spec in map(spec_of, vars(hookspecs).values()) if spec is not None}
    assert {event: spec.mode for event, spec in specs.items()} == EXPECTED_MODES
    for event, spec in specs.items():
        assert event_name_for(spec.hook) == event
    assert specs["agent/session-prefix"].value_arg == "prefix"
    assert specs["agent/request"].value_arg == "config"
    assert specs["agent/step-result"].value_arg == "message"
    assert specs["agent/created"].vetoes


def test_docs_events_page_is_current() -> None:
    """docs/events.md is regenerated whenever the hookspecs change."""
    assert DOCS.read_text(encoding="utf-8") == render_event_catalog(), (
        "docs/events.md is stale: run `python -m dsh_core events > docs/events.md`"
    )
