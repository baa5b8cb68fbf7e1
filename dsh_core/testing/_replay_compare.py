"""Comparing a replayed log with its recording: event by event, fresh ids renamed, times ignored.

Two logs match when every event has the same type, seq and data. ``time`` is ignored. Strings that
look like fresh ids (32 lowercase hex digits, or the 8-4-4-4-12 form) match up to one consistent
renaming: the first time a recorded id meets a replayed one they are paired, and every later
meeting must keep that pairing both ways (so two recorded ids never become one, nor one two). An
id inside a longer string (a spilled output's preview naming its locator) is paired the same way,
the rest of the string being equal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from dsh_core.session_log._event import SessionEvent
from dsh_core.vocabulary._json import thaw_json

__all__ = ["Divergence", "IdRenaming", "first_divergence"]

_FRESH_ID: Final = re.compile(r"[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SHOWN: Final = 60


def _shown(value: object) -> str:
    text = json.dumps(thaw_json(value), ensure_ascii=False, sort_keys=True) if value is not _MISSING else "absent"
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _around_difference(left: str, right: str, before: int = 15) -> tuple[str, str]:
    """Both strings from a little before their first differing character, marked with an ellipsis."""
    same = next((i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b), min(len(left), len(right)))
    if same <= before:
        return left, right
    return "..." + left[same - before :], "..." + right[same - before :]


class _Missing:
    def __repr__(self) -> str:
        return "<absent>"


_MISSING: Final = _Missing()


@attrs.frozen
class Divergence:
    """Where the replay first differs from the recording.

    ``expected`` is the recorded event (``None``: the replay produced more), ``actual`` the
    replayed one (``None``: the replay stopped short); ``path`` the first field that differs
    (``type``, ``data.message.content[0].text``, ...) and the two values found there.
    """

    seq: int
    expected: SessionEvent | None
    actual: SessionEvent | None
    path: str = ""
    expected_value: Any = None
    actual_value: Any = None

    def describe(self) -> str:
        """One line: the seq, both event types and the first differing field."""
        if self.actual is None:
            assert self.expected is not None
            return f"seq {self.seq}: the replay stopped short; the recording has {self.expected.type} here"
        if self.expected is None:
            return f"seq {self.seq}: the replay produced {self.actual.type}, past the end of the recording"
        types = (
            self.expected.type
            if self.expected.type == self.actual.type
            else f"{self.expected.type} (recorded) != {self.actual.type} (replayed)"
        )
        left, right = self.expected_value, self.actual_value
        if isinstance(left, str) and isinstance(right, str):
            left, right = _around_difference(left, right)
        return f"seq {self.seq}: {types}: {self.path} differs: recorded {_shown(left)}, replayed {_shown(right)}"


class IdRenaming:
    """The pairing of recorded ids with replayed ones, kept consistent in both directions."""

    def __init__(self) -> None:
        self._forward: dict[str, str] = {}
        self._backward: dict[str, str] = {}

    def same(self, recorded: str, replayed: str) -> bool:
        if _FRESH_ID.fullmatch(recorded) and _FRESH_ID.fullmatch(replayed):
            return self._pair(recorded, replayed)
        if recorded == replayed:
            return True
        # Ids inside a longer text (a preview naming its locator): the rest must be equal, and
        # each id pair up like a whole one.
        if _FRESH_ID.split(recorded) != _FRESH_ID.split(replayed):
            return False
        pairs = zip(_FRESH_ID.findall(recorded), _FRESH_ID.findall(replayed), strict=True)
        return all(self._pair(left, right) for left, right in pairs)

    def _pair(self, recorded: str, replayed: str) -> bool:
        paired = self._forward.get(recorded)
        if paired is not None:
            return paired == replayed
        if replayed in self._backward:
            return False
        self._forward[recorded] = replayed
        self._backward[replayed] = recorded
        return True


def first_divergence(
    recorded: Sequence[SessionEvent], replayed: Sequence[SessionEvent], *, renaming: IdRenaming | None = None
) -> Divergence | None:
    """The first event where ``replayed`` differs from ``recorded``, or ``None`` when they match."""
    ids = renaming or IdRenaming()
    for seq in range(max(len(recorded), len(replayed))):
        expected = recorded[seq] if seq < len(recorded) else None
        actual = replayed[seq] if seq < len(replayed) else None
        if expected is None or actual is None:
            return Divergence(seq, expected, actual)
        if expected.type != actual.type:
            return Divergence(seq, expected, actual, "type", expected.type, actual.type)
        if expected.data == actual.data:  # most events (chunks) carry no fresh id
            continue
        found = _first_difference(expected.data, actual.data, "data", ids)
        if found is not None:
            path, left, right = found
            return Divergence(seq, expected, actual, path, left, right)
    return None


def _first_difference(left: Any, right: Any, path: str, ids: IdRenaming) -> tuple[str, Any, Any] | None:
    if type(left) is str and type(right) is str:
        return None if ids.same(left, right) else (path, left, right)
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        for key in sorted(set(left) | set(right)):
            here = f"{path}.{key}"
            if key not in left or key not in right:
                return here, left.get(key, _MISSING), right.get(key, _MISSING)
            found = _first_difference(left[key], right[key], here, ids)
            if found is not None:
                return found
        return None
    if _is_array(left) and _is_array(right):
        for index in range(max(len(left), len(right))):
            here = f"{path}[{index}]"
            if index >= len(left) or index >= len(right):
                return (
                    here,
                    left[index] if index < len(left) else _MISSING,
                    right[index] if index < len(right) else _MISSING,
                )
            found = _first_difference(left[index], right[index], here, ids)
            if found is not None:
                return found
        return None
    if type(left) is not type(right) or left != right:
        return path, left, right
    return None


def _is_array(value: object) -> bool:
    return isinstance(value, list | tuple)
