"""What the model sees in place of a spilled output: its start and end, and how to read the rest."""

from __future__ import annotations

__all__ = ["preview"]


def preview(text: str, *, locator: str, size: int, chars: int) -> str:
    """The first two thirds and last third of ``chars`` characters of ``text``, between notes naming ``locator``.

    ``size`` is the text's length in UTF-8 bytes (what went over the limit).
    """
    head_chars = chars - chars // 3
    tail_chars = chars // 3
    head = text[:head_chars]
    tail = text[len(text) - tail_chars :] if tail_chars else ""
    cut = len(text) - len(head) - len(tail)
    return (
        f"[This output is {size} bytes ({len(text)} characters), too large to show whole: its start and "
        f'end are shown. read_output with locator "{locator}" returns any part of it exactly '
        "(offset and limit count characters).]\n"
        f"{head}\n"
        f"[... {cut} characters not shown (from offset {len(head)}); "
        f'read them with read_output {{"locator": "{locator}", "offset": {len(head)}}} ...]\n'
        f"{tail}"
    )
