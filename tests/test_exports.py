"""Each package exposes one exact front (STYLE R1), and the SPEC §7 import map works."""

from __future__ import annotations

import dsh_agent_loop
import dsh_core
import dsh_core.host
import dsh_core.llm
import dsh_core.services
import dsh_core.session_log
import dsh_core.testing
import dsh_core.tools
import dsh_core.vocabulary


def test_fronts_are_exact() -> None:
    """__all__ lists exactly the public names of each package's namespace."""
    fronts = (
        dsh_core,
        dsh_core.llm,
        dsh_core.testing,
        dsh_core.vocabulary,
        dsh_core.session_log,
        dsh_core.host,
        dsh_core.tools,
        dsh_core.services,
        dsh_agent_loop,
    )
    for module in fronts:
        public = {name for name in vars(module) if not name.startswith("_")} - {"annotations"}
        public -= {name for name in public if type(getattr(module, name)).__name__ == "module"}
        assert set(module.__all__) == public, module.__name__


def test_agent_loop_front_is_plugin_service_and_config() -> None:
    """The loop's package root exports only the plugin, the service and the config."""
    assert set(dsh_agent_loop.__all__) == {"AgentLoop", "AgentLoopConfig", "AgentLoopPlugin"}


def test_spec_import_map() -> None:
    """Every name of SPEC §7 imports from where the contract says."""
    from dsh_core import (  # noqa: F401
        Accept,
        AgentOptions,
        Allow,
        Ask,
        AssistantMessage,
        Block,
        Context,
        ContinuationDecision,
        ContinuationStop,
        Deny,
        Harness,
        Image,
        Reasoning,
        Reject,
        Retry,
        SessionEvent,
        Text,
        ToolCall,
        ToolResult,
        ToolResultMessage,
        UserMessage,
        hookimpl,
        hookspec,
        tool,
    )
    from dsh_core.llm import (  # noqa: F401
        Failure,
        Finish,
        LlmCallConfig,
        LlmRequest,
        ModelInfo,
        ReasoningDelta,
        TextDelta,
        ToolCallDelta,
        Usage,
    )
    from dsh_core.testing import ScriptedModel  # noqa: F401
