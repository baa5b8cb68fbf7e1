"""Placeholder: being written (replaced before commit)."""


class SystemPromptPlugin:
    name = "system_prompt"
