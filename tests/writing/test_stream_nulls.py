"""Streamed tables: a TNULL chosen before the data are seen never turns a later value into a null.

The oracle is fitsio: it reads the stored integers (TZERO applied, TNULL not), so the expected
nulls are exactly the cells equal to the header's TNULL, and every other cell must equal the
value that was written.
"""
from __future__ import annotations

import numpy as np
import pytest

from _writecheck import fitsverify_ok, leftovers
from torchfits.writing.api import write

pa = pytest.importorskip("pyarrow")
fitsio = pytest.importorskip("fitsio")

TYPES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
         "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1),
         "uint64": (0, 2**64 - 1)}


def _write_stream(path, schema, batches):
    write(path, pa.RecordBatchReader.from_batches(schema, iter(batches)))


def _check(path, name, want):
    """fitsio's stored values: nulls exactly where ``want`` has None, the values elsewhere."""
    raw = fitsio.read(str(path), ext=1)[name]
    header = fitsio.read_header(str(path), ext=1)
    n = [k for k in header.keys() if k.startswith("TTYPE") and header[k] == name][0][5:]
    tnull, tzero = int(header[f"TNULL{n}"]), int(header.get(f"TZERO{n}", 0))
    raw = raw.reshape(len(raw), -1)
    flat = [w if isinstance(w, list) else [w] for w in want]
    for row, cells in zip(raw, flat):
        for stored, expected in zip(row.tolist(), cells):
            if expected is None:
                assert stored - tzero == tnull  # TNULL names the stored integer
            else:
                assert stored == expected
    import torchfits

    assert torchfits.scan(str(path)).to_arrow().column(name).to_pylist() == want


@pytest.mark.parametrize("kind", list(TYPES))
def test_a_later_batch_holding_the_tnull_keeps_its_value(tmp_path, kind):
    t = pa.from_numpy_dtype(np.dtype(kind))
    lo, hi = TYPES[kind]
    extreme = lo if lo < 0 else hi  # where the usual sentinel sits
    inward = extreme + (1 if extreme == lo else -1)
    schema = pa.schema([("x", t), ("v", pa.list_(t, 2))])

    def batch(x, v):
        return pa.record_batch([pa.array(x, t), pa.FixedSizeListArray.from_arrays(pa.array(v, t), 2)],
                               schema=schema)

    xs = [[1, None, 3], [extreme, 5, None], [inward, None, 7]]
    vs = [[1, None, 2, 3, None, None], [extreme, 1, None, 2, inward, 4], [1, 2, 3, 4, 5, None]]
    _write_stream(tmp_path / "s.fits", schema, [batch(x, v) for x, v in zip(xs, vs)])
    _check(tmp_path / "s.fits", "x", sum(xs, []))
    _check(tmp_path / "s.fits", "v", [sum(vs, [])[i:i + 2] for i in range(0, 18, 2)])
    fitsverify_ok(tmp_path / "s.fits")


def test_a_hinted_tnull_that_a_later_value_takes_moves(tmp_path):
    schema = pa.schema([pa.field("x", pa.int32(), metadata={"fits_tnull": "-999"})])
    batches = [pa.record_batch([pa.array([None, 1])], schema=schema),
               pa.record_batch([pa.array([-999, None, -2**31])], schema=schema)]
    _write_stream(tmp_path / "h.fits", schema, batches)
    _check(tmp_path / "h.fits", "x", [None, 1, -999, None, -2**31])


def test_no_nulls_before_the_collision_rewrites_nothing(tmp_path):
    schema = pa.schema([("x", pa.int16())])
    batches = [pa.record_batch([pa.array([1, 2])], schema=schema),
               pa.record_batch([pa.array([-32768, -32767, None])], schema=schema)]
    _write_stream(tmp_path / "n.fits", schema, batches)
    _check(tmp_path / "n.fits", "x", [1, 2, -32768, -32767, None])


def test_many_nulls_across_many_batches(tmp_path):
    rng = np.random.default_rng(3)
    schema = pa.schema([("x", pa.int64())])
    want: list = []
    batches = []
    for i in range(20):
        values = rng.integers(-5, 5, 500).astype(object)
        values[rng.random(500) < 0.3] = None
        if i in (7, 13):  # the usual sentinel, then the next one inward, arrive late
            values[10] = -2**63 + (i == 13)
        want += values.tolist()
        batches.append(pa.record_batch([pa.array(values.tolist(), pa.int64())], schema=schema))
    _write_stream(tmp_path / "m.fits", schema, batches)
    _check(tmp_path / "m.fits", "x", want)
    assert fitsio.read_header(str(tmp_path / "m.fits"), ext=1)["TNULL1"] == -2**63 + 2


def test_a_column_without_a_free_value_near_its_sentinel_is_refused(tmp_path):
    schema = pa.schema([("x", pa.int16())])
    batches = [pa.record_batch([pa.array([None])], schema=schema),
               pa.record_batch([pa.array(np.arange(-32768, -32768 + 5000, dtype=np.int16))],
                               schema=schema)]
    with pytest.raises(ValueError, match="'x'.*TNULL"):
        _write_stream(tmp_path / "r.fits", schema, batches)
    assert leftovers(tmp_path) == [] and not (tmp_path / "r.fits").exists()


@pytest.mark.parametrize("backing", ["file", "buffer"])
def test_sink_patch_many(tmp_path, backing):
    """`Sink.patch_many` overwrites each place and leaves the stream where it was, through a
    file descriptor (pwrite) or a plain buffer (seek and write)."""
    import io

    from torchfits.writing.atomic import Sink

    fh = open(tmp_path / "s.bin", "w+b") if backing == "file" else io.BytesIO()
    with fh:
        sink = Sink(fh, "s.bin")
        sink.write(bytes(range(32)))
        sink.patch_many([1, 9, 30], b"\xff\xee")
        sink.write(b"\x01")
        fh.flush()
        fh.seek(0)
        got = fh.read()
    want = bytearray(range(32)) + b"\x01"
    for at in (1, 9, 30):
        want[at:at + 2] = b"\xff\xee"
    assert got == bytes(want)
