"""dsh adapter for OpenAI-compatible chat completions: DeepSeek (thinking mode included), OpenAI, local servers.

Load the ``openai`` plugin (entry point) and pick a model with ``AgentOptions(model="deepseek/deepseek-v4-flash")``.
"""

from ._adapter import OpenAIAdapter as OpenAIAdapter
from ._config import OpenAIConfig as OpenAIConfig
from ._plugin import OpenAIPlugin as OpenAIPlugin

__all__ = ["OpenAIAdapter", "OpenAIConfig", "OpenAIPlugin"]
