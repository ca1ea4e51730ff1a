import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
# The core's tests run on the built-in torch executor alone, whatever plugins are installed
# (each plugin tests itself with the core, beside its own code); tests of the marketplace
# set their own priority lists.
os.environ.setdefault("SQUALL_EXECUTORS", "torch")


@pytest.fixture(autouse=True)
def _seeded():
    # the same samples whichever worker runs a test, and in whatever order
    torch.manual_seed(0)
