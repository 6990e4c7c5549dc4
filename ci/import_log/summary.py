"""Sums a GANSTUDY_IMPORT_LOG file (ci/import_log/sitecustomize.py) by command: processes, CPU seconds,
and the seconds spent importing torch and torch._dynamo, the commands with most CPU first."""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path


def command_name(argv: str) -> str:
    """`ganstudy train`, `snakemake -s`, `dp_probe.py steps`: the program's name and its first argument."""
    words = argv.split()
    return " ".join([Path(words[0]).name, *words[1:2]]) if words else "(none)"


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__)
    arguments.add_argument("log", type=Path)
    arguments.add_argument("--top", type=int, default=20)
    args = arguments.parse_args()
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0, 0.0, 0, 0.0])
    for line in args.log.read_text().splitlines():
        _, _, cpu, torch_seconds, dynamo_seconds, argv = line.split("\t", 5)
        row = totals[command_name(argv)]
        row[0] += 1
        row[1] += float(cpu)
        for at, seconds in ((2, torch_seconds), (4, dynamo_seconds)):
            if seconds != "None":
                row[at] += 1
                row[at + 1] += float(seconds)
    everything = [sum(column) for column in zip(*totals.values())]
    print(f"{'processes':>9} {'CPU s':>8} {'torch':>6} {'s':>7} {'dynamo':>6} {'s':>7}  command")
    for name, row in [("all", everything), *sorted(totals.items(), key=lambda item: -item[1][1])[: args.top]]:
        print(f"{row[0]:9.0f} {row[1]:8.0f} {row[2]:6.0f} {row[3]:7.0f} {row[4]:6.0f} {row[5]:7.0f}  {name}")


if __name__ == "__main__":
    main()
