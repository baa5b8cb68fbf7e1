"""dsh plugin for background commands: ``bash {command, background: true}``, ``job_output``, ``job_wait``, ``job_kill``.

Load the ``jobs`` plugin (entry point) beside ``workspace``, and tune it in ``[plugins.jobs]``.
"""

from ._plugin import JobsConfig as JobsConfig
from ._plugin import JobsPlugin as JobsPlugin

__all__ = ["JobsConfig", "JobsPlugin"]
