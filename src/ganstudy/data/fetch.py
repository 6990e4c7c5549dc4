"""fetch_dataset: download a standard data set's published files and verify their checksums.

It runs on the login node (a local rule): compute nodes usually have no internet. Without a
network it stops and says which files to place where. A file whose source publishes no checksum cannot
be verified: fetch says so and records the sha256 it got beside the file, for comparing copies later.
"""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath

from ganstudy.core.atomic import atomic_path
from ganstudy.data.arrays import file_digest
from ganstudy.data.sources import SOURCES
from ganstudy.errors import GanstudyError


def fetch_dataset(
    name: str, folder: str | os.PathLike[str], mirror: str | None = None, timeout: float = 60
) -> list[Path]:
    """Make sure every file of data set ``name`` is in ``folder`` with its published checksum (where one is
    published) and unpack the archives of a source that asks for it; returns the files, then what was unpacked."""
    if name not in SOURCES:
        raise GanstudyError(f"data set '{name}' has no published files to fetch; known: {', '.join(sorted(SOURCES))}")
    source = SOURCES[name]
    folder = Path(folder)
    mirrors = (mirror,) if mirror else source.mirrors
    placed = []
    for file, md5 in source.md5.items():
        target = folder / file
        if target.is_file() and (md5 is None or file_digest(target, "md5") == md5):
            placed.append(target)
            continue
        problems = []
        for base in mirrors:
            url = base.rstrip("/") + "/" + file
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response, atomic_path(target) as tmp:
                    with tmp.open("wb") as out:
                        shutil.copyfileobj(response, out, 1 << 20)
                    if md5 is not None and (found := file_digest(tmp, "md5")) != md5:
                        raise ValueError(f"checksum {found} instead of the published {md5}")
            except (urllib.error.URLError, OSError, ValueError) as exc:
                problems.append(f"{url}: {exc}")
                continue
            placed.append(target)
            break
        else:
            listing = "\n".join(
                f"  {f}  " + (f"(md5 {m})" if m else "(no published checksum)") for f, m in source.md5.items()
            )
            raise GanstudyError(
                f"could not fetch {file} of data set '{name}':\n  "
                + "\n  ".join(problems)
                + f"\nWithout a network, place these files in {folder}/ and rerun:\n{listing}"
            )
    for file in (f for f, m in source.md5.items() if m is None):
        _record_sha256(folder / file)
    unpacked = [entry for archive in placed for entry in extract_tar(archive, folder)] if source.extract else []
    return placed + unpacked


def _record_sha256(file: Path) -> None:
    """What can be said of a file nobody published a checksum for: its sha256, written beside it in
    sha256sum's format (``sha256sum -c`` checks a copy) and in the log, with a warning."""
    sha256 = file_digest(file)
    record = file.with_name(file.name + ".sha256")
    with atomic_path(record) as tmp:
        tmp.write_text(f"{sha256}  {file.name}\n")
    print(
        f"ganstudy fetch: warning: {file.name} has no published checksum and is not verified; its sha256 is "
        f"{sha256} (recorded in {record})",
        file=sys.stderr,
        flush=True,
    )


def _member_parts(archive: Path, member: tarfile.TarInfo) -> tuple[str, ...]:
    """The path of a member that stays inside the folder it is unpacked into; anything else refuses the
    whole archive, since a crafted member could overwrite any file the user can write."""
    path = PurePosixPath(member.name)
    if path.is_absolute() or ".." in path.parts:
        raise GanstudyError(
            f"{archive}: member {member.name!r} would land outside the folder it is unpacked into; "
            "refusing to unpack it: delete the archive and fetch it again"
        )
    if not (member.isfile() or member.isdir()):
        raise GanstudyError(
            f"{archive}: member {member.name!r} is a link or a special file, not a file or folder; "
            "refusing to unpack it: delete the archive and fetch it again"
        )
    return path.parts


def _write_members(tar: tarfile.TarFile, members: list[tuple[tarfile.TarInfo, tuple[str, ...]]], into: Path) -> None:
    for member, parts in members:
        target = into.joinpath(*parts)
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with tar.extractfile(member) as data, target.open("wb") as out:
            shutil.copyfileobj(data, out, 1 << 20)


def extract_tar(archive: Path, folder: Path) -> list[Path]:
    """Unpack a (compressed) tar archive into ``folder``; returns its top-level entries there.

    Every member is checked before anything is written. Each top-level entry is unpacked into a
    staging folder and renamed into place, so it appears complete or not at all; one already in
    ``folder`` is kept as it is (delete it to unpack again).
    """
    try:
        with tarfile.open(archive) as tar:
            members = [(member, _member_parts(archive, member)) for member in tar.getmembers()]
            # A member named "." or "./" is the archive's own root: nothing to unpack.
            members = [(member, parts) for member, parts in members if parts]
            tops = sorted({parts[0] for _, parts in members})
            missing = [top for top in tops if not (folder / top).exists()]
            if missing:
                staging = Path(tempfile.mkdtemp(prefix=f".{archive.name}.", dir=folder))
                try:
                    _write_members(tar, [(member, parts) for member, parts in members if parts[0] in missing], staging)
                    for top in missing:
                        os.replace(staging / top, folder / top)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise GanstudyError(f"{archive} cannot be unpacked ({exc}); delete it and fetch it again") from None
    return [folder / top for top in tops]
