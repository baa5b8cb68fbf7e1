"""``Prices`` on ``ModelInfo``: checked values, the cost of a usage, lossless JSON."""

from __future__ import annotations

import pytest

from dsh_core.llm import ModelInfo, Prices, Usage


def test_cost_prices_uncached_cached_and_output_tokens_per_million() -> None:
    """Cached input tokens cost cached_input; the rest of the input costs input; output costs output."""
    prices = Prices(input=2.0, output=8.0, cached_input=0.5)
    usage = Usage(input_tokens=1_000_000, output_tokens=250_000, cache_read_tokens=400_000)
    assert prices.cost(usage) == pytest.approx(600_000 * 2.0 / 1e6 + 400_000 * 0.5 / 1e6 + 250_000 * 8.0 / 1e6)


def test_cached_input_defaults_to_the_input_price() -> None:
    """Without cached_input, cached tokens cost the same as any input token."""
    usage = Usage(input_tokens=1000, output_tokens=0, cache_read_tokens=900)
    assert Prices(input=3, output=1).cost(usage) == pytest.approx(0.003)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"input": -1, "output": 1}, ValueError),
        ({"input": 1, "output": float("nan")}, ValueError),
        ({"input": 1, "output": "2"}, TypeError),
        ({"input": True, "output": 1}, TypeError),
        ({"input": None, "output": 1}, TypeError),
        ({"input": 1, "output": 1, "cached_input": -0.1}, ValueError),
    ],
)
def test_bad_prices_are_refused(kwargs: dict[str, object], error: type[Exception]) -> None:
    """A negative, non-finite or non-number price is refused when it is made."""
    with pytest.raises(error):
        Prices(**kwargs)  # type: ignore[arg-type]


def test_model_info_carries_prices_through_json() -> None:
    """ModelInfo's JSON round-trips with and without prices; ints become floats."""
    priced = ModelInfo(1000, 100, Prices(1, 2, 0.25))
    assert ModelInfo.from_json(priced.to_json()) == priced
    assert priced.to_json()["prices"] == {"input": 1.0, "output": 2.0, "cached_input": 0.25}
    plain = ModelInfo(1000, 100)
    assert plain.prices is None
    assert "prices" not in plain.to_json()  # the JSON a model without prices always had
    assert ModelInfo.from_json(plain.to_json()) == plain


def test_model_info_refuses_prices_of_the_wrong_type() -> None:
    """prices must be a Prices (or None)."""
    with pytest.raises(TypeError):
        ModelInfo(1000, 100, {"input": 1, "output": 2})  # type: ignore[arg-type]
