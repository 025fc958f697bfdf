"""``pgrep`` as seen from inside a container, for commands run by ``pods/exec`` (copied, as a script, first
on the exec'd command's PATH; stdlib only, it runs in whatever Python the pod has).

Why: a container's processes are host processes here, so the host's ``pgrep`` would list (and a following
``kill`` would signal) every matching process on the machine. In a real container ``pgrep`` only sees the
container's PID namespace. The cncf provider stops its XCom sidecar with
``kill -2 $(pgrep -u $(id -u) -f 'sh')``; this shim lists only the processes that carry the container's
marker variable (every process of a container instance has it, exec'd ones too), so that command reaches
the sidecar's shell and nothing else. Supported options: ``-f``, ``-x``, ``-l``, ``-u``/``-U`` uids,
``-d`` delimiter; the pattern is a regular expression, as pgrep's.
"""

from __future__ import annotations

import os
import pwd
import re
import sys

MARKER_ENV = "LOCAL_CLUSTER_CONTAINER_ID"


def _uid(name: str) -> int:
    return int(name) if name.isdigit() else pwd.getpwnam(name).pw_uid


def _parse(argv: list[str]) -> tuple[dict[str, object], str]:
    options: dict[str, object] = {"full": False, "exact": False, "long": False, "uids": None, "delim": "\n"}
    pattern = ""
    args = iter(argv)
    for arg in args:
        if arg in ("-u", "-U", "--euid", "--uid"):
            options["uids"] = {_uid(u) for u in next(args).split(",")}
        elif arg == "-d":
            options["delim"] = next(args)
        elif arg.startswith("-") and len(arg) > 1:
            for flag in arg[1:]:
                options[{"f": "full", "x": "exact", "l": "long"}.get(flag, flag)] = True
        else:
            pattern = arg
    return options, pattern


def _read(pid: str, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _members(marker: bytes) -> list[tuple[int, str, str]]:
    """(pid, comm, cmdline) of every live process carrying the marker, except this one."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        if marker not in _read(pid, "environ").split(b"\0"):
            continue
        comm = _read(pid, "comm").decode(errors="replace").strip()
        cmdline = _read(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()
        if cmdline:  # zombies have none
            found.append((int(pid), comm, cmdline))
    return sorted(found)


def main(argv: list[str]) -> int:
    options, pattern = _parse(argv)
    marker = os.environ.get(MARKER_ENV, "")
    if not marker:
        print("pgrep: not inside a local-cluster container", file=sys.stderr)
        return 3
    regex = re.compile(pattern)
    out = []
    for pid, comm, cmdline in _members(f"{MARKER_ENV}={marker}".encode()):
        subject = cmdline if options["full"] else comm
        hit = regex.fullmatch(subject) if options["exact"] else regex.search(subject)
        uids = options["uids"]
        if hit and (not isinstance(uids, set) or os.stat(f"/proc/{pid}").st_uid in uids):
            out.append(f"{pid} {subject}" if options["long"] else str(pid))
    if out:
        print(str(options["delim"]).join(out))
    return 0 if out else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
