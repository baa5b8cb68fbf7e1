"""Record ``demo-fix-median.jsonl`` anew from ``dsh demo`` (``make sessions``).

Run it when a change alters what the demo's requests carry (a tool schema, the system prompt) on
purpose: ``tests/test_replay.py`` then fails at that ``request/header`` until the recording is new.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from dsh_cli._demo import run_demo

HERE = Path(__file__).resolve().parent


def main() -> int:
    with tempfile.TemporaryDirectory() as keep:
        status = run_demo(keep=Path(keep), pace=0)
        if status != 0:
            return status
        [recorded] = Path(keep, "sessions").glob("*/session.jsonl")
        shutil.copyfile(recorded, HERE / "demo-fix-median.jsonl")
    print(f"recorded {HERE / 'demo-fix-median.jsonl'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
