"""Run by ``test_sandbox_as_a_normal_user`` as ``nobody``: a whole harness, then escape attempts through ``bash``.

Usage: ``python normal_user_child.py BACKEND WORKSPACE CAP MARKER``. Prints one JSON object: the
sandbox's status and, per attempt, the call's error code and output (and, for the flood, the
processes left on the host right after the call). It asserts nothing; the test does.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
from dsh_permissions import PermissionsPlugin
from dsh_workspace import WorkspacePlugin

from dsh_core import Harness, ToolExecution
from dsh_core.testing import result_text

#: attempt name -> command, run in workspace-write mode
ATTEMPTS = {
    "capabilities": "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status",
    "mounts": (
        "mount -o remount,rw / 2>/dev/null; echo remount-root=$?; "
        "mount -t tmpfs none /tmp 2>/dev/null; echo mount-tmpfs=$?; "
        "unshare -m true 2>/dev/null; echo unshare-m=$?; "
        "unshare -Urm true 2>/dev/null; echo unshare-Urm=$?"
    ),
    "sysctl": (
        "v=$(cat /proc/sys/kernel/pid_max); (echo $v > /proc/sys/kernel/pid_max) 2>/dev/null; echo pid_max=$?; "
        "(echo 4194304 > /proc/sys/kernel/pid_max) 2>/dev/null; echo raise-pid_max=$?"
    ),
    "secrets": "cat ~/.ssh/id_rsa ~/.aws/credentials /etc/shadow 2>&1; ls -A ~/.ssh; cat ~/notes.txt 2>&1",
    "processes": 'for p in /proc/[0-9]*; do echo "pid ${p#/proc/} $(tr "\\0" " " < $p/cmdline)"; done',
    "tcp": "(exec 3<>/dev/tcp/127.0.0.1/$DSH_PORT) 2>/dev/null; echo tcp=$?",
    "unix": (
        "[ -e $DSH_SOCKET ] && echo visible; "
        "python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"connected\")' "
        "$DSH_SOCKET 2>/dev/null; echo unix=$?"
    ),
}


def host_pids(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline") as file:
                    if marker in file.read().replace("\0", " "):
                        found.append(int(entry))
            except OSError:
                continue
    return found


async def main(workspace: str, cap: int, marker: str) -> dict[str, Any]:
    out: dict[str, Any] = {"euid": os.geteuid()}
    config = {"plugins": {"permissions": {"sandbox": "required", "max_processes": cap}}}
    async with Harness(config=config, plugins=[WorkspacePlugin, PermissionsPlugin], autoload=False) as ctx:
        status = await ctx.sandbox.status()
        profile = status.profile
        out["status"] = {
            "available": status.available,
            "reason": status.reason,
            "process_cap": profile.process_cap if profile else None,
        }
        commands = dict(ATTEMPTS)
        flood = f"sh -c 'i=0; while [ $i -lt {2 * cap} ]; do sleep {marker} & i=$((i+1)); done' 2>/dev/null"
        commands["flood"] = flood + "; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo procs=$n"
        for index, (name, command) in enumerate(commands.items()):
            arguments = json.dumps({"command": command})
            execution = ToolExecution(call_id=f"c{index}", name="bash", arguments=arguments, agent_id="a", cwd=workspace)
            result = await ctx.tools.execute(execution)
            out[name] = {"error_code": result.error_code, "text": result_text(result)}
        out["flood"]["left"] = host_pids(f"sleep {marker}")
        # The file tools run in the harness (as nobody here): paths that leave the workspace.
        outside = os.path.join(os.path.dirname(workspace), "outside.txt")
        os.symlink(outside, os.path.join(workspace, "link.txt"))
        paths = {"dotdot": "../outside.txt", "absolute": outside, "proc-root": f"/proc/self/root{outside}",
                 "symlink": "link.txt"}  # fmt: skip
        for name, path in paths.items():
            for tool, arguments in (("read_file", {"path": path}), ("write_file", {"path": path, "content": "x"})):
                execution = ToolExecution(
                    call_id=f"{tool}-{name}", name=tool, arguments=json.dumps(arguments), agent_id="a", cwd=workspace
                )
                result = await ctx.tools.execute(execution)
                out[f"{tool} {name}"] = {"error_code": result.error_code, "text": result_text(result)}
        os.unlink(os.path.join(workspace, "link.txt"))
    rules = [{"tool": "bash", "action": "allow"}]
    config = {"plugins": {"permissions": {"sandbox": "required", "mode": "read-only", "rules": rules}}}
    async with Harness(config=config, plugins=[WorkspacePlugin, PermissionsPlugin], autoload=False) as ctx:
        command = "echo x > notes.txt 2>/dev/null; echo overwrite=$?; touch new.txt 2>/dev/null; echo create=$?"
        arguments = json.dumps({"command": command})
        execution = ToolExecution(call_id="ro", name="bash", arguments=arguments, agent_id="a", cwd=workspace)
        result = await ctx.tools.execute(execution)
        out["read-only"] = {"error_code": result.error_code, "text": result_text(result)}
    return out


if __name__ == "__main__":
    backend, workspace, cap, marker = sys.argv[1:5]
    print(json.dumps(anyio.run(main, workspace, int(cap), marker, backend=backend)))
