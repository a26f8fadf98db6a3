"""torchfits.dataset: a pyarrow Dataset over FITS files; pushdown, fragments, unification,
statistics sidecars."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
import pytest

from torchfits.errors import ColumnNotFoundError

pytest.importorskip("astropy")

from _datasets import arrow_table, catalog_arrays, write_fits  # noqa: E402
from torchfits.query import expr as _expr  # noqa: E402
from torchfits.query.pushdown import FusedPredicate  # noqa: E402
from torchfits.tables import source as _source  # noqa: E402
from torchfits.tables.dataset import FitsDataset, FitsFragment, dataset  # noqa: E402
from torchfits.tables.stats_index import build_index, load_index, may_match  # noqa: E402


@pytest.fixture(scope="module")
def reference(catalog):
    import pyarrow.parquet as pq

    _, pdir = catalog
    return pa.concat_tables([pq.read_table(os.path.join(pdir, f)) for f in sorted(os.listdir(pdir))])


def _same(got, want):
    got = got.select(want.column_names)
    key = [(n, "ascending") for n in want.column_names]
    assert got.num_rows == want.num_rows
    assert got.sort_by(key).equals(want.sort_by(key).cast(got.schema)), (got, want)


FILTERS = [
    pc.field("mag") < 16,
    (pc.field("ra") > 100) & (pc.field("ra") <= 200.5),
    pc.field("flags").isin([1, 3, 5]),
    pc.field("flags").is_null(),
    pc.field("flags").is_valid() & (pc.field("cnt") >= 0),
    (pc.field("name") == "beta") | (pc.field("star") == True),  # noqa: E712
    ~(pc.field("cnt") < -100),
    pc.field("flags") != 2,
    (pc.field("mag") + pc.field("cnt") > 20),  # arithmetic: residual in pyarrow
    pc.starts_with(pc.field("name"), "ga"),  # opaque to the tree
]


@pytest.mark.parametrize("flt", FILTERS, ids=[str(f) for f in FILTERS])
def test_filters_match_pyarrow(catalog, reference, flt):
    fdir, _ = catalog
    ds = dataset(fdir)
    got = ds.to_table(columns=["id", "name", "flags"], filter=flt)
    want = reference.filter(flt).select(["id", "name", "flags"])
    _same(got, want)
    assert ds.count_rows(filter=flt) == want.num_rows


@pytest.mark.parametrize("where", ["mag < 16 AND flags IN (1, 2)", "name == 'eta' OR cnt BETWEEN 5 AND 50",
                                   "flags IS NULL", "bitand(flags, 4) != 0"])
def test_where_strings(catalog, reference, where):
    fdir, _ = catalog
    from torchfits.query.expr import parse, to_pyarrow

    want = reference.filter(to_pyarrow(parse(where, reference.column_names), reference.schema))
    got = dataset(fdir).to_table(filter=where)
    _same(got, want)


def test_where_strings_fold_case_and_take_bare_booleans(catalog, reference):
    fdir, _ = catalog
    ds = dataset(fdir)
    _same(ds.to_table(filter="MAG < 16 AND star"), ds.to_table(filter="mag < 16 AND star == True"))
    _same(ds.to_table(filter="NOT STAR"), ds.to_table(filter="star == False"))
    with pytest.raises(ColumnNotFoundError, match="did you mean 'mag'"):
        ds.to_table(filter="magg < 16")


def test_is_a_pyarrow_dataset_and_guards_native_methods(catalog):
    ds = dataset(catalog[0])
    assert isinstance(ds, pds.Dataset)
    for name in dir(pds.Dataset):
        if name.startswith("_"):
            continue
        assert name in FitsDataset.__dict__, name
    for name in ("sort_by", "join", "join_asof"):
        with pytest.raises(NotImplementedError):
            getattr(ds, name)("id")


def test_schema_count_head_take(catalog, reference):
    ds = dataset(catalog[0])
    assert ds.schema.names == reference.column_names
    assert ds.count_rows() == reference.num_rows
    assert ds.head(5, columns=["id"]).column("id").to_pylist() == [0, 1, 2, 3, 4]
    idx = [7, 9000, 3, 11999, 3000]
    assert ds.take(idx, columns=["id"]).column("id").to_pylist() == idx
    got = ds.take([0, 1], filter=pc.field("flags") == 3, columns=["id"])
    want = reference.filter(pc.field("flags") == 3).column("id").to_pylist()[:2]
    assert got.column("id").to_pylist() == want
    batches = list(ds.to_batches(columns=["id"], batch_size=1000))
    assert max(b.num_rows for b in batches) == 1000
    assert sum(b.num_rows for b in batches) == reference.num_rows


def test_projection_reaches_decoder(catalog, decodes):
    """Columns neither projected nor filtered on are never decoded."""
    ds = dataset(catalog[0])
    ds.to_table(columns=["id"], filter=(pc.field("mag") < 15) & (pc.field("mag") + pc.field("cnt") > 0))
    decoded = {c for d in decodes for c in d.columns}
    assert decoded <= {"id", "mag", "cnt"}
    assert "name" not in decoded and "ra" not in decoded


def test_kernel_pushdown_decodes_only_selected_rows(catalog, decodes):
    ds = dataset(catalog[0])
    for where in (pc.field("cnt") == 7,  # the kernel selects and decodes in one pass
                  (pc.field("cnt") == 7) & (pc.field("mag") + pc.field("cnt") > -1e9)):  # + pyarrow
        decodes.clear()
        n = ds.count_rows(filter=where)
        got = ds.to_table(columns=["name"], filter=where)
        rows_decoded = sum(d.rows for d in decodes if "name" in d.columns)
        assert got.num_rows == n and rows_decoded == n  # only the hits' names are decoded


def test_kernel_conjunction_selects_and_decodes_in_one_pass(catalog, decodes, monkeypatch):
    """A where-clause the kernel runs whole selects and decodes its hits in one pass (no
    separate selection); tables, streams of small batches and whole-file scans agree with
    pyarrow's filter."""
    ds = dataset(catalog[0])
    full = ds.to_table()
    where = (pc.field("cnt") >= 3) & (pc.field("mag") < 30) & (pc.field("ra") <= 300)
    columns = ["name", "mag", "ra", "id"]
    expected = full.filter(where).select(columns)
    monkeypatch.setattr(FusedPredicate, "select", lambda *a, **k: pytest.fail("two-pass selection"))
    decodes.clear()
    assert ds.to_table(columns=columns, filter=where).equals(expected)
    streamed = pa.Table.from_batches(list(ds.to_batches(columns=columns, filter=where, batch_size=7)),
                                     schema=expected.schema)
    assert streamed.equals(expected)
    assert decodes and all(d.kwargs.get("where") is not None for d in decodes)


def test_statistics_skip_files_and_chunks(tmp_path, reference, catalog, monkeypatch):
    fdir, _ = catalog
    import shutil

    local = tmp_path / "cat"
    shutil.copytree(fdir, local)
    path = build_index(str(local), chunk_rows=500)
    assert os.path.basename(path) == "_torchfits_index.json"
    index = load_index(path)
    assert len(index) == 4 and "ra" in index.columns

    ranges = []
    real_select = FusedPredicate.select
    real_decode = _source.TableSource.decode

    def spy_select(self, data, row_bytes, *, first=0, count=0, rows=None, threads=None):
        if rows is None:
            ranges.append((first, first + count))
        elif len(rows):
            ranges.append((int(min(rows)), int(max(rows)) + 1))
        return real_select(self, data, row_bytes, first=first, count=count, rows=rows)

    def spy_decode(self, *, columns, rows=None, row_range=None, **kwargs):
        if row_range is not None:
            ranges.append(row_range)
        return real_decode(self, columns=columns, rows=rows, row_range=row_range, **kwargs)

    monkeypatch.setattr(FusedPredicate, "select", spy_select)
    monkeypatch.setattr(_source.TableSource, "decode", spy_decode)
    ds = dataset(str(local))
    assert ds.index_path == path
    flt = (pc.field("ra") >= 95) & (pc.field("ra") < 100)  # a few chunks of file 1 only
    got = ds.to_table(columns=["id", "ra"], filter=flt)
    _same(got, reference.filter(flt).select(["id", "ra"]))
    assert ranges and all(b - a <= 500 for a, b in ranges)
    assert len(set(ranges)) <= 3  # distinct row chunks touched, of 24
    frags = list(ds.get_fragments(filter=flt))
    assert [os.path.basename(f.path) for f in frags] == ["cat_1.fits"]
    assert ds.count_rows(filter=pc.field("ra") > 1000) == 0

    # a changed file makes its entry stale: it is scanned fully and results stay right
    arrays = catalog_arrays(1)
    arrays["ra"] = arrays["ra"] - 90  # now overlaps file 0's range
    write_fits(str(local / "cat_1.fits"), arrays)
    os.utime(local / "cat_1.fits", ns=(1, 1))
    ds2 = dataset(str(local))
    stale = ds2.to_table(columns=["id"], filter=flt)
    want = pa.concat_tables([arrow_table(catalog_arrays(k)) if k != 1 else arrow_table(arrays)
                             for k in range(4)]).filter(flt).select(["id"])
    _same(stale, want)


def test_may_match_rules():
    from torchfits.tables.stats_index import ColumnStats

    stats = {"x": ColumnStats(10, 20, 0), "s": ColumnStats("b", "d", 2), "n": ColumnStats(None, None, 5)}
    yes = ["x == 10", "x > 19", "x != 15", "NOT x < 15", "x IN (1, 15)", "s > 'c'", "s IS NULL",
           "x BETWEEN 0 AND 10", "y > 100", "x + 1 > 100"]
    no = ["x < 10", "x > 20", "x IN (1, 2)", "NOT x >= 5", "s < 'a'", "n > 1", "x IS NULL",
          "x BETWEEN 21 AND 30", "x > 15 AND x < 5", "x NOT BETWEEN 0 AND 100"]
    for text in yes:
        assert may_match(_expr.parse(text), stats, 5), text
    for text in no:
        assert not may_match(_expr.parse(text), stats, 5), text


def test_multi_file_unification(tmp_path):
    a = catalog_arrays(0, 50)
    b = catalog_arrays(1, 40)
    write_fits(str(tmp_path / "a.fits"), a)
    write_fits(str(tmp_path / "b.fits"), b, drop=("name", "star"))
    ds = dataset(str(tmp_path / "*.fits"), add_path_column=True)
    assert ds.schema.names == ["id", "ra", "mag", "flags", "cnt", "star", "name", "filename", "hdu"]
    t = ds.to_table(columns=["name", "filename", "hdu"])
    assert t.column("name").null_count == 40
    assert set(t.column("filename").to_pylist()) == {str(tmp_path / "a.fits"), str(tmp_path / "b.fits")}
    assert set(t.column("hdu").to_pylist()) == {1}
    # a filter on a column one file lacks: nulls never match
    assert ds.count_rows(filter=pc.field("name") == "beta") == int((a["name"] == "beta").sum())
    assert ds.count_rows(filter=pc.field("name").is_null()) == 40
    # a path-column filter skips whole files
    assert ds.count_rows(filter=pc.field("filename") == str(tmp_path / "b.fits")) == 40

    from astropy.io import fits

    fits.BinTableHDU.from_columns([fits.Column(name="id", format="10A", array=np.array(["x"] * 3))],
                                  name="CATALOG").writeto(tmp_path / "c.fits")
    with pytest.raises(TypeError, match=r"'id'.*a\.fits.*c\.fits"):
        dataset([str(tmp_path / "a.fits"), str(tmp_path / "c.fits")])


def test_widening_and_explicit_schema(tmp_path):
    from astropy.io import fits

    fits.BinTableHDU.from_columns([fits.Column(name="v", format="I", array=np.arange(3, dtype=np.int16))]
                                  ).writeto(tmp_path / "a.fits")
    fits.BinTableHDU.from_columns([fits.Column(name="v", format="J",
                                               array=np.arange(3, dtype=np.int32) + 70000)]
                                  ).writeto(tmp_path / "b.fits")
    ds = dataset(str(tmp_path))
    assert ds.schema.field("v").type == pa.int32()
    assert ds.to_table(filter=pc.field("v") > 1).column("v").to_pylist() == [2, 70000, 70001, 70002]
    ds64 = dataset(str(tmp_path), schema=pa.schema([("v", pa.float64()), ("w", pa.string())]))
    t = ds64.to_table()
    assert t.schema.field("v").type == pa.float64() and t.column("w").null_count == 6


def test_fragments_split_pickle(catalog):
    ds = dataset(catalog[0], hdu="CATALOG")
    frags = list(ds.get_fragments())
    assert len(frags) == 4 and all(isinstance(f, FitsFragment) for f in frags)
    assert frags[0].count_rows() == 3000
    parts = frags[0].split(1000)
    assert [p.row_range for p in parts] == [(0, 1000), (1000, 2000), (2000, 3000)]
    clone = pickle.loads(pickle.dumps(parts[1]))
    assert clone._source is None or clone.row_range == (1000, 2000)
    t = clone.to_table(columns=["id"])
    assert t.column("id").to_pylist() == list(range(1000, 2000))
    assert clone.count_rows(filter=pc.field("id") < 1010) == 10
    ds2 = pickle.loads(pickle.dumps(ds.split(700)))
    assert ds2.count_rows() == 12000 and len(list(ds2.get_fragments())) == 4 * 5
    assert ds2.to_table(columns=["id"]).column("id").to_pylist() == list(range(12000))


def test_dataset_filter_method_and_errors(catalog):
    ds = dataset(catalog[0]).filter(pc.field("flags") == 3)
    assert ds.count_rows() == ds.count_rows(filter="flags == 3")
    assert ds.count_rows(filter=pc.field("cnt") > 0) <= ds.count_rows()
    with pytest.raises(KeyError):
        ds.to_table(columns=["nope"])
    with pytest.raises(ValueError, match="unknown column"):
        ds.to_table(filter="nope > 1")
    with pytest.raises(TypeError):
        ds.to_table(filter=42)


def test_index_build_cli(tmp_path):
    import argparse
    import json

    from torchfits.cli.index_commands import add_parsers

    for k in range(2):
        write_fits(str(tmp_path / f"c{k}.fits"), catalog_arrays(k, 100))
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    commands: dict = {}
    add_parsers(sub, commands)
    args = parser.parse_args(["index", "build", str(tmp_path), "-c", "ra,cnt", "--chunk-rows", "40",
                              "--format", "json"])
    assert commands[args.command](args) == 0
    doc = json.loads((tmp_path / "_torchfits_index.json").read_text())
    assert doc["format"] == "torchfits-index" and doc["columns"] == ["cnt", "ra"]
    assert [c["stop"] for c in doc["files"]["c0.fits"]["chunks"]] == [40, 80, 100]
    ds = dataset(str(tmp_path))
    assert ds.index_path == str(tmp_path / "_torchfits_index.json")
    assert dataset(str(tmp_path), index=False).index_path is None


def test_opaque_filter_and_empty_projection(catalog, reference, decodes):
    ds = dataset(catalog[0])
    flt = pc.starts_with(pc.field("name"), "ga")  # no tree form: pyarrow evaluates it
    got = ds.to_table(columns=["id"], filter=flt)
    _same(got, reference.filter(flt).select(["id"]))
    assert {c for d in decodes for c in d.columns} == {"id", "name"}
    assert ds.to_table(columns=[]).num_rows == reference.num_rows
    assert ds.to_table(columns=[], filter=flt).num_rows == got.num_rows


def test_may_match_never_skips_a_matching_chunk():
    """Property: whenever statistics say "no row can match", filtering the rows finds none."""
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    from torchfits.tables.stats_index import ColumnStats, _chunk_stats

    literal = st.one_of(st.integers(-20, 20), st.floats(-20, 20, allow_nan=False, width=32))
    ops = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])
    column = st.sampled_from(["i", "f"])

    def leaves():
        return st.one_of(
            st.builds(lambda c, o, v, flip: _expr.Compare(o, _expr.Literal(v), _expr.Column(c)) if flip
                      else _expr.Compare(o, _expr.Column(c), _expr.Literal(v)),
                      column, ops, literal, st.booleans()),
            st.builds(lambda c, a, b, n: _expr.Between(_expr.Column(c), _expr.Literal(min(a, b)),
                                                       _expr.Literal(max(a, b)), n),
                      column, literal, literal, st.booleans()),
            st.builds(lambda c, vs, n: _expr.InList(_expr.Column(c), tuple(vs), n), column,
                      st.lists(st.integers(-20, 20), max_size=3), st.booleans()),
            st.builds(lambda c, n: _expr.IsNull(_expr.Column(c), n), column, st.booleans()),
        )

    trees = st.recursive(leaves(), lambda sub: st.one_of(
        st.builds(_expr.And, sub, sub), st.builds(_expr.Or, sub, sub), st.builds(_expr.Not, sub)),
        max_leaves=5)
    values = st.lists(st.one_of(st.none(), st.integers(-15, 15)), min_size=1, max_size=12)

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(trees, values, values)
    def check(tree, ints, floats):
        n = min(len(ints), len(floats))
        batch = pa.record_batch({"i": pa.array(ints[:n], pa.int32()),
                                 "f": pa.array([None if v is None else v / 2 for v in floats[:n]],
                                               pa.float32())})
        stats = {k: ColumnStats(v["min"], v["max"], v["nulls"]) for k, v in _chunk_stats(batch).items()}
        hits = pa.Table.from_batches([batch]).filter(_expr.to_pyarrow(tree, batch.schema)).num_rows
        if not may_match(tree, stats, n):
            assert hits == 0, (tree, ints, floats)

    check()


def test_first_rows_cost_o_n(catalog, reference, decodes):
    """head(n), a stream's first batch, DuckDB LIMIT and Polars head decode O(n) rows, not a
    wave of full batches; whatever batch_size, ranges are planned lazily."""
    fdir, _ = catalog

    def planned() -> int:
        return sum(d.planned for d in decodes)

    ds = dataset(fdir)
    assert ds.head(3, columns=["id"]).column("id").to_pylist() == reference.column("id").to_pylist()[:3]
    assert planned() <= 1024
    decodes.clear()
    first = ds.scanner(columns=["id"]).to_reader().read_next_batch()
    assert first.num_rows <= 1024 and planned() <= 1024
    decodes.clear()
    # one-row batches over every file: only the rows read are ever planned
    got = ds.scanner(columns=["id"], batch_size=1).head(2)
    assert got.column("id").to_pylist() == reference.column("id").to_pylist()[:2] and planned() == 2
    # the ramp keeps every row once, in order, and batches within batch_size
    decodes.clear()
    batches = list(ds.to_batches(columns=["id"], batch_size=5000))
    assert max(b.num_rows for b in batches) <= 5000 and min(b.num_rows for b in batches[:1]) == 1024
    assert pa.Table.from_batches(batches).column("id").to_pylist() == reference.column("id").to_pylist()
    duckdb = pytest.importorskip("duckdb")
    decodes.clear()
    con = duckdb.connect()
    con.register("t", ds)
    assert len(con.sql("SELECT id FROM t LIMIT 5").fetchall()) == 5
    assert planned() <= 1024 + 4096 * 2  # DuckDB may pull one more batch ahead
    pl = pytest.importorskip("polars")
    from torchfits.tables.polars_source import scan_polars

    decodes.clear()
    assert scan_polars(ds).head(1).collect()["id"].to_list() == reference.column("id").to_pylist()[:1]
    assert planned() <= 1024 and pl is not None


def test_duckdb_conjuncts_all_reach_the_kernel(catalog, reference, monkeypatch):
    """Every conjunct DuckDB pushes into the dataset runs in the where-kernel (none is left to a
    later pass). DuckDB 2.x pushes `<`/`<=` on floating columns and whole integer ranges, but
    keeps `>`/`>=`/BETWEEN on floating columns itself (NaN sorts above every number there, not
    in pyarrow); the answers agree either way."""
    duckdb = pytest.importorskip("duckdb")
    fused = []  # (number of kernel tests, the columns they test) of every kernel run
    real_select = FusedPredicate.select
    real_decode = _source.TableSource.decode

    def spy_select(self, *args, **kwargs):
        fused.append((len(self.conjunction[0]), set(self.columns)))
        return real_select(self, *args, **kwargs)

    def spy_decode(self, **kwargs):
        tests = kwargs.get("where")
        if tests is not None:  # selected and decoded in one pass
            by_offset = {s.offset: s.name for s in self.specs}
            fused.append((len(tests[0]), {by_offset[int(o)] for o in tests[0][:, 1]}))
        return real_decode(self, **kwargs)

    monkeypatch.setattr(FusedPredicate, "select", spy_select)
    monkeypatch.setattr(_source.TableSource, "decode", spy_decode)
    con = duckdb.connect()
    con.register("t", dataset(catalog[0]))
    con.register("ref", reference)
    for where, tests in [("ra <= 200 AND mag < 17 AND cnt BETWEEN -100 AND 300", 3),
                         ("mag < 17 AND ra BETWEEN 10 AND 100", 1)]:
        fused.clear()
        q = f"SELECT count(*), sum(id) FROM {{}} WHERE {where}"
        assert con.sql(q.format("t")).fetchall() == con.sql(q.format("ref")).fetchall()
        assert fused and {n for n, _ in fused} == {tests}, where
        assert set().union(*(cols for _, cols in fused)) <= {"ra", "mag", "cnt"}


def test_truncated_file_scans_rows_before_the_cut(tmp_path):
    """A file cut short: a filtered head still returns the rows before the cut (planning the
    kernel samples only rows the file holds), and a scan reaching the cut says so."""
    from astropy.io import fits

    from torchfits.errors import TruncatedFileError

    n = 20_000
    path = tmp_path / "cut.fits"
    fits.BinTableHDU.from_columns([fits.Column("A", "J", array=np.arange(n, dtype=np.int32)),
                                   fits.Column("B", "D", array=np.arange(n) * 0.5)]).writeto(path)
    os.truncate(path, 2 * 2880 + 2_000 * 12 + 3)  # the headers and ~2,000 rows
    where = (pc.field("A") > 3) & (pc.field("B") < 1000)
    assert dataset(str(path)).head(3, filter=where).to_pydict() == {"A": [4, 5, 6],
                                                                   "B": [2.0, 2.5, 3.0]}
    with pytest.raises(TruncatedFileError, match="cut.fits"):
        dataset(str(path)).to_table(filter=where)


def test_where_over_files_laid_out_differently(tmp_path):
    """A scan over files whose columns sit at other byte offsets filters each file right: the
    kernel is planned once per layout. Files that store a tested column differently (another
    TFORM) are filtered by pyarrow instead, and right too."""
    from astropy.io import fits

    from torchfits.tables.scan import Scanner
    from torchfits.tables.source import TableSource

    a = np.arange(50, dtype=np.int32)
    b = np.arange(50, dtype=np.float32) * 10
    fits.BinTableHDU.from_columns([fits.Column("A", "J", array=a),
                                   fits.Column("B", "E", array=b)]).writeto(tmp_path / "ab.fits")
    fits.BinTableHDU.from_columns([fits.Column("B", "E", array=b),
                                   fits.Column("A", "J", array=a)]).writeto(tmp_path / "ba.fits")
    sources = [TableSource.open(str(tmp_path / f), 1) for f in ("ab.fits", "ba.fits")]
    scanner = Scanner(sources, columns=["A", "B"], where="A > 45 AND B < 480")
    got = scanner.to_arrow()
    assert got.to_pydict() == {"A": [46, 47] * 2, "B": [460.0, 470.0] * 2}
    assert len(scanner._plans) == 2 and scanner._residual is None  # two layouts, both kernels
    assert all(p.fused is not None for p in scanner._plans.values())
    assert [r.tolist() for r in scanner.selected_rows()] == [[46, 47], [46, 47]]
    for batch_size in (7, 1000):  # chunks of both files, one-pass and selection paths
        again = Scanner(sources, columns=["A"], where="A > 45 AND B < 480", batch_size=batch_size)
        assert again.to_arrow().column("A").to_pylist() == [46, 47] * 2
    same = [TableSource.open(str(tmp_path / "ab.fits"), 1) for _ in range(2)]
    assert len(Scanner(same, where="A > 45")._plans) == 1  # one layout, one plan
    fits.BinTableHDU.from_columns([fits.Column("A", "J", array=a, null=-1),
                                   fits.Column("B", "E", array=b)]).writeto(tmp_path / "null.fits")
    mixed = [TableSource.open(str(tmp_path / f), 1) for f in ("ab.fits", "null.fits")]
    scanner = Scanner(mixed, columns=["A"], where="A > 45 AND B < 480")
    assert not scanner._kernel and scanner._residual is not None  # a TNULL in one: pyarrow
    assert scanner.to_arrow().column("A").to_pylist() == [46, 47] * 2
