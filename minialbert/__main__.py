"""`python -m minialbert {pretrain,evaluate,zoo,figures,...} --help`: the course's command line
(minialbert/course/commands.py), which resolves the scale once and hands each command what it reads."""

import sys

from .course.commands import main

if __name__ == "__main__":
    sys.exit(main())
