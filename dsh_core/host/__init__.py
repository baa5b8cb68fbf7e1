"""The plugin host: the harness that loads plugins, the dispatcher that runs events, contexts and their scopes, plugin configuration."""

from ._config import load_config_file as load_config_file
from ._config import structure_config as structure_config
from ._context import INHERIT as INHERIT
from ._context import Context as Context
from ._context import Disposer as Disposer
from ._context import Effect as Effect
from ._context import Services as Services
from ._dispatch import Dispatcher as Dispatcher
from ._dispatch import Registration as Registration
from ._dispatch import check_guards as check_guards
from ._dispatch import new_plugin_manager as new_plugin_manager
from ._harness import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._harness import ROOT_DISTRIBUTION as ROOT_DISTRIBUTION
from ._harness import Harness as Harness
from ._harness import PluginInfo as PluginInfo
from ._harness import installed_plugins as installed_plugins
from ._markers import PROJECT as PROJECT
from ._markers import EventMode as EventMode
from ._markers import EventSpec as EventSpec
from ._markers import event_name_for as event_name_for
from ._markers import hookimpl as hookimpl
from ._markers import hookspec as hookspec
from ._markers import spec_of as spec_of

__all__ = [
    "ENTRY_POINT_GROUP",
    "INHERIT",
    "PROJECT",
    "ROOT_DISTRIBUTION",
    "Context",
    "Dispatcher",
    "Disposer",
    "Effect",
    "EventMode",
    "EventSpec",
    "Harness",
    "PluginInfo",
    "Registration",
    "Services",
    "check_guards",
    "event_name_for",
    "hookimpl",
    "hookspec",
    "installed_plugins",
    "load_config_file",
    "new_plugin_manager",
    "spec_of",
    "structure_config",
]
