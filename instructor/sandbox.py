"""The grading sandbox: a child process that sees and changes only its own work.

    sandbox.command(["python", "-I", "tree/program.py", ...], work=folder, read_only=[folder / "tree"])

``command`` wraps a child's command line in ``unshare`` (util-linux): new user, mount, PID, network,
IPC and UTS namespaces. Inside them, before the child starts, :mod:`instructor.sandbox_setup` (run by its
path with ``python -I -S``) builds a new root on an empty tmpfs and moves into it with ``pivot_root``:

    /usr /etc, /bin /sbin /lib* (links or binds)   read-only, as on this machine
    the interpreter and its packages                read-only, at the same paths: sys.base_prefix, sys.prefix
                                                    (a virtual environment inside the repository is bound
                                                    alone, never the repository around it)
    /dev                                            null, zero, full, random, urandom and a private /dev/shm
    /proc, /sys                                     fresh ones for the new namespaces; /proc/sys and /sys read-only
    /tmp                                            a private empty tmpfs
    the work folder                                 read-write, at its own path (also the child's cwd)
    read_only folders inside it (the child's tree)  read-only

and nothing else: no home folder, no /work, no repository, no other grading tree. The root itself
is then made read-only, and the child runs with no capabilities (bounding set emptied, root's
implicit capabilities off, no_new_privs), so it cannot remount any of this. In the PID namespace the
child is process 1: when it exits, the kernel kills every process it started, daemons that left its
session included; ``--kill-child`` kills the child when ``unshare`` dies (a grader's timeout kills
``unshare``'s process group). The network namespace has no interface but a loopback that is down.

:func:`problem` says, in one line, why the sandbox cannot be built on this machine (None when it can).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

UNSHARE = [
    "unshare",
    "--user",
    "--map-root-user",
    "--mount",
    "--pid",
    "--fork",
    "--kill-child",
    "--net",
    "--ipc",
    "--uts",
]
SYSTEM = ("/usr", "/etc")  # read-only, as they are
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")  # links into /usr on most systems, else read-only
DEVICES = ("null", "zero", "full", "random", "urandom")
ROOT_DIR = ".sandbox-root"  # in the work folder: where the new root is built (the child sees it empty)

# Runs inside the new namespaces as their root, before the child (python -I -S SETUP LAYOUT CHILD...): builds
# the new root, moves into it, drops every capability and execs the child.
SETUP = Path(__file__).resolve().with_name("sandbox_setup.py")


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _layout(work: Path, read_only: list[Path]) -> dict:
    """Where everything goes in the new root (paths as on this machine; sandbox_setup prefixes the root)."""
    links, system = [], list(SYSTEM)
    for name in TOP_LEVEL:
        path = Path("/") / name
        if path.is_symlink():
            links.append([str(path), os.readlink(path)])
        elif path.is_dir():
            system.append(str(path))
    interpreter = []  # the interpreter and its packages, at the paths the child's python looks for them
    executable = (os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable)))
    for prefix in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix, *executable):
        for path in (os.path.abspath(prefix), os.path.realpath(prefix)):
            if not _inside(os.path.realpath(path), system + interpreter):
                interpreter.append(path)
    work = os.path.realpath(work)
    return {
        "root": str(Path(work) / ROOT_DIR),
        "links": links,
        "devices": [f"/dev/{d}" for d in DEVICES],
        "read_only": sorted(system + interpreter, key=len),  # a folder before the ones inside it
        "work": work,
        "work_read_only": [os.path.realpath(p) for p in read_only],
        "cwd": work,
    }


def command(argv: list[str], work: Path, read_only: list[Path] = ()) -> list[str]:
    """``argv`` run in the sandbox, in ``work`` (read-write; ``read_only`` folders inside it read-only)."""
    (Path(work) / ROOT_DIR).mkdir(exist_ok=True)
    layout = _layout(Path(work), list(read_only))
    return [*UNSHARE, sys.executable, "-I", "-S", str(SETUP), json.dumps(layout), *argv]


def problem() -> str | None:
    """Why the sandbox cannot be built here, in one line; None when a child runs in it."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    with tempfile.TemporaryDirectory(prefix="rlhf-sandbox-check-") as work:
        try:
            proc = subprocess.run(
                command([sys.executable, "-I", "-S", "-c", "pass"], Path(work)),
                cwd=work,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except subprocess.TimeoutExpired:
            return "a child in the sandbox did not start within 60 s"
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else f"unshare exited with status {proc.returncode}"
