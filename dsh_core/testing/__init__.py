"""The test kit that ships with dsh: a scripted model and pytest fixtures for harness tests."""

from ._conformance import ConformanceScript as ConformanceScript
from ._conformance import ScriptedConformance as ScriptedConformance
from ._conformance import check_llm_adapter as check_llm_adapter
from ._scripted import Reply as Reply
from ._scripted import ScriptedModel as ScriptedModel

__all__ = ["ConformanceScript", "Reply", "ScriptedConformance", "ScriptedModel", "check_llm_adapter"]
