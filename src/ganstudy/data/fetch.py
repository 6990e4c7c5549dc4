"""fetch_dataset: download a standard data set's published files and verify their checksums.

It runs on the login node (a local rule): compute nodes usually have no internet. Without a
network it stops and says which files to place where.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

from ganstudy.atomic import atomic_path
from ganstudy.data.arrays import file_digest
from ganstudy.data.sources import SOURCES
from ganstudy.errors import GanstudyError


def fetch_dataset(name: str, folder: str | os.PathLike[str], mirror: str | None = None, timeout: float = 60) -> list[Path]:
    """Make sure every file of data set ``name`` is in ``folder`` with its published checksum."""
    if name not in SOURCES:
        raise GanstudyError(f"data set '{name}' has no published files to fetch; known: {', '.join(sorted(SOURCES))}")
    source = SOURCES[name]
    folder = Path(folder)
    mirrors = (mirror,) if mirror else source.mirrors
    placed = []
    for file, md5 in source.md5.items():
        target = folder / file
        if target.is_file() and file_digest(target, "md5") == md5:
            placed.append(target)
            continue
        problems = []
        for base in mirrors:
            url = base.rstrip("/") + "/" + file
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response, atomic_path(target) as tmp:
                    with tmp.open("wb") as out:
                        shutil.copyfileobj(response, out, 1 << 20)
                    found = file_digest(tmp, "md5")
                    if found != md5:
                        raise ValueError(f"checksum {found} instead of the published {md5}")
            except (urllib.error.URLError, OSError, ValueError) as exc:
                problems.append(f"{url}: {exc}")
                continue
            placed.append(target)
            break
        else:
            listing = "\n".join(f"  {f}  (md5 {m})" for f, m in source.md5.items())
            raise GanstudyError(
                f"could not fetch {file} of data set '{name}':\n  " + "\n  ".join(problems)
                + f"\nWithout a network, place these files in {folder}/ and rerun:\n{listing}"
            )
    return placed
