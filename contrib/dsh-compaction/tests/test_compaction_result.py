"""The ``compaction/summary`` event data: what a ``CompactionResult`` writes, byte for byte."""

from __future__ import annotations

import attrs
from dsh_compaction import CompactionResult

from dsh_core.llm import Usage
from dsh_core.vocabulary import dumps_json


def test_summary_data_keeps_its_shape() -> None:
    """Every fact but the summary text and its own seq, in this order (as written before the codec)."""
    result = CompactionResult(
        reason="threshold",
        turn=2,
        step=1,
        start=0,
        end=4,
        shadowed_seqs=(3, 5, 7),
        message_seq=9,
        summary_seq=10,
        tokens_before=900,
        tokens_after=100,
        context_window=1000,
        model="p/m",
        usage=Usage(10, 5),
        finish="stop",
        summary="s",
    )
    assert dumps_json(result.to_json()) == (
        '{"reason":"threshold","turn":2,"step":1,"start":0,"end":4,"shadowed_seqs":[3,5,7],"message_seq":9,'
        '"tokens_before":900,"tokens_after":100,"context_window":1000,"model":"p/m","usage":{"type":"usage",'
        '"input_tokens":10,"output_tokens":5,"cache_read_tokens":0,"cache_write_tokens":0,"reasoning_tokens":0},'
        '"finish":"stop"}'
    )
    idle = attrs.evolve(result, reason="manual", turn=None, step=None, usage=None).to_json()
    assert (idle["reason"], idle["turn"], idle["step"], idle["usage"]) == ("manual", None, None, None)
