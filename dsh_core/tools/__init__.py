"""Defining a tool: ``@tool`` and its JSON Schema, the checks on the model's arguments, and ``ToolError``."""

from ._arguments import MAX_ARGUMENT_DEPTH as MAX_ARGUMENT_DEPTH
from ._arguments import parse_arguments as parse_arguments
from ._definition import ParallelSafe as ParallelSafe
from ._definition import Tool as Tool
from ._definition import tool as tool
from ._errors import ToolError as ToolError
from ._schema_check import Acceptor as Acceptor
from ._schema_check import compile_acceptor as compile_acceptor

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "Acceptor",
    "ParallelSafe",
    "Tool",
    "ToolError",
    "compile_acceptor",
    "parse_arguments",
    "tool",
]
