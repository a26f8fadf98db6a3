"""The native scanner: projection, row selection, predicates, streaming and every output form."""
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

fits = pytest.importorskip("astropy.io.fits")

import torchfits
from torchfits.errors import ColumnNotFoundError, HDUTypeError, WhereSyntaxError

N = 5000


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    rng = np.random.default_rng(11)
    path = tmp_path_factory.mktemp("scan") / "cat.fits"
    flux = rng.normal(10, 3, N).astype(np.float32)
    flux[::97] = np.nan
    counts = rng.integers(-100, 100, N).astype(np.int16)
    cols = [
        fits.Column("ID", "K", array=np.arange(N)),
        fits.Column("RA", "D", array=rng.uniform(0, 360, N), unit="deg"),
        fits.Column("FLUX", "E", array=flux),
        fits.Column("CNT", "I", array=counts, null=-100),
        fits.Column("NAME", "6A", array=np.array([f"s{i % 50}" for i in range(N)])),
        fits.Column("VEC", "3E", array=rng.normal(size=(N, 3)).astype(np.float32)),
    ]
    hdu = fits.BinTableHDU.from_columns(cols, name="CAT")
    hdu.header["ORIGIN"] = "test"
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    return str(path)


@pytest.fixture(scope="module")
def full(catalog):
    return torchfits.scan(catalog).to_arrow()


def test_full_read_matches_astropy(catalog, full):
    ref = fits.getdata(catalog, 1)
    assert full.num_rows == N
    np.testing.assert_array_equal(full.column("ID").to_numpy(), ref["ID"])
    np.testing.assert_array_equal(full.column("RA").to_numpy(), ref["RA"])
    got = full.column("FLUX").to_numpy(zero_copy_only=False)
    np.testing.assert_array_equal(got.view(np.uint32), ref["FLUX"].astype(np.float32).view(np.uint32))
    cnt = full.column("CNT")
    assert cnt.null_count == int((ref["CNT"] == -100).sum())
    assert full.column("NAME").to_pylist()[:3] == ["s0", "s1", "s2"]
    assert full.schema.field("VEC").type == pa.list_(pa.float32(), 3)


def test_projection_order_and_errors(catalog):
    t = torchfits.scan(catalog, "CAT", columns=["NAME", "ID"]).to_arrow()
    assert t.column_names == ["NAME", "ID"]
    with pytest.raises(ColumnNotFoundError, match="NOPE"):
        torchfits.scan(catalog, columns=["NOPE"])
    with pytest.raises(HDUTypeError):
        torchfits.scan(catalog, 0)


def test_rows_and_row_slice(catalog, full):
    t = torchfits.scan(catalog, columns=["ID"], rows=[7, 3, 3, 4999]).to_arrow()
    assert t.column("ID").to_pylist() == [7, 3, 3, 4999]
    t = torchfits.scan(catalog, columns=["ID"], row_slice=(10, 20)).to_arrow()
    assert t.column("ID").to_pylist() == list(range(10, 20))
    t = torchfits.scan(catalog, columns=["ID"], row_slice=slice(4990, None)).to_arrow()
    assert t.num_rows == 10
    with pytest.raises(IndexError):
        torchfits.scan(catalog, rows=[N])
    with pytest.raises(ValueError):
        torchfits.scan(catalog, rows=[1], row_slice=(0, 2))


@pytest.mark.parametrize("where", [
    "FLUX > 12 AND CNT < 0",
    "CNT IS NULL OR RA BETWEEN 10 AND 20",
    "NAME == 's7' AND FLUX > 9",
    "abs(CNT) < 10 AND FLUX - 10 > 1",
    "NOT (FLUX <= 10) AND ID IN (1, 2, 3, 4, 5, 6, 7, 8, 9)",
    "bit(ID, 2) AND RA > 100",
])
def test_where_equals_filter_of_full_table(catalog, full, where):
    from torchfits.query import expr as _expr

    got = torchfits.scan(catalog, where=where, batch_size=777).to_arrow()
    tree = _expr.parse(where, columns=set(full.column_names))
    want = full.filter(_expr.to_pyarrow(tree, full.schema))
    assert got.column("ID").to_pylist() == want.column("ID").to_pylist()
    assert got.num_rows > 0


def test_where_within_rows_keeps_order(catalog, full):
    rows = [4000, 10, 3000, 10, 20]
    got = torchfits.scan(catalog, columns=["ID"], rows=rows, where="ID >= 20").to_arrow()
    assert got.column("ID").to_pylist() == [4000, 3000, 20]


def test_filter_expression_and_where_combine(catalog, full):
    expr = (pc.field("FLUX") > 8) & (pc.field("NAME") != "s1")
    got = torchfits.scan(catalog, columns=["ID"], filter=expr, where="RA < 180").to_arrow()
    want = full.filter(expr & (pc.field("RA") < 180))
    assert got.column("ID").to_pylist() == want.column("ID").to_pylist()


def test_where_errors_point_at_the_token(catalog):
    with pytest.raises(WhereSyntaxError) as ei:
        torchfits.scan(catalog, where="FLUX > > 3")
    assert "position" in str(ei.value)
    with pytest.raises(ValueError, match="unknown column 'NOPE'"):
        torchfits.scan(catalog, where="NOPE > 3")


def test_batches_are_bounded(catalog):
    sizes = [b.num_rows for b in torchfits.scan(catalog, columns=["ID"], batch_size=1000).to_batches()]
    assert sizes == [1000] * 5
    sizes = [b.num_rows for b in torchfits.scan(catalog, where="FLUX > 10", batch_size=1000).to_batches()]
    assert all(0 < s <= 1000 for s in sizes)
    with pytest.raises(ValueError, match="batch_size"):
        torchfits.scan(catalog, batch_size=0)


def test_string_columns_split_batches_at_the_arrow_limit(catalog, full, monkeypatch):
    """A batch's fixed-width strings must fit one Arrow string array (int32 offsets, 2 GiB).
    The limit is lowered so that NAME (6A) allows 700 rows a batch: whole-file reads, where
    queries (one pass and residual) and datasets come back in batches under it, equal to the
    unsplit read; a direct decode past it is refused instead of wrapping the offsets."""
    from _tablehelpers import assert_batches_equal
    from torchfits.errors import UnsupportedColumnError
    from torchfits.tables import column_plan

    monkeypatch.setattr(column_plan, "_INT32_MAX", 6 * 700)
    split = torchfits.scan(catalog).to_arrow()
    assert max(len(c) for c in split.column("NAME").chunks) == 700
    assert split.column("NAME").num_chunks == 8
    def batch(table):
        return table.combine_chunks().to_batches()[0]

    assert_batches_equal(batch(split), batch(full))  # floats bit for bit: FLUX holds NaNs
    # Columns without strings are not split.
    assert torchfits.scan(catalog, columns=["ID", "RA"]).to_arrow().column("ID").num_chunks == 1
    for where in ("RA < 300", "RA < 300 AND NAME != 's1'"):  # one-pass kernel; residual
        got = torchfits.scan(catalog, where=where).to_arrow()
        assert all(len(c) <= 700 for c in got.column("NAME").chunks)
        want = full.filter(pc.field("RA") < 300)
        if "NAME" in where:
            want = want.filter(pc.field("NAME") != "s1")
        assert_batches_equal(batch(got), batch(want))
    ds = torchfits.dataset(catalog).to_table(columns=["ID", "NAME"])
    assert ds.column("NAME").to_pylist() == full.column("NAME").to_pylist()

    from torchfits.tables.decode_options import DecodeOptions
    from torchfits.tables.source import TableSource

    src = TableSource.open(catalog, 1)
    with pytest.raises(UnsupportedColumnError, match=r"NAME.*32-bit Arrow string array"):
        src.decode(columns=["NAME"], row_range=(0, 701), options=DecodeOptions())
    assert src.decode(columns=["NAME"], row_range=(0, 700), options=DecodeOptions()).num_rows == 700


def test_one_pass_choice_follows_the_projection(tmp_path):
    """A copy of a scanner that projects other columns (to_torch_batches(columns=...) makes
    one) decides the one-pass decode for its own projection: a variable-length column there
    rules it out even after the original ran it."""
    import copy

    n = 3000
    cols = [fits.Column("X", "J", array=np.arange(n, dtype=np.int32)),
            fits.Column("V", "PE()", array=[np.arange(i % 4, dtype=np.float32) for i in range(n)])]
    path = tmp_path / "vla.fits"
    fits.BinTableHDU.from_columns(cols).writeto(path)
    scanner = torchfits.scan(str(path), columns=["X"], where="X >= 2990")
    assert scanner.to_arrow().column("X").to_pylist() == list(range(2990, 3000))
    other = copy.copy(scanner)
    other._projection = ["X", "V"]
    got = other.to_arrow()
    assert got.column("V").to_pylist() == [list(map(float, range(i % 4))) for i in range(2990, 3000)]


def test_counts_and_head(catalog, full):
    assert torchfits.scan(catalog).count_rows() == N
    s = torchfits.scan(catalog, where="CNT > 50")
    assert s.count_rows() == s.to_arrow().num_rows
    head = torchfits.scan(catalog, columns=["ID"], where="ID > 100").head(3)
    assert head.column("ID").to_pylist() == [101, 102, 103]


def test_schema_carries_fits_metadata(catalog, tmp_path):
    import pyarrow.parquet as pq
    s = torchfits.scan(catalog, columns=["RA", "CNT"])
    meta = s.schema.metadata
    assert meta[b"fits_extname"] == b"CAT" and meta[b"fits_hdu"] == b"1"
    assert b"ORIGIN  = 'test" in meta[b"fits_header"]
    assert s.schema.field("RA").metadata[b"fits_tunit"] == b"deg"
    assert s.schema.field("CNT").metadata[b"fits_tnull"] == b"-100"
    pq.write_table(s.to_arrow(), tmp_path / "t.parquet")
    back = pq.read_schema(tmp_path / "t.parquet")
    assert back.metadata[b"fits_extname"] == b"CAT" and back.field("RA").metadata[b"fits_tunit"] == b"deg"


def test_arrow_stream_consumers(catalog):
    s = torchfits.scan(catalog, columns=["ID", "FLUX"], where="FLUX > 15")
    n = s.count_rows()
    assert pa.table(s).num_rows == n
    reader = s.to_reader()
    assert isinstance(reader, pa.RecordBatchReader) and reader.read_all().num_rows == n
    duckdb = pytest.importorskip("duckdb")
    assert duckdb.sql("SELECT count(*) FROM s").fetchall()[0][0] == n
    pl = pytest.importorskip("polars")
    assert pl.from_arrow(s.to_arrow()).height == n
    assert s.to_polars().height == n
    assert len(s.to_pandas()) == n


def test_to_numpy(catalog, full):
    arrays = torchfits.scan(catalog, columns=["ID", "FLUX", "CNT", "NAME", "VEC"]).to_numpy()
    assert arrays["VEC"].shape == (N, 3)
    assert np.isnan(arrays["FLUX"][0])  # NaN rows stay NaN
    assert isinstance(arrays["CNT"], np.ma.MaskedArray) and arrays["CNT"].mask.sum() > 0
    assert arrays["NAME"][3] == "s3"


def test_to_torch(catalog):
    torch = pytest.importorskip("torch")
    t = torchfits.scan(catalog, columns=["ID", "RA", "VEC"]).to_torch(dtype=torch.float32)
    assert t["ID"].dtype == torch.int64 and t["RA"].dtype == torch.float32
    assert tuple(t["VEC"].shape) == (N, 3)
    with pytest.raises(TypeError, match="NAME"):
        torchfits.scan(catalog, columns=["NAME"]).to_torch()
    with pytest.raises(TypeError, match="nulls"):
        torchfits.scan(catalog, columns=["CNT"]).to_torch()
    batches = list(torchfits.scan(catalog, columns=["RA"], where="CNT IS NOT NULL").to_torch_batches(2000, stack=False))
    assert all(b["RA"].shape[0] <= 2000 for b in batches)
    assert sum(b["RA"].shape[0] for b in batches) == torchfits.scan(catalog, where="CNT IS NOT NULL").count_rows()


def test_many_files(catalog, tmp_path):
    import shutil

    for i in range(3):
        shutil.copy(catalog, tmp_path / f"part{i}.fits")
    by_glob = torchfits.scan(str(tmp_path / "part*.fits"), columns=["ID"], where="ID < 2").to_arrow()
    assert by_glob.column("ID").to_pylist() == [0, 1] * 3
    by_dir = torchfits.scan(str(tmp_path), columns=["ID"]).count_rows()
    assert by_dir == 3 * N
    by_list = torchfits.scan([str(tmp_path / "part0.fits"), str(tmp_path / "part2.fits")]).count_rows()
    assert by_list == 2 * N
    with pytest.raises(FileNotFoundError):
        torchfits.scan(str(tmp_path / "nothing*.fits"))


def test_to_torch_tensors_are_writable_and_private(catalog):
    torch = pytest.importorskip("torch")
    first = torchfits.scan(catalog, columns=["RA"]).to_torch()["RA"]
    original = float(first[0])
    first[0] = -1.0  # the wrapped Arrow buffer belongs to this result alone
    again = torchfits.scan(catalog, columns=["RA"]).to_torch()["RA"]
    assert float(again[0]) == original and float(first[0]) == -1.0
    assert isinstance(first, torch.Tensor)


@pytest.fixture(scope="module")
def flagged(tmp_path_factory):
    path = tmp_path_factory.mktemp("flags") / "flags.fits"
    names = np.array(["NGC1", "ngc22", "M31", "N_1", "NGC%x", "IC1"])
    star = np.array([True, False, True, False, True, True])
    cols = [fits.Column("Star", "L", array=star), fits.Column("Mag_R", "E", array=np.arange(6.0)),
            fits.Column("Name", "6A", array=names)]
    fits.BinTableHDU.from_columns(cols).writeto(path)
    with open(path, "r+b") as f:  # make row 1 of Star undefined (a zero byte)
        data = f.read()
        f.seek(data.index(b"END" + b" " * 77, 2880) // 2880 * 2880 + 2880 + 1 * 11)  # row 1
        f.write(b"\0")
    return str(path)


def test_where_names_are_case_insensitive(flagged):
    got = torchfits.scan(flagged, where="mag_r > 2 AND STAR").to_arrow()
    assert got.column("Mag_R").to_pylist() == [4.0, 5.0]
    assert torchfits.scan(flagged, where="`MAG_R` >= MAG_r").count_rows() == 6


def test_bare_boolean_column_and_not(flagged):
    star = torchfits.scan(flagged, where="Star").to_arrow().column("Mag_R").to_pylist()
    not_star = torchfits.scan(flagged, where="NOT star").to_arrow().column("Mag_R").to_pylist()
    # the null row (1) is in neither: NOT unknown is unknown
    assert star == [0.0, 2.0, 4.0, 5.0] and not_star == [3.0]
    assert star == torchfits.scan(flagged, where="star == True").to_arrow().column("Mag_R").to_pylist()
    with pytest.raises(WhereSyntaxError, match="'name' alone as a condition, which needs a boolean"):
        torchfits.scan(flagged, where="name AND star")


@pytest.mark.parametrize("cond", ["name LIKE 'NGC%'", "name NOT LIKE 'NGC%'", "name LIKE 'N_1'",
                                  "name ILIKE 'ngc%'", "name LIKE '%1'", "name LIKE 'NGC\\%x'",
                                  "name NOT ILIKE '%C%'"])
def test_like_matches_duckdb(flagged, cond):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("tbl", torchfits.scan(flagged).to_arrow().rename_columns(["star", "mag_r", "name"]))
    sql_cond = cond + " ESCAPE '\\'" if "\\" in cond else cond  # DuckDB has no default escape
    want = con.sql(f"SELECT mag_r FROM tbl WHERE {sql_cond} ORDER BY mag_r").fetchall()
    got = torchfits.scan(flagged, where=cond).to_arrow().column("Mag_R").to_pylist()
    assert got == [w[0] for w in want]


def test_unknown_columns_suggest_close_names(flagged):
    with pytest.raises(ColumnNotFoundError, match=r"unknown column 'magr' \(.*flags.fits HDU 1\); "
                                                  r"did you mean 'Mag_R'\?") as info:
        torchfits.scan(flagged, where="magr > 1")
    assert isinstance(info.value, ValueError) and isinstance(info.value, KeyError)
    with pytest.raises(ColumnNotFoundError, match="Column 'nmae' not found; did you mean 'Name'"):
        torchfits.scan(flagged, columns=["nmae"])
    with pytest.raises(ColumnNotFoundError, match="where references unknown column 'zzz' "):
        torchfits.scan(flagged, where="zzz > 1")
    with pytest.raises(ValueError, match="LIKE needs a string column"):
        torchfits.scan(flagged, where="mag_r LIKE '1%'")


def test_cfitsio_suffix_selects_the_hdu(catalog):
    want = torchfits.scan(catalog, 1, columns=["ID"]).to_arrow()
    assert torchfits.scan(f"{catalog}[1]", columns=["ID"]).to_arrow().equals(want)
    assert torchfits.scan(f"{catalog}[cat]", columns=["ID"]).to_arrow().equals(want)
    with pytest.raises(HDUTypeError):
        torchfits.scan(f"{catalog}[0]")
    with pytest.raises(ValueError, match="selects HDU 1 and hdu=2"):
        torchfits.scan(f"{catalog}[1]", 2)
    with pytest.raises(ValueError, match="image section"):
        torchfits.scan(f"{catalog}[1:3]")


def _scanner_fields(s):
    """Everything a `Scanner` plans from: sources, projection, predicate, rows, options."""
    rows = None if s._rows is None else [r.tolist() for r in s._rows]
    return (s._sources[0].path, s._projection, s._columns_chosen, s._where, s._filter, rows,
            s._row_slice, s._batch_size, s._options, s._schema_metadata, s._pushdown)


def test_scanner_copies_and_pickles_keep_every_option(catalog):
    """Copies made by `Scanner` methods (batch size, row slice, a narrower projection) keep the
    decode options, schema metadata and pushdown choice, in this process and through pickle."""
    import pickle

    from torchfits.tables.decode_options import DecodeOptions
    from torchfits.tables.scan import Scanner
    from torchfits.tables.source import TableSource

    opts = DecodeOptions(mapping="compat", decode_bytes=False, strip=False, encoding="latin-1",
                         apply_nulls=False, threads=1, metadata=False)
    base = Scanner([TableSource.open(catalog, 1)], columns=["ID", "NAME", "CNT"], where="ID < 3000",
                   batch_size=123, options=opts, schema_metadata=False, pushdown=False)
    by_rows = Scanner([TableSource.open(catalog, 1)], columns=["ID", "NAME"], rows=[5, 3, 5, 900],
                      options=opts, schema_metadata=False)
    copies = [base, base._with_batch_size(50), base.with_row_slice((10, 900)), by_rows,
              by_rows._with_batch_size(2)]
    pytest.importorskip("torch")
    copies.append(base.to_torch_batches(columns=["ID", "CNT"], stack=False).source.scanner)
    for s in copies:
        assert s._options == opts and not s._schema_metadata
        clone = pickle.loads(pickle.dumps(s))
        assert _scanner_fields(clone) == _scanner_fields(s)
        assert clone.to_arrow().equals(s.to_arrow())
    assert copies[-1]._projection == ["ID", "CNT"]
    # What pickles is the scan's own fields, not a copy of its constructor's arguments.
    assert not hasattr(base, "_init_args")


def test_scan_builds_its_decode_options(catalog):
    from torchfits.tables.decode_options import DecodeOptions

    s = torchfits.scan(catalog, columns=["ID"], threads=2)
    assert s._options == DecodeOptions(threads=2)
    with pytest.raises(TypeError, match="DecodeOptions"):
        type(s)(s._sources, options={"mapping": "compat"})
