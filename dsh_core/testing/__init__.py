"""The test kit that ships with dsh: a scripted model and pytest fixtures for harness tests."""

from ._scripted import Reply as Reply
from ._scripted import ScriptedModel as ScriptedModel

__all__ = ["Reply", "ScriptedModel"]
