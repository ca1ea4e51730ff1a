"""Torch-language ops: conversions."""
from __future__ import annotations

import torch

from squall import prims
from squall.ltorch.base import torch_inplace, torchsymbol
from squall.ltorch import helpers

__all__: list[str] = []
