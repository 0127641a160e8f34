"""`python -m minialbert.corpus`: build (or load) the course corpus and print its statistics."""

import sys

from . import main

sys.exit(main())
