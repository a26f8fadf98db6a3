"""The row kernel agrees with pyarrow.compute on the decoded table, for any predicate.

Tables mix integer, unsigned, scaled, TNULL, NaN/Inf, logical and string columns; expressions
are drawn at random. ``pushdown=False`` evaluates the same tree with pyarrow only (the oracle).
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torchfits
from torchfits.tables.decode_options import DecodeOptions
from torchfits.tables.scan import Scanner
from torchfits.tables.source import TableSource

fits = pytest.importorskip("astropy.io.fits")
fitsio = pytest.importorskip("fitsio")

N = 400


def _write_table(path, N):
    rng = np.random.default_rng(7)
    i16 = rng.integers(-32768, 32767, N, dtype=np.int16)
    i16[::17] = -999  # TNULL sentinel rows
    u16 = rng.integers(0, 65535, N).astype(np.uint16)
    i32 = rng.integers(-(2**31), 2**31 - 1, N, dtype=np.int64).astype(np.int32)
    i64 = rng.integers(-(2**62), 2**62, N, dtype=np.int64)
    i64[:3] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0]
    f32 = rng.normal(0, 100, N).astype(np.float32)
    f32[::13] = np.nan
    f32[5] = np.inf
    f64 = rng.normal(0, 1e6, N)
    f64[::11] = np.nan
    scaled = rng.integers(-1000, 1000, N).astype(np.int16)
    byte = rng.integers(0, 255, N).astype(np.uint8)
    flag = rng.random(N) < 0.5
    names = np.array([f"s{int(v) % 20}" for v in rng.integers(0, 100, N)])
    # sky positions for cone(): RA over the whole circle (a few stored as -180..180), DEC
    # crowding both poles, NaN in both
    ra = rng.uniform(0, 360, N)
    ra[::7] -= 360.0
    ra[::19] = np.nan
    dec = np.degrees(np.arcsin(rng.uniform(-1, 1, N))).astype(np.float32)
    dec[:6] = [90, -90, 89.99999, -89.99999, 0, 0]
    dec[::23] = np.nan
    # Raw stored values written by fitsio, scaling/null keywords added after (fitsio writes
    # the bytes as given), so the file holds exactly the conventions under test.
    rec = np.zeros(N, dtype=[("I16", ">i2"), ("U16", ">i2"), ("I32", ">i4"), ("I64", ">i8"),
                             ("F32", ">f4"), ("F64", ">f8"), ("SC", ">i2"), ("B", "u1"),
                             ("L", "?"), ("S", "S4"), ("RA", ">f8"), ("DEC", ">f4")])
    rec["I16"], rec["I32"], rec["I64"], rec["F32"], rec["F64"] = i16, i32, i64, f32, f64
    rec["U16"] = (u16.astype(np.int32) - 32768).astype(np.int16)
    rec["SC"], rec["B"], rec["L"], rec["S"] = scaled, byte, flag, names.astype("S4")
    rec["RA"], rec["DEC"] = ra, dec
    keys = [{"name": "TNULL1", "value": -999}, {"name": "TZERO2", "value": 32768},
            {"name": "TSCAL2", "value": 1}, {"name": "TSCAL7", "value": 0.25},
            {"name": "TZERO7", "value": 3.5}]
    fitsio.write(str(path), rec, header=keys, clobber=True)
    return str(path)


@pytest.fixture(scope="module")
def table_path(tmp_path_factory):
    return _write_table(tmp_path_factory.mktemp("pushdown") / "t.fits", N)


@pytest.fixture(scope="module")
def big_table_path(tmp_path_factory):
    # more rows than one kernel block (1,024), so block edges and parallel pieces are crossed
    return _write_table(tmp_path_factory.mktemp("pushdown") / "big.fits", 2_600)


_COLUMNS = {
    "I16": st.integers(-40000, 40000),
    "U16": st.integers(-10, 70000),
    "I32": st.integers(-(2**32), 2**32),
    "I64": st.integers(-(2**64), 2**64),
    "F32": st.floats(-300, 300, allow_nan=False, width=32) | st.integers(-300, 300),
    "F64": st.floats(-3e6, 3e6, allow_nan=False) | st.sampled_from([float("inf"), -float("inf")]),
    "SC": st.floats(-300, 300, allow_nan=False) | st.integers(-300, 300),
    "B": st.integers(-5, 300) | st.floats(-5, 300, allow_nan=False),
}
_OPS = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])


def _literal(v):
    if isinstance(v, float) and np.isinf(v):
        return "1e999" if v > 0 else "-1e999"  # the dialect has no inf keyword; this overflows to it
    return repr(v) if isinstance(v, float) else str(v)


@st.composite
def predicates(draw, depth=0):
    kind = draw(st.sampled_from(["cmp", "cmp", "between", "in", "null", "bool", "cone"] +
                                (["and", "or", "not"] if depth < 3 else [])))
    col = draw(st.sampled_from(sorted(_COLUMNS)))
    if kind == "cmp":
        v = draw(_COLUMNS[col])
        if draw(st.booleans()):
            return f"{col} {draw(_OPS)} {_literal(v)}"
        return f"{_literal(v)} {draw(_OPS)} {col}"
    if kind == "between":
        lo, hi = sorted([draw(_COLUMNS[col]), draw(_COLUMNS[col])])
        neg = "NOT " if draw(st.booleans()) else ""
        return f"{col} {neg}BETWEEN {_literal(lo)} AND {_literal(hi)}"
    if kind == "in":
        values = draw(st.lists(_COLUMNS[col], min_size=1, max_size=4))
        neg = "NOT " if draw(st.booleans()) else ""
        return f"{col} {neg}IN ({', '.join(_literal(v) for v in values)})"
    if kind == "null":
        return f"{draw(st.sampled_from(['I16', 'F32', 'L']))} IS {'NOT ' if draw(st.booleans()) else ''}NULL"
    if kind == "bool":
        return f"L {draw(st.sampled_from(['==', '!=']))} {draw(st.sampled_from(['True', 'False', '1', '0']))}"
    if kind == "cone":
        # centres off the ends of the RA range and at the poles, radii from 1e-9 to 180 deg (0 is refused)
        ra0 = draw(st.floats(-400, 400, allow_nan=False) | st.sampled_from([0.0, 360.0, -180.0]))
        dec0 = draw(st.floats(-90, 90, allow_nan=False) | st.sampled_from([90.0, -90.0, 0.0]))
        r = draw(st.floats(1e-9, 120) | st.sampled_from([1e-9, 90.0, 180.0]))
        if draw(st.booleans()):
            return f"cone(RA, DEC, {ra0!r}, {dec0!r}, {r!r})"
        return f"separation(RA, DEC, {ra0!r}, {dec0!r}) {draw(st.sampled_from(['<', '<=']))} {r!r}"
    if kind == "not":
        return f"NOT ({draw(predicates(depth + 1))})"
    op = "AND" if kind == "and" else "OR"
    return f"({draw(predicates(depth + 1))}) {op} ({draw(predicates(depth + 1))})"


def _rows(path, where, *, pushdown, mapping="native", rows=None):
    src = TableSource.open(path, 1)
    s = Scanner([src], columns=["I64"], where=where, pushdown=pushdown, rows=rows, batch_size=128,
                options=DecodeOptions(mapping=mapping))
    return s.to_arrow().column("I64").to_pylist(), s


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=predicates(), mapping=st.sampled_from(["native", "compat"]))
def test_kernel_matches_pyarrow(table_path, where, mapping):
    from torchfits.query import expr as _expr

    got, scanner = _rows(table_path, where, pushdown=True, mapping=mapping)
    want, oracle = _rows(table_path, where, pushdown=False, mapping=mapping)
    assert not oracle._kernel
    assert got == want, where
    # and against pyarrow.compute on the fully decoded table
    decoded = Scanner([TableSource.open(table_path, 1)], options=DecodeOptions(mapping=mapping)).to_arrow()
    tree = _expr.parse(where, columns=set(decoded.column_names))
    full = decoded.filter(_expr.to_pyarrow(tree, decoded.schema)).column("I64").to_pylist()
    assert got == full, where


def test_kernel_is_used_for_supported_forms(table_path):
    _, s = _rows(table_path, "I16 > 3 AND F32 BETWEEN -1 AND 50 AND L == True AND U16 IN (1, 2)",
                 pushdown=True)
    assert s._kernel and s._residual is None
    _, s = _rows(table_path, "I16 > 3 AND S == 's3'", pushdown=True)
    assert s._kernel and s._residual is not None


def test_row_indices_and_ranges(table_path):
    rows = [399, 0, 5, 5, 17, 200]
    got, _ = _rows(table_path, "I16 IS NULL OR F32 > 0", pushdown=True, rows=rows)
    want, _ = _rows(table_path, "I16 IS NULL OR F32 > 0", pushdown=False, rows=rows)
    assert got == want


def test_tnull_and_nan_never_match(table_path):
    t = torchfits.scan(table_path, columns=["I16", "F32"], where="I16 != 12345 AND F32 != 1.5").to_arrow()
    assert t.column("I16").null_count == 0
    assert not np.isnan(t.column("F32").to_numpy()).any()
    stored = fits.getdata(table_path, 1)["I16"]
    negated = torchfits.scan(table_path, columns=["I16"], where="NOT (I16 == 12345)").to_arrow()
    assert negated.num_rows == int(((stored != -999) & (stored != 12345)).sum())
    assert negated.column("I16").null_count == 0


@st.composite
def conjunctions(draw):
    """ANDs of 1 to 4 terms, each a leaf form the fused conjunction kernel runs (or, sometimes,
    an OR/NOT term that sends the whole predicate to the fused three-valued program)."""
    terms = draw(st.lists(predicates(depth=3), min_size=1, max_size=4))
    return " AND ".join(f"({t})" for t in terms)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=conjunctions(), mapping=st.sampled_from(["native", "compat"]),
       threads=st.sampled_from([1, 2, 3]), use_rows=st.booleans(), seed=st.integers(0, 2**16))
def test_fused_parallel_matches_pyarrow(big_table_path, monkeypatch, where, mapping, threads,
                                        use_rows, seed):
    from torchfits.query import pushdown

    # tiny parallel pieces, so every piece edge (inside and across kernel blocks) is exercised
    monkeypatch.setattr(pushdown, "_PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(pushdown, "_ALIGN", 7)
    nrows = 2_600
    rows = None
    if use_rows:
        rows = np.random.default_rng(seed).integers(0, nrows, 3_000)  # unordered, repeated
    src = TableSource.open(big_table_path, 1)
    s = Scanner([src], columns=["I64"], where=where, rows=rows, batch_size=nrows + 5_000,
                options=DecodeOptions(mapping=mapping, threads=threads))
    o = Scanner([TableSource.open(big_table_path, 1)], columns=["I64"], where=where,
                rows=rows, pushdown=False, options=DecodeOptions(mapping=mapping))
    got = s.to_arrow().column("I64").to_pylist()
    assert got == o.to_arrow().column("I64").to_pylist(), where
    assert s.selected_rows()[0].tolist() == o.selected_rows()[0].tolist(), where
    assert s._kernel and s._plan_of(s._sources[0]).fused is not None


def test_fused_conjunction_merges_ranges_and_orders_terms():
    import pyarrow as pa
    from astropy.io.fits import Header

    from torchfits.fits.columns import parse_columns
    from torchfits.query import expr as _expr
    from torchfits.query.pushdown import fuse, plan_pushdown

    h = Header()
    for k, v in [("XTENSION", "BINTABLE"), ("BITPIX", 8), ("NAXIS", 2), ("NAXIS1", 12),
                 ("NAXIS2", 0), ("PCOUNT", 0), ("GCOUNT", 1), ("TFIELDS", 2),
                 ("TTYPE1", "a"), ("TFORM1", "D"), ("TTYPE2", "b"), ("TFORM2", "J")]:
        h[k] = v
    specs = parse_columns(h, "bintable")
    types = {"a": pa.float64(), "b": pa.int32()}
    tree = _expr.parse("a BETWEEN 1 AND 5 AND b > 3 AND b <= 9 AND a < 4", columns={"a", "b"})
    plans, residual = plan_pushdown(tree, specs, types, mapping="native", apply_nulls=True)
    assert residual is None
    fused = fuse(plans)
    assert fused.conjunction is not None
    tests, floats = fused.conjunction
    assert len(tests) == 2  # one range test per column
    assert floats[0, 2] == 1.0 and floats[0, 3] == np.nextafter(4.0, -np.inf)
    assert tests[1, 5] == 4 and tests[1, 6] == 9
    rows = np.zeros(6, dtype=[("a", ">f8"), ("b", ">i4")])
    rows["a"] = [0.5, 1.0, 3.9, 4.0, np.nan, 2.0]
    rows["b"] = [5, 4, 9, 5, 5, 10]
    got = fused.select(rows.tobytes(), 12, first=0, count=6)
    assert got.tolist() == [1, 2]
    # an OR term: the same rows through the three-valued program
    tree = _expr.parse("(a < 4 OR b < 0) AND a >= 1 AND b BETWEEN 4 AND 9", columns={"a", "b"})
    plans, _ = plan_pushdown(tree, specs, types, mapping="native", apply_nulls=True)
    fused = fuse(plans)
    assert fused.conjunction is None
    assert fused.select(rows.tobytes(), 12, first=0, count=6).tolist() == [1, 2]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=conjunctions(), batch=st.integers(1, 1_500), threads=st.booleans(),
       take=st.integers(1, 12))
def test_dataset_stream_matches_pyarrow(big_table_path, where, batch, threads, take):
    """The dataset's batch stream (tasks run ahead on the pool while the consumer reads, as
    DuckDB does) gives the kernel's rows in order, the same as pyarrow on the decoded table;
    a consumer stopping early gets a prefix of them."""
    ds = torchfits.dataset(big_table_path)
    oracle = Scanner([TableSource.open(big_table_path, 1)], columns=["I64"], where=where,
                     pushdown=False).to_arrow().column("I64").to_pylist()
    scanner = ds.scanner(columns=["I64"], filter=where, batch_size=batch, use_threads=threads)
    got = [v for b in scanner.to_reader() for v in b.column(0).to_pylist()]
    assert got == oracle, where
    stream = ds.scanner(columns=["I64"], filter=where, batch_size=batch).to_batches()
    prefix = []
    for _, b in zip(range(take), stream):
        prefix += b.column(0).to_pylist()
    stream.close()
    assert prefix == oracle[:len(prefix)], where


_ALL_COLUMNS = ["I16", "U16", "I32", "I64", "F32", "F64", "SC", "B", "L", "S"]


def _nan_safe(v):
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, (list, tuple)):
        return [_nan_safe(x) for x in v]
    if isinstance(v, dict):
        return {k: _nan_safe(x) for k, x in v.items()}
    return v


def _assert_same_table(got, want, where):
    """Same schema (with metadata) and the same values, NaN equal to NaN."""
    assert got.schema.equals(want.schema, check_metadata=True), where
    assert _nan_safe(got.to_pydict()) == _nan_safe(want.to_pydict()), where


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=conjunctions(), mapping=st.sampled_from(["native", "compat"]),
       threads=st.sampled_from([1, 2, 3]), batch=st.sampled_from([100, 1_024, 10_000]),
       apply_nulls=st.booleans(), piece_bytes=st.sampled_from([1, 16 << 20]))
def test_one_pass_decode_matches_pyarrow(big_table_path, monkeypatch, where, mapping, threads,
                                         batch, apply_nulls, piece_bytes):
    """Selecting and decoding in one pass gives every column kind (TNULL, unsigned, scaled,
    NaN/Inf, logical, strings) exactly as pyarrow's filter of the decoded table, across kernel
    blocks, batch edges, parallel pieces and pieces cut by the output budget."""
    from torchfits.tables import column_plan, decode

    monkeypatch.setattr(column_plan, "_PARALLEL_MIN_BYTES", 0)  # tiny pieces: joined afterwards
    monkeypatch.setattr(column_plan, "_CHUNK_ALIGN", 8)
    monkeypatch.setattr(decode, "_WHERE_PIECE_BYTES", piece_bytes)  # 1: 8-row pieces
    opts = dict(columns=_ALL_COLUMNS, where=where, batch_size=batch)
    s = Scanner([TableSource.open(big_table_path, 1)], **opts,
                options=DecodeOptions(mapping=mapping, apply_nulls=apply_nulls, threads=threads))
    got = s.to_arrow()
    want = Scanner([TableSource.open(big_table_path, 1)], pushdown=False, **opts,
                   options=DecodeOptions(mapping=mapping, apply_nulls=apply_nulls)).to_arrow()
    _assert_same_table(got, want, where)


def test_one_pass_decode_of_vectors_bits_and_complex(tmp_path, monkeypatch):
    """Vector, bit, complex and TNULL columns of the rows a conjunction keeps,
    decoded in the selecting pass, equal the decoded table filtered by pyarrow."""
    n = 3_000
    rng = np.random.default_rng(3)
    cols = fits.ColDefs([
        fits.Column("K", "K", array=rng.integers(-50, 50, n), null=7),
        fits.Column("V", "3E", array=rng.normal(size=(n, 3)).astype(np.float32)),
        fits.Column("X", "11X", array=rng.random((n, 11)) < 0.5),
        fits.Column("LV", "2L", array=rng.random((n, 2)) < 0.5),
        fits.Column("C", "C", array=(rng.normal(size=n) + 1j * rng.normal(size=n)).astype(np.complex64)),
        fits.Column("J", "J", array=rng.integers(-1000, 1000, n).astype(np.int32)),
        fits.Column("T", "6A", array=np.array([f"r{i % 97}" for i in range(n)])),
    ])
    path = str(tmp_path / "kinds.fits")
    fits.BinTableHDU.from_columns(cols).writeto(path)
    from torchfits.query.pushdown import FusedPredicate
    from torchfits.tables import source

    one_pass = []
    real = source.decode_table_where
    monkeypatch.setattr(source, "decode_table_where", lambda *a, **k: one_pass.append(1) or real(*a, **k))
    for where in ("K > -20 AND J < 200", "K != 3", "J BETWEEN -100 AND 100 AND K <= 0"):
        one_pass.clear()
        with monkeypatch.context() as m:
            m.setattr(FusedPredicate, "select", lambda *a, **k: pytest.fail("a separate selection pass"))
            got = Scanner([TableSource.open(path, 1)], where=where, batch_size=700).to_arrow()
        assert one_pass, where
        want = Scanner([TableSource.open(path, 1)], where=where, pushdown=False).to_arrow()
        assert got.num_rows > 0
        _assert_same_table(got, want, where)
