"""The full JSON Schema validator, and ``jsonschema`` with it, loaded only when a schema first needs it.

``import jsonschema`` costs about a fifth of ``import dsh_core`` (issue 18: time to first byte of
``dsh run``). The fast acceptor (``_schema_check``) vouches for the common tool's schema and
arguments, so most runs never need the full validator: it is imported when a schema outside the
acceptor's subset is registered, or when arguments fail the acceptor and must be explained.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import jsonschema.exceptions
    import jsonschema.protocols

__all__ = ["LazyValidator", "SchemaValidator", "check_schema"]


class SchemaValidator(Protocol):
    """What argument checking needs of a validator; a ``jsonschema`` validator is one."""

    def iter_errors(self, instance: Any) -> Iterable[jsonschema.exceptions.ValidationError]: ...


def check_schema(name: str, schema: dict[str, Any]) -> None:
    """Check that tool ``name``'s parameters are a valid JSON Schema (of the draft its ``$schema`` names).

    :raises ValueError: naming the tool and the problem.
    """
    import jsonschema.exceptions  # deferred: see the module docstring
    import jsonschema.validators

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        msg = f"tool {name!r}: its parameters are not a valid JSON Schema: {exc.message}"
        raise ValueError(msg) from exc


class LazyValidator:
    """The ``jsonschema`` validator of one (checked) schema, built on the first ``iter_errors``."""

    __slots__ = ("_schema", "_validator")

    def __init__(self, schema: dict[str, Any]) -> None:
        self._schema = schema
        self._validator: jsonschema.protocols.Validator | None = None

    def iter_errors(self, instance: Any) -> Iterable[jsonschema.exceptions.ValidationError]:
        if self._validator is None:
            import jsonschema.validators  # deferred: see the module docstring

            self._validator = jsonschema.validators.validator_for(self._schema)(self._schema)
        return self._validator.iter_errors(instance)
