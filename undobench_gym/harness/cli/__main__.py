"""`python -m undobench_gym.harness.cli`: the same as the `undobench` script."""

import sys

from undobench_gym.harness.cli import main

sys.exit(main())
