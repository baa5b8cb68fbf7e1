"""Prices of models the table gives none for, from the ``genai-prices`` registry (its data ships in the package).

Imported only when a price is asked for and the table has none (the registry costs ~0.3 s to
import). The provider is found by its name (``deepseek``, ``openai``, ...), else by its API URL;
never guessed from the model name, so a local server's model is not priced as a hosted one. The
price is the registry's at the time of the look-up (some providers' prices change with the date
or the hour), and the registry's currency is US dollars.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import urllib.parse
from decimal import Decimal

from dsh_core.llm import Prices

__all__ = ["registry_prices"]

logger = logging.getLogger("dsh.openai")


def _per_million(value: object) -> float | None:
    """A registry price as a float: a plain price, or a tiered price's base rate."""
    if isinstance(value, Decimal | int | float):
        return float(value)
    base = getattr(value, "base", None)  # TieredPrices: the rate below the first tier
    return float(base) if isinstance(base, Decimal | int | float) else None


def _is_local(base_url: str) -> bool:
    """A server on this machine or a private network: no registry knows what it charges."""
    host = urllib.parse.urlsplit(base_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def registry_prices(provider: str, base_url: str, model: str) -> Prices | None:
    """The registry's prices of ``model`` at ``provider`` (or at ``base_url``), or ``None``.

    A local or private server is never looked up (nor is the registry imported for it).
    """
    if _is_local(base_url):
        return None
    try:
        from genai_prices import data_snapshot
    except ImportError:  # an installation without the registry: no prices, never a guess
        return None
    snapshot = data_snapshot.get_snapshot()
    for provider_id, api_url in ((provider, None), (None, base_url)):
        try:
            _, info = snapshot.find_provider_model(model, None, provider_id, api_url)
        except LookupError:
            continue
        try:
            price = info.get_prices(datetime.datetime.now(tz=datetime.UTC))
        except Exception:
            logger.debug("genai-prices has no usable price for %s/%s", provider, model, exc_info=True)
            return None
        input_price = _per_million(price.input_mtok)
        output_price = _per_million(price.output_mtok)
        if input_price is None or output_price is None:
            return None
        return Prices(input_price, output_price, _per_million(price.cache_read_mtok))
    return None
