"""The API's errors: one exception, and the JSON body every ``/api/*`` error has (SPEC §10.2).

ApiError(Exception)     .status, .code
  - its status is one of 400, 401, 404, 405, 409, 413, 422 (and 500 for a bug of ours)

The body is ``{"error": {"code": ..., "message": ...}}``; ``code`` is a short snake_case word
(``unauthorized``, ``not_found``, ``conflict``, ``payload_too_large``, ``bad_request``,
``invalid``, ``method_not_allowed``, ``internal``), ``message`` says what was wrong and where.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from starlette.responses import JSONResponse

__all__ = ["CODES", "ApiError", "error_response"]

#: The ``code`` of each status the API answers with.
CODES: Final[Mapping[int, str]] = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    422: "invalid",
    500: "internal",
}


class ApiError(Exception):
    """A request the API refuses; becomes an ``error_response`` of ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = CODES.get(status, "error")
        self.message = message


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The JSON error body of ``status``."""
    body = {"error": {"code": CODES.get(status, "error"), "message": message}}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))
