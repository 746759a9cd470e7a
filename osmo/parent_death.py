"""Exec a program that ends with its parent: ``python -I -S parent_death.py PARENT SIGNAL ARGV...``.

Linux keeps a "parent death signal" per process (``prctl(PR_SET_PDEATHSIG)``): the kernel sends
it when the parent ends, even by SIGKILL, and it survives ``exec``. This sets it, checks that
the parent (pid PARENT) did not die before it took effect, then becomes the program. It runs as
a script of its own, importing nothing from the project, so it costs one small interpreter start.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    parent, death_signal, program = int(argv[1]), int(argv[2]), argv[3:]
    # The parent blocks SIGINT/SIGTERM while it forks; the program starts with nothing blocked.
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
        if os.getppid() != parent:  # the parent died before the signal was set
            return 1
    os.execvp(program[0], program)
    return 1  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv))
