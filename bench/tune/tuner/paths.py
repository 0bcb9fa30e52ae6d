"""Where the tuner reads and writes by default, from the repository root."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]  # bench/tune/tuner/paths.py
SPACE_FILE = REPO / "schedules" / "search_space.json"
TUNED_DIR = REPO / "schedules" / "tuned"
DEFAULT_WORK = REPO / "build-tune"
