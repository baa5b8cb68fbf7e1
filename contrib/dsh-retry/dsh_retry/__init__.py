"""dsh plugin that retries failed model requests: retryable codes only, backoff with jitter, retry-after honoured.

Load the ``retry`` plugin (entry point) and tune it in ``[plugins.retry]``.
"""

from ._config import RetryConfig as RetryConfig
from ._plugin import RetryPlugin as RetryPlugin

__all__ = ["RetryConfig", "RetryPlugin"]
