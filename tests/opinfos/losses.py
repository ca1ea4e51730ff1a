"""OpInfos for losses ops."""
from __future__ import annotations

import torch

from opinfos import FLOATING, NUMERIC, ALL_TYPES, ErrorInput, OpInfo, SampleInput, make_tensor

opinfos: list[OpInfo] = []
