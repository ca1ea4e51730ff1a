import os
import sys
import tempfile

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
# The core's tests run on the built-in torch executor alone, whatever plugins are installed
# (each plugin tests itself with the core, beside its own code); tests of the marketplace
# set their own priority lists.
os.environ.setdefault("SQUALL_EXECUTORS", "torch")
# Compile records stay on (every test then checks that recording never breaks a program),
# written to a folder of the test run's own rather than the user's cache.
os.environ.setdefault("SQUALL_CACHE_DIR", tempfile.mkdtemp(prefix="squall-test-cache-"))
# Each test's jits start static, whatever an earlier test's jit of the same code learned (on by
# default for users: squall.runtime.dims_profile; tests/test_remembered_dims.py turns it on)
os.environ.setdefault("SQUALL_REMEMBER_DYNAMIC", "0")

# transformers imports torchvision where it is installed (timm pulls it in), and the registry's
# torchvision cannot import on CPU torch without this (see real_models.import_torchvision)
from real_models import import_torchvision  # noqa: E402

import_torchvision()


@pytest.fixture(autouse=True)
def _seeded():
    # the same samples whichever worker runs a test, and in whatever order
    torch.manual_seed(0)
