"""``python -m rtrace ARGS``: the packaged ``rtrace`` command."""

import os
import sys

from ._report import rtrace_command

if __name__ == "__main__":
    command = rtrace_command()
    os.execv(command, [command, *sys.argv[1:]])
