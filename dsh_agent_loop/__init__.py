"""Placeholder: being written."""


class AgentLoopPlugin:
    pass
