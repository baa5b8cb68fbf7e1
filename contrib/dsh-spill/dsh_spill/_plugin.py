"""The ``spill`` plugin: large tool results stored with the session, a preview for the model, and ``read_output``."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import attrs

from dsh_core import Text, ToolError, ToolExecution, ToolResult, hookimpl, tool

from ._preview import preview
from ._stored import SpillIndex, SpillStored

if TYPE_CHECKING:
    from dsh_core import Context
    from dsh_core.session_log import Session

__all__ = ["READ_OUTPUT", "SpillConfig", "SpillPlugin"]

#: the tool that reads spilled outputs back (its own results are never spilled)
READ_OUTPUT = "read_output"
#: characters ``read_output`` returns when the call gives no ``limit`` (32 KiB)
DEFAULT_READ_CHARS = 32 * 1024


def _positive(instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if type(value) is not int or value < 1:
        msg = f"{attribute.name} must be a whole number greater than 0, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class SpillConfig:
    """The ``[plugins.spill]`` table."""

    #: UTF-8 bytes of result text shown inline at most; a larger result is spilled
    max_inline_bytes: int = attrs.field(default=32 * 1024, validator=_positive)
    #: characters of a spilled result the preview shows (two thirds from its start, one from its end)
    preview_chars: int = attrs.field(default=3000, validator=_positive)

    def __attrs_post_init__(self) -> None:
        if self.preview_chars * 4 > self.max_inline_bytes:
            msg = (
                f"preview_chars ({self.preview_chars}) may take up to {self.preview_chars * 4} bytes, more than "
                f"max_inline_bytes ({self.max_inline_bytes}); lower preview_chars or raise max_inline_bytes"
            )
            raise ValueError(msg)


class SpillPlugin:
    """Keeps large tool outputs out of the context and within reach.

    Wraps every tool call (``tools/execute``, outermost): a result whose text is over
    ``max_inline_bytes`` is appended to the call's session as ``spill/stored {locator, call_id,
    tool, bytes, text}`` and replaced by a preview; the result's ``metadata["spilled"]`` is
    ``{locator, bytes}``, which the loop logs on the ``tool/result``. Because the text lives in the
    log, ``read_output`` finds it after a resume with any persistence backend. A call outside a
    session (no ``session_id``) is left whole.
    """

    name = "spill"
    requires: ClassVar[tuple[str, ...]] = ("tools", "sessions")
    Config = SpillConfig

    def __init__(self) -> None:
        self._config = SpillConfig()
        self._indexes: dict[str, SpillIndex] = {}
        self._ctx: Context | None = None

    def start(self, ctx: Context) -> None:
        if isinstance(ctx.config, SpillConfig):
            self._config = ctx.config
        self._ctx = ctx

        @tool(name=READ_OUTPUT, read_only=True, parallel_safe=True)
        def read_output(
            locator: str,
            offset: Annotated[int, {"minimum": 0}] = 0,
            limit: Annotated[int, {"minimum": 1}] = DEFAULT_READ_CHARS,
            *,
            execution: ToolExecution,
        ) -> str:
            """Read part of a tool output too large to be shown whole, exactly as the tool produced it.

            Args:
                locator: the locator its preview names
                offset: the first character to return, counting from 0
                limit: how many characters to return at most (default 32768)
            """
            session = self._session_of(execution)
            stored = None if session is None else self._index(session).find(session.events, locator)
            if stored is None:
                known = [] if session is None else self._index(session).locators()[-5:]
                hint = f" The locators of this session: {', '.join(known)}." if known else ""
                msg = f"there is no stored output with locator {locator!r}.{hint}"
                raise ToolError(msg)
            if offset > len(stored.text) or (offset == len(stored.text) and offset):
                msg = f"offset {offset} is past the end: that output has {len(stored.text)} characters"
                raise ToolError(msg)
            return stored.text[offset : offset + limit]

        ctx.tools.register(read_output)

    def _session_of(self, execution: ToolExecution) -> Session | None:
        if execution.session_id is None or self._ctx is None:
            return None
        return self._ctx.sessions.get(execution.session_id)

    def _index(self, session: Session) -> SpillIndex:
        index = self._indexes.get(session.id)
        if index is None:
            index = self._indexes[session.id] = SpillIndex()
        return index

    @hookimpl(tryfirst=True)
    async def dsh_tools_execute(
        self, execution: ToolExecution, call_next: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        """Spill a result over the limit; everything else passes untouched."""
        result = await call_next()
        if execution.name == READ_OUTPUT or not isinstance(result, ToolResult):
            return result
        texts = [block.text for block in result.content if isinstance(block, Text)]
        if not texts:
            return result
        text = "".join(texts)
        # Quick bound first: a str of n characters has at most 4n UTF-8 bytes.
        if len(text) * 4 <= self._config.max_inline_bytes:
            return result
        size = len(text.encode("utf-8", "surrogatepass"))
        if size <= self._config.max_inline_bytes:
            return result
        session = self._session_of(execution)
        if session is None:
            return result
        locator = uuid.uuid4().hex
        session.append(SpillStored(locator=locator, call_id=execution.call_id, tool=execution.name, bytes=size, text=text))
        shown = Text(preview(text, locator=locator, size=size, chars=self._config.preview_chars))
        images = tuple(block for block in result.content if not isinstance(block, Text))
        return attrs.evolve(
            result,
            content=(shown, *images),
            metadata={**result.metadata, "spilled": {"locator": locator, "bytes": size}},
        )

    @hookimpl
    def dsh_session_disposed(self, session: Any) -> None:
        self._indexes.pop(getattr(session, "id", ""), None)
