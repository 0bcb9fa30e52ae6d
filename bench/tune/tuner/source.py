"""The identity of the sources a round is built from: commit, local changes, content hash of
schedules/ and generators/."""

import hashlib
import subprocess

from .paths import REPO


def git(*args, repo=REPO):
    try:
        r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30)
        return r.stdout.strip() if r.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def source_identity(repo=REPO):
    """commit, whether schedules/ or generators/ differ from it, and a hash of their contents."""
    h = hashlib.sha256()
    for d in ("schedules", "generators"):
        for p in sorted((repo / d).glob("*")):
            if p.is_file() and p.suffix in (".h", ".cpp", ".txt", ".cmake"):
                h.update(p.name.encode())
                h.update(p.read_bytes())
    commit = git("rev-parse", "--short", "HEAD", repo=repo) or "unknown"
    # The tuned files are this tool's output, not its input: their changes are not "dirty".
    dirty = bool(git("status", "--porcelain", "--", "schedules", "generators",
                     ":(exclude)schedules/tuned", repo=repo))
    return {"commit": commit, "dirty": dirty, "source_hash": h.hexdigest()[:16]}
