"""Placeholder: being written (replaced before commit)."""


class AgentsPlugin:
    name = "agents"
