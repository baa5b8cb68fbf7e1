"""Hypothesis strategies for JSON values and every value class of the vocabulary."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from dsh_core.session_log import SURFACE_EVENT_TYPES, SessionEvent, SurfaceOp
from dsh_core.vocabulary import (
    FAILURE_CODES,
    SOURCE_KINDS,
    Accept,
    Allow,
    Ask,
    AssistantMessage,
    Block,
    ContinuationDecision,
    ContinuationStop,
    Deny,
    Failure,
    Finish,
    Image,
    LlmCallConfig,
    LlmRequest,
    ModelInfo,
    Reasoning,
    ReasoningDelta,
    Reject,
    Retry,
    Text,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolResultMessage,
    Usage,
    UserMessage,
)

# ---------------------------------------------------------------------- JSON

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)

#: Plain JSON as ``json.loads`` would give it: dicts, lists and scalars.
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=20,
)
json_objects: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    st.text(max_size=8), json_values, max_size=5
)

ids = st.text(min_size=1, max_size=40)
names = st.text(min_size=1, max_size=20)
counts = st.integers(min_value=0, max_value=2**40)
seconds = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)

# ---------------------------------------------------------------------- content

texts = st.builds(Text, st.text())
reasonings = st.builds(Reasoning, st.text(), st.none() | st.text())
tool_calls = st.builds(ToolCall, ids, names, st.text())
images = st.builds(Image, st.sampled_from(["image/png", "image/jpeg"]), st.text(max_size=50))
blocks = st.one_of(texts, reasonings, tool_calls, images)


@st.composite
def sources(draw: st.DrawFn) -> dict[str, Any]:
    """A message source: a known kind (with a plugin name for ``plugin``) plus any extra JSON."""
    source = draw(json_objects)
    kind = draw(st.sampled_from(sorted(SOURCE_KINDS)))
    source["kind"] = kind
    if kind == "plugin":
        source["plugin"] = draw(names)
    return source


user_messages = st.builds(UserMessage, st.lists(texts | images, max_size=3), sources(), ids)
assistant_messages = st.builds(
    AssistantMessage,
    st.lists(texts | reasonings | tool_calls, max_size=4),
    st.none() | names,
    st.none() | names,
    ids,
)
tool_result_messages = st.builds(
    ToolResultMessage, ids, st.lists(texts | images, max_size=3), st.booleans(), ids
)
messages = st.one_of(user_messages, assistant_messages, tool_result_messages)

# ---------------------------------------------------------------------- LLM types

failures = st.builds(
    Failure,
    st.text(),
    st.sampled_from(sorted(FAILURE_CODES)),
    st.none() | st.integers(min_value=100, max_value=599),
    st.none() | seconds,
)
text_deltas = st.builds(TextDelta, counts, st.text())
reasoning_deltas = st.builds(ReasoningDelta, counts, st.text())
tool_call_deltas = st.builds(ToolCallDelta, counts, st.none() | ids, st.none() | names, st.text())
usages = st.builds(Usage, counts, counts, counts, counts, counts)
finishes = st.one_of(
    st.builds(Finish, st.sampled_from(["stop", "tool-calls", "max-tokens"])),
    st.builds(Finish, st.just("error"), failures),
    st.builds(Finish, st.just("aborted"), st.none() | failures),
)
chunks = st.one_of(text_deltas, reasoning_deltas, tool_call_deltas, usages, finishes)

model_infos = st.builds(ModelInfo, st.integers(1, 10**7), st.integers(1, 10**6))
temperatures = st.none() | st.floats(min_value=0, max_value=2, allow_nan=False)
call_configs = st.builds(
    LlmCallConfig, names, names, st.none() | st.integers(1, 10**6), temperatures, st.none() | names
)
tool_schemas = st.fixed_dictionaries({"name": names, "description": st.text(), "parameters": json_objects})
requests = st.builds(
    LlmRequest,
    names,
    names,
    st.lists(messages, max_size=4),
    st.none() | st.text(),
    st.lists(tool_schemas, max_size=3),
    st.none() | st.integers(1, 10**6),
    temperatures,
    st.none() | names,
    st.none() | ids,
)

# ---------------------------------------------------------------------- decisions

contexts = st.lists(st.text(), max_size=3)
decisions = st.one_of(
    st.builds(Allow, contexts),
    st.builds(Block, st.text()),
    st.builds(Deny, st.text()),
    st.builds(Ask, st.text()),
    st.builds(Accept, st.none() | st.lists(texts | images, max_size=3), contexts),
    st.builds(Reject, st.text()),
    st.builds(Retry, seconds),
    st.builds(ContinuationDecision, st.sampled_from(["continue", "stop"]), st.none() | st.text()),
    st.builds(ContinuationStop, st.text()),
)

# ---------------------------------------------------------------------- session events


@st.composite
def surface_ops(draw: st.DrawFn) -> SurfaceOp:
    if draw(st.booleans()):
        return SurfaceOp.append()
    start = draw(st.integers(0, 1000))
    return SurfaceOp.replace(start, start + draw(st.integers(0, 1000)))


event_types = st.sampled_from(["turn/start", "tool/call", "inbox/queued", *sorted(SURFACE_EVENT_TYPES)])


@st.composite
def session_events(draw: st.DrawFn) -> SessionEvent:
    event_type = draw(event_types)
    data = draw(json_objects)
    data.pop("surface", None)
    if event_type in SURFACE_EVENT_TYPES and draw(st.booleans()):
        data["surface"] = draw(surface_ops()).to_json()
    return SessionEvent(event_type, draw(counts), draw(seconds), data)
