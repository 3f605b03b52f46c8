"""Array types shared by the metrics modules' annotations (numpy's own typing, no runtime effect)."""

from typing import Any

import numpy as np
import numpy.typing as npt

#: Scores, p-values and every measure's output.
FloatArray = npt.NDArray[np.float64]
#: Labels, qrels, counts and indices. The width is the caller's (int8 labels are the fastest, counts are
#: int64, indices intp), so the bit-width parameter stays open: that is how numpy spells "any integer".
IntArray = npt.NDArray[np.integer[Any]]
BoolArray = npt.NDArray[np.bool_]
#: Ratings and grades: integers (MISSING where absent) or floats (NaN where absent).
NumberArray = npt.NDArray[np.number[Any]]
#: Document and query ids: strings, bytes or integers, whatever the caller's runs hold.
IdArray = npt.NDArray[np.generic]
