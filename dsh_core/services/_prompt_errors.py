"""The errors of rendering a system prompt: each names the section, the reference and the way out.

PromptRenderError(DshError, ValueError)     .section, .reference
  - UnknownPromptVariableError              a {{name}} that no provider registered
  - MissingPromptValueError                 a registered variable whose provider returned None
  - MalformedPromptReferenceError           {{ }}, {{not a name}}, or a {{ never closed
"""

from __future__ import annotations

from dsh_core.vocabulary._errors import DshError

__all__ = [
    "MalformedPromptReferenceError",
    "MissingPromptValueError",
    "PromptRenderError",
    "UnknownPromptVariableError",
]


class PromptRenderError(DshError, ValueError):
    """A section's text cannot be rendered; ``section`` and ``reference`` say where."""

    def __init__(self, message: str, *, section: str, reference: str) -> None:
        super().__init__(message)
        self.section = section
        self.reference = reference


class UnknownPromptVariableError(PromptRenderError):
    """A ``{{name}}`` reference to a variable that no provider registered."""


class MissingPromptValueError(PromptRenderError):
    """A ``{{name}}`` reference to a variable whose provider gave no value for this assembly."""


class MalformedPromptReferenceError(PromptRenderError):
    """Text between ``{{`` and ``}}`` that is not a variable name, or a ``{{`` never closed."""
