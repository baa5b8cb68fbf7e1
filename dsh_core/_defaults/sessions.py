"""Placeholder: being written (replaced before commit)."""


class SessionsPlugin:
    name = "sessions"
