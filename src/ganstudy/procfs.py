"""This process's own entry of Linux's /proc: facts no portable call gives as safely (the umask without
changing it, the peak resident memory of this process image rather than of its exec chain)."""

from __future__ import annotations


def status_field(name: str) -> str | None:
    """The value of a field of /proc/self/status (e.g. "Umask", "VmHWM"); None where there is no /proc."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key == name:
                    return value.strip()
    except OSError:
        pass
    return None
