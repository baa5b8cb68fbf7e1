"""The error a tool body raises to answer the model with an error result."""

from __future__ import annotations

from dsh_core.vocabulary._errors import DshError

__all__ = ["ToolError"]


class ToolError(DshError):
    """Raised by a tool body to give the model an error result instead of an answer.

    The tool runtime turns it into a ``ToolResult`` with ``error_code="TOOL_ERROR"`` whose text is
    ``"Error: "`` plus the message, as written: say what went wrong and what to do instead. It is
    an expected outcome, not a bug, so no traceback is logged and the message is not wrapped in
    the tool's name and the exception's type (any other exception from a body is, and means a bug).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
