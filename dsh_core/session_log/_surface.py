"""The surface operation a model-visible log event carries: append itself, or replace a span.

The *surface* is the list of model-visible entries that ``derive_messages()`` folds into
messages. A model-visible event may carry ``data["surface"]``: ``{"op": "append"}`` (the default
when absent) or ``{"op": "replace", "start": i, "end": j}``, which replaces the surface entries
``i`` to ``j`` (end exclusive) with this event (compaction, pruning).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeAlias

import attrs

from dsh_core.session_log._spec import is_visible
from dsh_core.vocabulary._codec import ObjectCodec, json_field
from dsh_core.vocabulary._json import expect_object, refuse

if TYPE_CHECKING:
    from dsh_core.session_log._event import SessionEvent

__all__ = ["SurfaceOp", "SurfaceOpKind"]

SurfaceOpKind: TypeAlias = Literal["append", "replace"]


_validate_op: Final = attrs.validators.in_(("append", "replace"))


def _validate_bound(instance: SurfaceOp, attribute: attrs.Attribute[Any], value: object) -> None:
    # Hand-written: attrs' instance_of(int) admits a bool.
    if value is not None and (type(value) is not int or value < 0):
        msg = f"SurfaceOp.{attribute.name} must be an int >= 0 or None, got {value!r}"
        raise (ValueError if type(value) is int else TypeError)(msg)


@attrs.frozen
class SurfaceOp:
    """How a model-visible event changes the surface: append itself, or replace a span with itself.

    Build with ``SurfaceOp.append()`` or ``SurfaceOp.replace(start, end)``; ``end`` is exclusive
    and ``start <= end`` (an empty span inserts at ``start``).
    """

    op: SurfaceOpKind = attrs.field(default="append", validator=_validate_op)
    start: int | None = attrs.field(default=None, validator=_validate_bound)
    end: int | None = attrs.field(default=None, validator=_validate_bound)

    _APPEND: ClassVar[SurfaceOp]

    def __attrs_post_init__(self) -> None:
        if self.op == "append":
            if self.start is not None or self.end is not None:
                msg = "SurfaceOp(op='append') takes no start or end; use SurfaceOp.replace(start, end)"
                raise ValueError(msg)
        elif self.start is None or self.end is None or self.start > self.end:
            msg = f"SurfaceOp(op='replace') needs 0 <= start <= end, got start={self.start}, end={self.end}"
            raise ValueError(msg)

    @classmethod
    def append(cls) -> SurfaceOp:
        """The default: the event becomes the last surface entry."""
        return cls._APPEND

    @classmethod
    def replace(cls, start: int, end: int) -> SurfaceOp:
        """The event takes the place of surface entries ``start`` to ``end`` (exclusive)."""
        return cls("replace", start, end)

    @property
    def removed(self) -> int:
        """How many surface entries this operation removes."""
        return 0 if self.start is None or self.end is None else self.end - self.start

    def to_json(self) -> dict[str, Any]:
        return _SURFACE_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "surface") -> SurfaceOp:
        """Read a surface operation. :raises VocabularyError: naming the bad field."""
        op: SurfaceOp = _SURFACE_JSON.read(data, field)
        return op

    @classmethod
    def of(cls, event: SessionEvent) -> SurfaceOp | None:
        """The surface operation ``event`` carries: ``None`` for an event that is not model-visible.

        :raises VocabularyError: if the event's ``surface`` is malformed.
        """
        if not is_visible(event.type):
            return None
        raw = event.data.get("surface")
        if raw is None:
            return cls._APPEND
        return cls.from_json(expect_object(raw, "data.surface"), field="data.surface")


SurfaceOp._APPEND = SurfaceOp()


def _span_rule(field: str, op: str, start: int | None, end: int | None) -> None:
    """An append has no span; a replace has both ends, in order (as the constructor says)."""
    if op == "append":
        for key, bound in (("start", start), ("end", end)):
            if bound is not None:
                refuse(f"{field}.{key}", "unknown field; expected only op")
        return
    if start is None or end is None:
        refuse(f"{field}.{'start' if start is None else 'end'}", "missing")
    if start > end:
        refuse(f"{field}.end", f"a replaced span ends at or after its start ({start}), got {end}")


#: ``{"op": "append"}`` or ``{"op": "replace", "start": i, "end": j}``
_SURFACE_JSON: Final = ObjectCodec(
    SurfaceOp,
    fields={"op": json_field(required=True), "start": json_field(omit_default=True), "end": json_field(omit_default=True)},
    check=_span_rule,
)
_SURFACE_JSON.install_to_json()
