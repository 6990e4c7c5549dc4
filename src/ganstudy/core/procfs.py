"""Linux's /proc: facts no portable call gives as safely (the umask without changing it, the peak
resident memory of this process image rather than of its exec chain, whether a process id is still the
program that wrote it down)."""

from __future__ import annotations

import os
from pathlib import Path


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


def pid_alive(pid: int, program: bytes) -> bool:
    """Whether process ``pid`` on this host is alive and still runs ``program`` (a word of its command
    line): a zombie has ended (its parent has not reaped it yet), another command line is a reused id."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process exists
    proc = Path(f"/proc/{pid}")
    if not proc.is_dir():
        return True  # no /proc (macOS): the signal's answer is all there is
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        command = (proc / "cmdline").read_bytes()
    except (OSError, IndexError):
        return False  # gone since the signal
    return state != "Z" and program in command


# The instruction sets that decide which float kernels torch and oneDNN run: runs on CPUs that differ in
# them give other bits, and may differ in what a study concludes (docs/results.md).
FLOAT_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16")


def cpu_fields() -> dict[str, str]:
    """/proc/cpuinfo's fields of the first processor (model name, cpu family, model, flags, ...); none
    where there is no /proc."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def cpu_description() -> dict[str, object]:
    """This machine's CPU model, its vendor, family and model number (a virtual machine may name every AMD
    EPYC alike: the numbers tell Zen 3 from Zen 4) and which of FLOAT_FLAGS it has, from /proc/cpuinfo's
    first processor; None and no flags where there is no /proc."""
    fields = cpu_fields()
    flags = set(fields.get("flags", "").split())
    return {
        "model": fields.get("model name"),
        "vendor": fields.get("vendor_id"),
        "family": fields.get("cpu family"),
        "model_number": fields.get("model"),
        "float_flags": [flag for flag in FLOAT_FLAGS if flag in flags],
    }
