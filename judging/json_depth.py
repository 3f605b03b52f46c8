"""How deeply a JSON text nests, measured without parsing it: Python's json parser recurses once per level, so a
body of 1,000 ``[`` raised RecursionError (a 500, without login at /api/auth/token/). Every JSON text RelJudge
reads from outside (API bodies, JSON Lines imports, a model endpoint's answers) is measured first and refused
past :data:`JSON_DEPTH_MAX` levels.

The measure: strings are cut out (a bracket inside one does not nest), then each ``[``/``{`` is +1 and each
``]``/``}`` -1; the depth is the running sum's largest value. Linear in the text's length, in C (``re`` and
numpy). A text whose strings do not close is measured with the rest as brackets: it is refused either way.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

# Far beyond any request RelJudge takes (a judgment, campaign settings and a template nest 2-3 levels), far
# below the ~900 where Python's parser gives up.
JSON_DEPTH_MAX = 64

_STRING_BYTES = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_STRING_TEXT = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


class JSONTooDeep(ValueError):
    """A JSON text nested deeper than allowed (a ValueError, as json.loads raises for bad JSON)."""

    def __init__(self, depth: int, limit: int) -> None:
        self.depth, self.limit = depth, limit
        super().__init__(f"JSON nested {depth} levels deep; at most {limit} are accepted")


def json_depth(data: bytes | bytearray | memoryview | str) -> int:
    """The deepest nesting of arrays and objects in ``data`` (0 for a scalar)."""
    if isinstance(data, str):
        bare = _STRING_TEXT.sub("", data).encode("utf-8", "replace")
    else:
        bare = _STRING_BYTES.sub(b"", bytes(data))
    if not bare:
        return 0
    steps = _STEP[np.frombuffer(bare, dtype=np.uint8)]
    if not steps.any():
        return 0
    return max(int(np.cumsum(steps, dtype=np.int64).max()), 0)


def json_depth_check(data: bytes | bytearray | memoryview | str, limit: int = JSON_DEPTH_MAX) -> None:
    """JSONTooDeep when ``data`` nests deeper than ``limit``."""
    depth = json_depth(data)
    if depth > limit:
        raise JSONTooDeep(depth, limit)


def json_loads(data: bytes | bytearray | str, limit: int = JSON_DEPTH_MAX) -> Any:
    """``json.loads`` of text from outside, refused (JSONTooDeep, a ValueError) past ``limit`` levels."""
    json_depth_check(data, limit)
    return json.loads(data)
