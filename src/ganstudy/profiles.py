"""Make the repository's Snakemake profiles reachable by name (``snakemake --profile local``).

Snakemake looks a profile name up in the working directory, then in the user's and the site's
config folders. We link ours into the user's folder, and never replace a profile the user has.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_config_dir


def user_profile_dir() -> Path:
    return Path(user_config_dir("snakemake", "snakemake"))


def install_profiles(source: str | os.PathLike[str], target: str | os.PathLike[str] | None = None) -> list[str]:
    """Link each profile folder of ``source`` into ``target``; return one line per profile saying what happened."""
    source = Path(source).resolve()
    target = Path(target) if target is not None else user_profile_dir()
    target.mkdir(parents=True, exist_ok=True)
    messages = []
    for profile in sorted(p for p in source.iterdir() if p.is_dir()):
        link = target / profile.name
        if link.is_symlink() and not link.exists():
            link.unlink()  # dangling: left by a deleted clone, no profile anyone can use
        if link.is_symlink() and link.resolve() == profile:
            messages.append(f"profile '{profile.name}': already linked to {profile}")
        elif link.exists() or link.is_symlink():
            messages.append(
                f"profile '{profile.name}': kept your existing {link} (not replaced); "
                f"use --profile {profile} for this repository's"
            )
        else:
            link.symlink_to(profile, target_is_directory=True)
            messages.append(f"profile '{profile.name}': linked {link} -> {profile}")
    return messages
