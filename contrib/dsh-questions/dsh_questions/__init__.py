"""dsh plugin with ``ask_user``: questions to the user as logged records, answered like approvals.

Load the ``questions`` plugin (entry point). Answer through ``agent.pending_questions()`` and
``await agent.answer_question(call_id, answers, by=...)``, or provide a ``question`` service (a
``dsh_core.services.questions.QuestionChannel``) that asks someone.
"""

from ._plugin import Question as Question
from ._plugin import QuestionsPlugin as QuestionsPlugin

__all__ = ["Question", "QuestionsPlugin"]
