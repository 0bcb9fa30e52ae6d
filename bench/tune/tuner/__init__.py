"""The autotuner of the GPU schedules behind bench/tune/tune.py, one module per job:

  paths, messages   default locations; progress lines and TuneError
  expr, space       constraint expressions; the search spaces (params, values, aliases, points)
  headers           the spaces against the schedules' headers; the reference (default) point
  state             the resumable <work>/state.json
  selection         which points a round measures (grid, random, refinement)
  source            the identity (commit, hash) of the sources a round is built from
  project, build    the generated tuning project; configuring and building it (process: running a step)
  rounds            `round`
  ingest            `ingest`: the tuning binary's logs into the state
  tuned             the tuned file; `tuned`, `cmake-args`
  status, checks    `status`; `check-space`, `check-aliases`
  simulate          `simulate`: a fake log for testing without a GPU
  cli               the command line: its arguments and which command runs

Below, what its tests (test_tune.py) use.
"""

from .cli import main
from .expr import Expr
from .headers import check_space_against_headers, header_params, reference_point
from .messages import TuneError
from .process import run_cmd
from .selection import select_candidates
from .space import LibSpace, expand_values, load_space
from .tuned import cmake_params, slug

__all__ = ["Expr", "LibSpace", "TuneError", "check_space_against_headers", "cmake_params",
           "expand_values", "header_params", "load_space", "main", "reference_point", "run_cmd",
           "select_candidates", "slug"]
