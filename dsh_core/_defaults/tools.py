"""Placeholder: being written (replaced before commit)."""


class ToolsPlugin:
    name = "tools"
