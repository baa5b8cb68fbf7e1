"""``python -m dsh_temporal [worker] ...``: ``dsh worker`` without the dsh CLI installed."""

import sys

from ._command import main

args = sys.argv[1:]
if args[:1] == ["worker"]:
    args = args[1:]
sys.exit(main(args))
