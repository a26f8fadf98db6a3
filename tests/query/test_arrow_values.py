"""`query.arrow_values` builds the same scalars and arrays as pyarrow's own constructors."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from torchfits.query.arrow_values import arrow_array, arrow_scalar, int64_array


@pytest.mark.parametrize("value, pa_type", [
    (1, pa.int8()), (-5, pa.int16()), (2**63 - 1, pa.int64()), (2**64 - 1, pa.uint64()),
    (1.5, pa.float32()), (np.float16(0.1), pa.float16()), (0.1, pa.float64()), (-0.0, pa.float64()),
    (True, pa.bool_()), (False, pa.bool_()), ("abc", pa.string()), ("", pa.large_string()),
    ("é", pa.string()), (b"\x00x", pa.binary()), (b"xy", pa.large_binary()),
    (None, pa.float32()), (None, pa.bool_()),
])
def test_scalar_matches_pyarrow(value, pa_type):
    got, want = arrow_scalar(value, pa_type), pa.scalar(value, pa_type)
    assert got.type == want.type and got.equals(want)


@pytest.mark.parametrize("values, pa_type", [
    ([1, 2, 3], pa.int32()), ([True, False, True] * 5, pa.bool_()), (["a", "bc", ""], pa.string()),
    ([b"a", b""], pa.binary()), ([0.5, -0.0], pa.float64()), ([], pa.int64()), ([None, None], pa.int16()),
    ([1, None], pa.int16()),
])
def test_array_matches_pyarrow(values, pa_type):
    assert arrow_array(values, pa_type).equals(pa.array(values, pa_type))


def test_int64_array():
    rows = np.array([3, 1, 2], dtype=np.int32)
    assert int64_array(rows).equals(pa.array([3, 1, 2], pa.int64()))
    assert int64_array(np.arange(10)[::3]).to_pylist() == [0, 3, 6, 9]
