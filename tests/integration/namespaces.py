"""Names and subnets for the network namespaces the network tests make (root only).

A test killed mid-way (a CI run stopped, a timeout) leaves its namespace, veth and address behind, and a
leftover /24 equal to a new one takes the new one's replies. So every name carries the pid of the process
that made it, `remove_leftovers` deletes those whose maker is gone, and `free_subnet` picks a /24 that no
interface here holds.
"""

import os
import re
import subprocess

_NAMESPACE = re.compile(r"^elx-(?:probe-)?(\d+)(?:-.*)?$")
_LINK = re.compile(r"^elx[hpb](\d+)(?:-\d+)?$")


def namespace_name(role: str) -> str:
    return f"elx-{role}-{os.getpid()}" if role == "probe" else f"elx-{os.getpid()}-{role}"


def link_name(kind: str, index: int | None = None) -> str:
    """`kind` h (this side of a veth), p (the namespace's side) or b (a bridge); at most 15 characters."""
    return f"elx{kind}{os.getpid()}" + ("" if index is None else f"-{index}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


def _lines(*args: str) -> list[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True).stdout.splitlines()


def remove_leftovers() -> None:
    """Deletes the namespaces, veths and bridges of network tests whose process no longer runs."""
    for line in _lines("netns", "list"):
        name = (line.split() or [""])[0]
        match = _NAMESPACE.match(name)
        if match and not _alive(int(match.group(1))):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
    for line in _lines("-o", "link", "show"):
        name = line.split(":")[1].strip().split("@")[0] if line.count(":") >= 2 else ""
        match = _LINK.match(name)
        if match and not _alive(int(match.group(1))):
            subprocess.run(["ip", "link", "del", name], capture_output=True)


def free_subnet(second_octet: int) -> str:
    """`10.<second_octet>.N` (no last octet) for a /24 that no address here is in, starting from the pid."""
    used = set()
    for line in _lines("-o", "-4", "addr", "show"):
        match = re.search(r"inet (\d+\.\d+\.\d+)\.\d+/", line)
        if match:
            used.add(match.group(1))
    start = os.getpid() % 250
    for step in range(250):
        subnet = f"10.{second_octet}.{(start + step) % 250}"
        if subnet not in used:
            return subnet
    raise OSError(f"every 10.{second_octet}.N/24 is in use here: remove leftover test interfaces (ip -br addr)")
