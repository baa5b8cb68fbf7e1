"""dsh plugin with ``web_fetch`` (HTML as Markdown; only public addresses, checked hop by hop) and ``web_search``.

Load the ``web`` plugin (entry point) and tune it in ``[plugins.web]``. ``web_search`` goes to a
provider that another plugin supplies as the ``web_search`` service (a ``WebSearchProvider``);
with none loaded the tool is absent.
"""

from ._addresses import BlockedAddressError as BlockedAddressError
from ._addresses import blocked_reason as blocked_reason
from ._plugin import WebConfig as WebConfig
from ._plugin import WebPlugin as WebPlugin
from ._search import SearchHit as SearchHit
from ._search import WebSearchProvider as WebSearchProvider

__all__ = ["BlockedAddressError", "SearchHit", "WebConfig", "WebPlugin", "WebSearchProvider", "blocked_reason"]
