"""Placeholder: being written (replaced before commit)."""


class LlmPlugin:
    name = "llm_runtime"
