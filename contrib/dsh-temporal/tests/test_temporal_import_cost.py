"""Every ``dsh`` command loads the ``temporal`` entry point: that must not import temporalio."""

from __future__ import annotations

import subprocess
import sys

import dsh_temporal

PROBE = """
import sys
import dsh_temporal
import dsh_temporal._command
plugin = dsh_temporal.TemporalPlugin
print(sorted(name for name in sys.modules if name.split(".")[0] == "temporalio"))
"""


def test_the_plugin_and_the_worker_command_load_without_temporalio() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_lazy_front_still_offers_every_name() -> None:
    for name in dsh_temporal.__all__:
        assert getattr(dsh_temporal, name) is not None
    assert dir(dsh_temporal) == sorted(dsh_temporal.__all__)
