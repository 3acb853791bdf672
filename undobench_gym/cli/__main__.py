"""`python -m undobench_gym.cli`: the same as the `undobench` script."""

import sys

from . import main

sys.exit(main())
