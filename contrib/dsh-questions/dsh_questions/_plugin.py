"""The ``questions`` plugin: the ``ask_user`` tool over the core's logged questions, and answers that arrive after a restart."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from dsh_core import ToolError, ToolExecution, tool
from dsh_core.services.questions import NobodyToAskError, ask_questions
from dsh_core.vocabulary import thaw_json

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["Question", "QuestionsPlugin"]


@attrs.frozen(kw_only=True)
class Question:
    """One question: a short id you choose, the question, the options to choose from (none: the user
    types an answer), and whether several options may be chosen."""

    id: str
    question: str
    options: list[str] | None = None
    multi_select: bool = False


class QuestionsPlugin:
    """Gives agents ``ask_user``; its questions wait as logged records, answered by whoever answers first.

    A question still waiting when its process died parks the turn (like an approval): after a
    resume it is pending again, and once answered the call returns the answers and the turn goes on.
    """

    name = "questions"
    requires: ClassVar[tuple[str, ...]] = ("tools", "sessions")
    uses: ClassVar[tuple[str, ...]] = ("question",)

    def __init__(self) -> None:
        self._ctx: Context | None = None

    def start(self, ctx: Context) -> None:
        self._ctx = ctx

        @tool(read_only=True)
        async def ask_user(questions: list[Question], *, execution: ToolExecution) -> str:
            """Ask the user one or more questions and wait for the answers: when a choice is theirs to
            make (an approach, a name, a trade-off) or the request is ambiguous. Give options when there
            are a few likely answers. Returns JSON {"answers": {question id: the chosen option(s) or
            the user's text}}.

            Args:
                questions: the questions, each with an id you choose
            """
            session = ctx.sessions.get(execution.session_id) if execution.session_id else None
            if session is None:
                msg = "ask_user asks the user of an agent's session, and this call belongs to none"
                raise ToolError(msg)
            asked = [_as_json(question) for question in questions]
            try:
                answered = await ask_questions(ctx, session, execution, asked)
            except NobodyToAskError:
                msg = (
                    "nobody can be asked here (no terminal or page is attached to this session); "
                    "decide for yourself, and say what you assumed"
                )
                raise ToolError(msg) from None
            except (TypeError, ValueError) as exc:
                raise ToolError(str(exc)) from None
            return json.dumps({"answers": thaw_json(answered.answers)}, ensure_ascii=False)

        ctx.tools.register(ask_user)


def _as_json(question: Question) -> dict[str, Any]:
    found: dict[str, Any] = {"id": question.id, "question": question.question}
    if question.options is not None:
        found["options"] = list(question.options)
    if question.multi_select:
        found["multi_select"] = True
    return found
