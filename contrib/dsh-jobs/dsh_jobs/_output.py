"""A job's output as the model reads it: the latest characters kept, and a cursor of what was read."""

from __future__ import annotations

import codecs

__all__ = ["JobOutput"]


class JobOutput:
    """Text decoded as it arrives; the last ``keep`` characters are kept, offsets count all of them."""

    __slots__ = ("_decoder", "_dropped", "_keep", "_text", "read_to")

    def __init__(self, keep: int) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._keep = keep
        self._text = ""
        self._dropped = 0
        #: the offset up to which the model has been shown the output
        self.read_to = 0

    @property
    def total(self) -> int:
        """Characters written so far."""
        return self._dropped + len(self._text)

    def feed(self, data: bytes, *, final: bool = False) -> None:
        self._text += self._decoder.decode(data, final)
        excess = len(self._text) - self._keep
        if excess > 0:
            self._text = self._text[excess:]
            self._dropped += excess

    def take(self, since: int | None, most: int) -> str:
        """Up to ``most`` characters from offset ``since`` (default: where the last read stopped); moves the cursor."""
        start = self.read_to if since is None else since
        shown = ""
        if start < self._dropped:
            shown = f"[... {self._dropped - start} earlier characters are no longer kept ...]\n"
            start = self._dropped
        piece = self._text[start - self._dropped : start - self._dropped + most]
        self.read_to = start + len(piece)
        if self.read_to < self.total:
            piece += f"\n[... {self.total - self.read_to} more characters: call job_output again ...]"
        return shown + piece

    def tail(self, most: int) -> str:
        """The last ``most`` characters (for the note that a job ended); does not move the cursor."""
        return self._text[-most:]
