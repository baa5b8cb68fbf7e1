"""dsh: an extensible LLM agent harness — the vocabulary, the plugin host and the core services."""

from ._context import Context as Context
from ._context import Disposer as Disposer
from ._errors import AgentDisposedError as AgentDisposedError
from ._errors import ConfigError as ConfigError
from ._errors import DependencyCycleError as DependencyCycleError
from ._errors import DshError as DshError
from ._errors import DuplicateRegistrationError as DuplicateRegistrationError
from ._errors import EventDataError as EventDataError
from ._errors import MissingServiceError as MissingServiceError
from ._errors import PluginError as PluginError
from ._errors import ScopeDisposedError as ScopeDisposedError
from ._errors import VocabularyError as VocabularyError
from ._host import Harness as Harness
from ._markers import hookimpl as hookimpl
from ._markers import hookspec as hookspec
from ._signal import CancelSignal as CancelSignal

__all__ = [
    "AgentDisposedError",
    "CancelSignal",
    "ConfigError",
    "Context",
    "DependencyCycleError",
    "Disposer",
    "DshError",
    "DuplicateRegistrationError",
    "EventDataError",
    "Harness",
    "MissingServiceError",
    "PluginError",
    "ScopeDisposedError",
    "VocabularyError",
    "hookimpl",
    "hookspec",
]
