"""Defining a tool: the ``@tool`` decorator, its JSON Schema, and the checks the model's arguments go through."""

from ._definition import ParallelSafe as ParallelSafe
from ._definition import Tool as Tool
from ._definition import tool as tool
from ._schema_check import Acceptor as Acceptor
from ._schema_check import compile_acceptor as compile_acceptor
from ._arguments import MAX_ARGUMENT_DEPTH as MAX_ARGUMENT_DEPTH
from ._arguments import parse_arguments as parse_arguments

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "Acceptor",
    "ParallelSafe",
    "Tool",
    "compile_acceptor",
    "parse_arguments",
    "tool",
]
