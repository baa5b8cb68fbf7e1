"""The error tree of dsh: one small hierarchy, each class under the stdlib error callers already catch.

DshError
  + PluginError(DshError, RuntimeError)          .plugin
    - MissingServiceError(PluginError, AttributeError)  .service, .providers
    - DependencyCycleError(PluginError)          .plugins
  + ConfigError(DshError, ValueError)            .source, .path
  + EventDataError(DshError, ValueError)         .event_type, .field, .seq
  + VocabularyError(DshError, ValueError)        .field (malformed JSON for a value class)
  + ScopeDisposedError(DshError, RuntimeError)   registering through a disposed context
  + DuplicateRegistrationError(DshError, ValueError)
  + AgentDisposedError(DshError, RuntimeError)
  + ToolError(DshError)                          a tool body answering the model with an error (dsh_core.tools)
"""

from __future__ import annotations

__all__ = [
    "AgentDisposedError",
    "ConfigError",
    "DependencyCycleError",
    "DshError",
    "DuplicateRegistrationError",
    "EventDataError",
    "MissingServiceError",
    "PluginError",
    "ScopeDisposedError",
    "VocabularyError",
]


class DshError(Exception):
    """Base of every error dsh raises on purpose."""


class PluginError(DshError, RuntimeError):
    """A plugin could not be loaded, ordered or started."""

    def __init__(self, message: str, *, plugin: str | None = None) -> None:
        super().__init__(message)
        self.plugin = plugin


class MissingServiceError(PluginError, AttributeError):
    """A required service is provided by no loaded plugin (also raised by ``ctx.<service>``)."""

    def __init__(
        self, message: str, *, plugin: str | None = None, service: str, providers: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, plugin=plugin)
        self.service = service
        self.providers = providers


class DependencyCycleError(PluginError):
    """Plugins need each other's services in a circle, so no start order exists."""

    def __init__(self, message: str, *, plugins: tuple[str, ...]) -> None:
        super().__init__(message, plugin=plugins[0] if plugins else None)
        self.plugins = plugins


class ConfigError(DshError, ValueError):
    """Configuration that does not fit a plugin's ``Config`` class."""

    def __init__(self, message: str, *, source: str = "<config>", path: str = "") -> None:
        super().__init__(message)
        self.source = source
        self.path = path


class EventDataError(DshError, ValueError):
    """Session event data that is not lossless JSON, or an append the session refuses.

    ``field`` names the offending field (``data.turn``) when one does; ``seq`` is the event's
    place in a log being checked (a seed, a stored log), ``None`` for a live append.
    """

    def __init__(self, message: str, *, event_type: str, field: str = "", seq: int | None = None) -> None:
        super().__init__(message)
        self.event_type = event_type
        self.field = field
        self.seq = seq


class VocabularyError(DshError, ValueError):
    """JSON that does not describe a valid value of the vocabulary; ``field`` says where."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class ScopeDisposedError(DshError, RuntimeError):
    """Something was registered through a context that is already disposed."""


class DuplicateRegistrationError(DshError, ValueError):
    """A name that must be unique (a provider, a service, a factory) is already taken."""


class AgentDisposedError(DshError, RuntimeError):
    """The agent has been disposed; create or resume a new one."""
