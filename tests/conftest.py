import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
# The core's tests run on the built-in torch executor alone, whatever plugins are installed
# (each plugin tests itself with the core, beside its own code); tests of the marketplace
# set their own priority lists.
os.environ.setdefault("SQUALL_EXECUTORS", "torch")
torch.manual_seed(0)
