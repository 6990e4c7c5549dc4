"""``ganstudy``: one sub-command per workflow step, every path explicit, nothing about Snakemake.

A step's parser (in its stage's module) is the one declaration of what the step takes: the workflow writes
a job's arguments file from it (ganstudy.cli.step_arguments), and the step reads the file back as
``@FILE``. A stage's settings come in its spec file (``--spec``), or where a step needs only a few config
values, as those values; the statistics steps take the statistics section as JSON (``--settings``).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import functools
import io
import sys
import time
import traceback
from collections.abc import Sequence

from ganstudy.cli import config, data, evaluate, figures, lsf, statistics, study, tables, train
from ganstudy.cli.options import command_parser
from ganstudy.errors import GanstudyError
from ganstudy.parallel.stop import STOPPED_EXIT_CODE, TrainingStopped

ABORT_GRACE_SECONDS = 1.0


# The commands by stage, in the order ``ganstudy --help`` lists them.
REGISTERS = (
    study.register,
    config.register,
    data.register,
    train.register,
    evaluate.register,
    statistics.register,
    tables.register,
    figures.register,
    lsf.register,
)


def build_parser() -> argparse.ArgumentParser:
    return command_parser(REGISTERS)[0]


@functools.cache
def step_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each workflow step's parser by the step's name (``ganstudy STEP``)."""
    return command_parser(REGISTERS)[1].steps


def _mpi_peers() -> int:
    """Ranks of this job besides us, if the command started MPI; a failing rank must then end them all."""
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi.COMM_WORLD.Get_size() - 1 if mpi is not None and mpi.Is_initialized() else 0


def main(argv: Sequence[str] | None = None) -> int:
    # A rank that dies by a signal inside torch or MPI (an abort in a C++ thread, a segfault) leaves a bare
    # "terminate called ..." in its job log; with this the log also shows every thread's Python stack. A
    # caller in the same process (a test, a notebook) may have an error stream without a file descriptor.
    with contextlib.suppress(io.UnsupportedOperation, AttributeError, ValueError):
        faulthandler.enable()
    args = build_parser().parse_args(argv)
    try:
        args.handler(args)
    except TrainingStopped as exc:
        # Every rank stops at the same iteration, after its checkpoint: an orderly end, no abort.
        print(f"ganstudy {args.command}: {exc}", file=sys.stderr, flush=True)
        return STOPPED_EXIT_CODE
    except GanstudyError as exc:
        print(f"ganstudy {args.command}: error: {exc}", file=sys.stderr, flush=True)
        code = 2
    except BaseException:
        if not _mpi_peers():
            raise
        traceback.print_exc()
        code = 1
    else:
        return 0
    if _mpi_peers():
        # Peers blocked in a collective would otherwise wait until the wall-time limit. The launcher
        # forwards a rank's output asynchronously and an abort right after the print can drop the
        # message (seen once in the test suite: exit code 2, empty stderr): give it a moment first.
        time.sleep(ABORT_GRACE_SECONDS)
        sys.modules["mpi4py.MPI"].COMM_WORLD.Abort(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
