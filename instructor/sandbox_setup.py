"""The sandbox's setup: builds the child's new root, moves into it, drops every capability, execs the child.

    unshare ... python -I -S instructor/sandbox_setup.py LAYOUT CHILD...

Run by :func:`instructor.sandbox.command` inside the new namespaces, as their root, before the child:
LAYOUT (JSON, from :func:`instructor.sandbox._layout`) says what goes where; CHILD... is the child's
command line, exec'd once the new root is in place. Run by its path, from the repository, before the new
root hides it: under ``-I -S`` the module path is the standard library alone (no site-packages, no
current folder), so ``-m instructor.sandbox_setup`` could not find it; ``-S`` keeps the installed
packages' start-up hooks (``.pth`` files) from running in here. It imports only the standard library.
"""

import ctypes
import json
import os
import sys

RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND = 1, 2, 4, 8, 32, 4096  # mount flags (linux/mount.h)
libc = ctypes.CDLL(None, use_errno=True)


def check(result: int, what: str) -> None:
    if result != 0:
        raise SystemExit(f"sandbox: {what}: {os.strerror(ctypes.get_errno())}")


def mount(source: str | None, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    encoded = [s.encode() if s is not None else None for s in (source, target, fstype, data)]
    check(libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]), f"mount {target}")


def bind(source: str, target: str, flags: int = 0) -> None:
    mount(source, target, flags=BIND)
    if flags:  # a bind mount takes its flags in a second call
        mount("none", target, flags=REMOUNT | BIND | flags)


def build_root(layout: dict) -> None:
    """The new root on an empty tmpfs at layout["root"]: links, /tmp, /dev, /proc, /sys, the read-only
    folders, the work folder (its read-only folders inside)."""
    new = layout["root"]
    mount("sandbox", new, "tmpfs", NOSUID | NODEV, "mode=755")
    for name, target in layout["links"]:
        os.symlink(target, new + name)
    for path in ("/tmp", "/dev/shm", "/proc", "/sys"):
        os.makedirs(new + path)
        if path in ("/tmp", "/dev/shm"):
            mount("tmpfs", new + path, "tmpfs", NOSUID | NODEV, "mode=1777")
    mount("proc", new + "/proc", "proc", NOSUID | NODEV | NOEXEC)
    for path in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
        if os.path.exists(new + path):
            bind(new + path, new + path, RDONLY | NOSUID | NODEV | NOEXEC)
    mount("sysfs", new + "/sys", "sysfs", RDONLY | NOSUID | NODEV | NOEXEC)
    for device in layout["devices"]:
        open(new + device, "w").close()
        bind(device, new + device)
    os.symlink("/proc/self/fd", new + "/dev/fd")
    for path in layout["read_only"]:
        os.makedirs(new + path, exist_ok=True)
        bind(path, new + path, RDONLY | NOSUID | NODEV)
    os.makedirs(new + layout["work"], exist_ok=True)
    bind(layout["work"], new + layout["work"], NOSUID | NODEV)
    for path in layout["work_read_only"]:
        bind(path, new + path, RDONLY | NOSUID | NODEV)


def move_into(layout: dict) -> None:
    """pivot_root into the new root, the old one detached; the new root read-only; cwd layout["cwd"]."""
    os.chdir(layout["root"])
    os.mkdir(".old")
    number = {"x86_64": 155, "aarch64": 41, "riscv64": 41}.get(os.uname().machine)
    if number is not None:
        check(libc.syscall(number, b".", b".old"), "pivot_root")
    elif os.spawnvp(os.P_WAIT, "pivot_root", ["pivot_root", ".", ".old"]) != 0:
        raise SystemExit("sandbox: pivot_root failed")
    check(libc.umount2(b"/.old", 2), "detach the old root")  # MNT_DETACH
    os.rmdir("/.old")
    mount("none", "/", flags=REMOUNT | BIND | RDONLY | NOSUID | NODEV)
    os.chdir(layout["cwd"])


def drop_capabilities() -> None:
    """No capability left, none to regain: bounding set emptied, ambient cleared, root's off, no_new_privs."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for capability in range(last + 1):
        check(libc.prctl(24, capability, 0, 0, 0), "drop a capability")  # PR_CAPBSET_DROP
    check(libc.prctl(47, 4, 0, 0, 0), "clear the ambient capabilities")  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    check(libc.prctl(28, 3, 0, 0, 0), "turn root's capabilities off")  # PR_SET_SECUREBITS: NOROOT, locked
    check(libc.prctl(38, 1, 0, 0, 0), "set no_new_privs")  # PR_SET_NO_NEW_PRIVS


def main(argv: list[str]) -> None:
    layout, command = json.loads(argv[0]), argv[1:]
    build_root(layout)
    move_into(layout)
    drop_capabilities()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
