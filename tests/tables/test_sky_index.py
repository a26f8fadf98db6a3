"""The sky index: HEALPix coverage of row ranges in the statistics sidecar, cone pruning of
dataset scans (never a matching row lost: random cones, poles, RA 0/360), and
`torchfits.sky.sort_healpix` (same rows, header kept, a small cone reads only its ranges)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import torchfits
from torchfits.query import tree
from torchfits.tables import sky_index
from torchfits.tables.scan import Scanner
from torchfits.tables.stats_index import INDEX_NAME, build_index, load_index

cdshealpix = pytest.importorskip("cdshealpix")
fits = pytest.importorskip("astropy.io.fits")
u = pytest.importorskip("astropy.units")
coordinates = pytest.importorskip("astropy.coordinates")


def _positions(rng, n):
    """Clustered positions (around both poles, across RA 0/360, in the middle of the sky) plus a
    uniform background, a few NaN and null-like rows."""
    centres = [(0.0, 0.0), (359.99, 10.0), (120.0, 89.95), (250.0, -89.97), (200.0, -30.0)]
    k = rng.integers(0, len(centres) + 1, n)
    ra = rng.uniform(0, 360, n)
    dec = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    for i, (r0, d0) in enumerate(centres):
        m = k == i
        dec[m] = np.clip(d0 + rng.normal(0, 0.3, m.sum()), -90, 90)
        ra[m] = (r0 + rng.normal(0, 0.3, m.sum()) / max(np.cos(np.radians(d0)), 0.01)) % 360
    ra[:3] = np.nan
    dec[5] = np.nan
    return ra, dec


def _write(path, ra, dec, *, dec_type="D", extra_cards=None):
    n = len(ra)
    cols = [fits.Column("RA", "D", array=ra), fits.Column("Dec", dec_type, array=dec),
            fits.Column("ID", "K", array=np.arange(n)),
            fits.Column("MAG", "E", array=np.linspace(10, 20, n).astype(np.float32)),
            fits.Column("NAME", "6A", array=np.array([f"n{i % 99999}" for i in range(n)])),
            fits.Column("V", "PJ()", array=np.array([np.arange(i % 4, dtype=np.int32) for i in range(n)],
                                                     dtype=object))]
    hdu = fits.BinTableHDU.from_columns(cols, name="CAT")
    for key, value in (extra_cards or {}).items():
        hdu.header[key] = value
    fits.HDUList([fits.PrimaryHDU(), hdu, fits.ImageHDU(np.arange(6.0).reshape(2, 3))]).writeto(
        path, checksum=True)


def _astropy_cone(path, ra0, dec0, radius):
    """IDs of rows within ``radius`` (astropy's separation; boundary included)."""
    from astropy.coordinates import SkyCoord

    with fits.open(path) as hdul:
        data = hdul["CAT"].data
        ra, dec, ids = (np.asarray(data[c], dtype=np.float64) for c in ("RA", "Dec", "ID"))
    ok = np.isfinite(ra) & np.isfinite(dec)
    sep = SkyCoord(ra[ok] * u.deg, dec[ok] * u.deg).separation(SkyCoord(ra0 * u.deg, dec0 * u.deg)).deg
    return set(ids[ok][sep <= radius].astype(np.int64).tolist())


@pytest.fixture(scope="module")
def catalogs(tmp_path_factory):
    """Three unsorted catalog files (clustered), and their HEALPix-sorted copies in another
    directory; each directory indexed with ``sky=("ra", "dec")`` (case differs from the file)."""
    base = tmp_path_factory.mktemp("sky")
    raw, srt = base / "raw", base / "sorted"
    raw.mkdir()
    srt.mkdir()
    rng = np.random.default_rng(26)
    for k in range(3):
        ra, dec = _positions(rng, 6000 + 1000 * k)
        _write(str(raw / f"c{k}.fits"), ra, dec, dec_type="E" if k == 1 else "D")
    for k in range(3):
        torchfits.sky.sort_healpix(str(raw / f"c{k}.fits"), str(srt / f"c{k}.fits"), 9, hdu="CAT",
                                   chunk_rows=2000)
    build_index(str(raw), "CAT", chunk_rows=2000, sky=("ra", "dec"), sky_order=9)
    return raw, srt


def _cells_of(path):
    with fits.open(path) as hdul:
        data = hdul["CAT"].data
        return np.asarray(data["RA"], np.float64), np.asarray(data["Dec"], np.float64)


def test_coverage_holds_every_rows_cell(catalogs):
    from astropy.coordinates import Latitude, Longitude

    for directory in catalogs:
        index = load_index(str(directory / INDEX_NAME))
        for k in range(3):
            path = str(directory / f"c{k}.fits")
            sky = index.lookup(path, 1).sky
            assert sky is not None and sky.ra == "RA" and sky.dec == "Dec" and sky.order == 9
            assert sky.sorted == (directory == catalogs[1])
            ra, dec = _cells_of(path)
            ok = np.isfinite(ra) & np.isfinite(dec)
            cells = np.full(len(ra), -1, np.int64)
            cells[ok] = cdshealpix.nested.lonlat_to_healpix(Longitude(ra[ok] * u.deg),
                                                            Latitude(dec[ok] * u.deg), 9).astype(np.int64)
            for i in range(len(sky.rows) - 1):
                a, b = sky.rows[i], sky.rows[i + 1]
                lo, hi = sky.lo[sky.owner == i], sky.hi[sky.owner == i]
                mine = cells[a:b][cells[a:b] >= 0]
                inside = ((mine[:, None] >= lo[None, :].astype(np.int64))
                          & (mine[:, None] < hi[None, :].astype(np.int64))).any(axis=1)
                assert inside.all(), (path, i)
            assert sky.rows[0] == 0 and sky.rows[-1] == len(ra)


def test_sorted_file_is_the_same_rows_in_cell_order(catalogs):
    raw, srt = catalogs
    for k in range(3):
        a, b = str(raw / f"c{k}.fits"), str(srt / f"c{k}.fits")
        with fits.open(a) as ha, fits.open(b, checksum=True) as hb:
            assert len(hb) == 3 and np.array_equal(hb[2].data, ha[2].data)
            def cards(h):
                return [c.image for c in h["CAT"].header.cards if c.keyword not in ("CHECKSUM", "DATASUM")]

            assert cards(hb) == cards(ha)
            da, db = ha["CAT"].data, hb["CAT"].data
            oa, ob = np.argsort(da["ID"]), np.argsort(db["ID"])
            for name in ("RA", "Dec", "MAG", "NAME"):
                assert np.array_equal(np.asarray(da[name])[oa], np.asarray(db[name])[ob],
                                      equal_nan=name != "NAME"), name
            for x, y in zip(np.asarray(da["V"], object)[oa], np.asarray(db["V"], object)[ob]):
                assert np.array_equal(x, y)
            ra, dec = np.asarray(db["RA"], np.float64), np.asarray(db["Dec"], np.float64)
        cells = sky_index.healpix_cells(ra, dec, 9)
        assert np.all(np.diff(cells.astype(np.float64)) >= 0)  # invalid positions last
        assert np.isnan(ra[-3:]).all() or np.isnan(dec[-4:]).any()
        assert torchfits.verify_checksums(b, 1)["ok"]
        if shutil.which("fitsverify"):
            out = subprocess.run(["fitsverify", "-q", "-e", b], capture_output=True, text=True)
            assert "verification OK" in out.stdout, out.stdout


def _cases(rng):
    cases = [(0.0, 0.0, 1 / 60), (359.999, 10.0, 0.2), (0.001, 10.0, 0.5), (120.0, 89.95, 0.1),
             (300.0, 90.0, 0.2), (0.0, -90.0, 0.05), (250.0, -89.97, 1.0), (200.0, -30.0, 0.01),
             (10.0, 5.0, 30.0), (77.0, 12.0, 0.0), (200.0, -30.0, 95.0)]
    for _ in range(25):
        cases.append((float(rng.uniform(0, 360)), float(np.degrees(np.arcsin(rng.uniform(-1, 1)))),
                      float(rng.choice([1 / 60, 0.1, 0.5, 3.0]))))
    return cases


def test_pruned_cones_equal_full_scans_and_astropy(catalogs):
    rng = np.random.default_rng(7)
    raw, srt = catalogs
    with fits.open(str(raw / "c0.fits")) as h:  # cones centred on rows, to hit something
        d = h["CAT"].data
        picks = rng.choice(np.flatnonzero(np.isfinite(d["RA"]) & np.isfinite(d["Dec"])), 10)
        centred = [(float(d["RA"][i]), float(d["Dec"][i]), 1 / 60) for i in picks]
    for directory in catalogs:
        pruned = torchfits.dataset(str(directory), "CAT")
        full = torchfits.dataset(str(directory), "CAT", index=False)
        assert all(f.stats is not None and f.stats.sky is not None for f in pruned.get_fragments())
        for ra0, dec0, radius in _cases(rng) + centred:
            where = f"cone(ra, DEC, {ra0!r}, {dec0!r}, {radius!r})"
            got = sorted(pruned.to_table(columns=["ID"], filter=where).column("ID").to_pylist())
            want = sorted(full.to_table(columns=["ID"], filter=where).column("ID").to_pylist())
            assert got == want, (directory, ra0, dec0, radius)
            oracle = set()
            for k in range(3):
                oracle |= {(k, i) for i in _astropy_cone(str(directory / f"c{k}.fits"), ra0, dec0, radius)}
            assert len(got) == len(oracle)


def test_a_cone_tree_and_other_terms(catalogs):
    """A `tree.Cone` built directly prunes the same way; a cone under OR is not used to prune
    (and still answers right); other conjuncts combine."""
    _, srt = catalogs
    ds = torchfits.dataset(str(srt), "CAT")
    full = torchfits.dataset(str(srt), "CAT", index=False)
    cone = tree.Cone(tree.Column("RA"), tree.Column("Dec"), 200.0, -30.0, 0.3)
    got = ds.to_table(columns=["ID"], filter=cone).num_rows
    assert got == full.to_table(columns=["ID"], filter=cone).num_rows > 0
    for where in ("cone(ra, dec, 200.0, -30.0, 0.3) OR mag > 19.9",
                  "mag < 15 AND cone(ra, dec, 200.0, -30.0, 0.3) AND cone(ra, dec, 200.1, -30.0, 0.3)",
                  "NOT cone(ra, dec, 200.0, -30.0, 0.3)"):
        assert sorted(ds.to_table(columns=["ID"], filter=where).column("ID").to_pylist()) == \
            sorted(full.to_table(columns=["ID"], filter=where).column("ID").to_pylist()), where


@pytest.fixture
def selected_ranges(monkeypatch) -> list[tuple[int, int]]:
    """The row ranges the scan tests its predicate on (the row kernel's passes), in order."""
    seen: list[tuple[int, int]] = []
    real = Scanner._select

    def spy(self, src, rows, rng):
        if rows is None:
            seen.append(tuple(rng))
        return real(self, src, rows, rng)

    monkeypatch.setattr(Scanner, "_select", spy)
    return seen


def test_small_cone_reads_only_its_row_ranges(catalogs, decodes, selected_ranges):
    _, srt = catalogs
    ds = torchfits.dataset(str(srt), "CAT")
    total = sum(f.num_rows for f in ds.get_fragments())
    decodes.clear()
    table = ds.to_table(filter="cone(ra, dec, 200.0, -30.0, 0.0167)")
    read = sum(b - a for a, b in selected_ranges)
    planned = [f.stats.sky.cone_rows(200.0, -30.0, 0.0167) for f in ds.get_fragments()]
    assert table.num_rows > 0
    # exactly the row ranges of the cells the cone touches (each about RANGE_ROWS rows); only the
    # box's survivors are decoded
    assert read == sum(b - a for ranges in planned for a, b in ranges) < total / 3, (read, total)
    assert sorted(selected_ranges) == sorted(r for p in planned for r in p)
    assert all(d.kwargs.get("rows") is not None for d in decodes)
    # a cone where no row lies reads at most a range per file
    decodes.clear()
    assert ds.to_table(filter="cone(ra, dec, 60.0, 45.0, 0.001)").num_rows == 0
    assert sum(d.planned for d in decodes) < total / 4
    # on the unsorted copies the clustered coverage still skips most chunks
    decodes.clear()
    raw = torchfits.dataset(str(catalogs[0]), "CAT")
    assert raw.to_table(filter="cone(ra, dec, 60.0, 45.0, 0.001)").num_rows == 0
    assert sum(d.planned for d in decodes) < sum(f.num_rows for f in raw.get_fragments())


def test_stale_sky_entry_is_ignored(tmp_path):
    rng = np.random.default_rng(3)
    ra, dec = _positions(rng, 3000)
    path = tmp_path / "a.fits"
    torchfits.sky.sort_healpix(_tmp_catalog(tmp_path, ra, dec), str(path), 8, hdu="CAT")
    assert next(torchfits.dataset(str(path), "CAT").get_fragments()).stats.sky is not None
    size = os.path.getsize(path)
    with fits.open(str(path), mode="update") as h:  # other positions: the sidecar no longer applies
        h["CAT"].data["RA"] = (h["CAT"].data["RA"] + 90.0) % 360
    assert os.path.getsize(path) == size
    ds = torchfits.dataset(str(path), "CAT")
    assert next(ds.get_fragments()).stats is None
    where = "cone(ra, dec, 290.0, -30.0, 1.0)"  # where the cluster moved
    assert ds.to_table(filter=where).num_rows == len(_astropy_cone(str(path), 290.0, -30.0, 1.0)) > 0


def _tmp_catalog(tmp_path, ra, dec):
    src = str(tmp_path / "src.fits")
    _write(src, ra, dec)
    return src


def test_sort_in_place_and_index_merge(tmp_path):
    rng = np.random.default_rng(5)
    paths = []
    for k in range(2):
        ra, dec = _positions(rng, 1500)
        p = str(tmp_path / f"p{k}.fits")
        _write(p, ra, dec)
        paths.append(p)
    before = _astropy_cone(paths[0], 200.0, -30.0, 0.5)
    with pytest.raises(torchfits.errors.FitsFileExistsError):
        torchfits.sky.sort_healpix(paths[0], paths[0], 6, hdu="CAT")
    for p in paths:
        torchfits.sky.sort_healpix(p, p, 6, hdu="CAT", overwrite=True)
    document = json.loads((tmp_path / INDEX_NAME).read_text())
    assert sorted(document["files"]) == ["p0.fits", "p1.fits"]
    assert all(e["sky"]["sorted"] for e in document["files"].values())
    assert _astropy_cone(paths[0], 200.0, -30.0, 0.5) == before
    ds = torchfits.dataset(str(tmp_path / "p*.fits"), "CAT")
    assert all(f.stats.sky is not None for f in ds.get_fragments())


def test_sky_argument_errors(tmp_path):
    rng = np.random.default_rng(1)
    src = _tmp_catalog(tmp_path, *_positions(rng, 100))
    with pytest.raises(ValueError, match="order"):
        torchfits.sky.sort_healpix(src, str(tmp_path / "o.fits"), 30, hdu="CAT")
    with pytest.raises(torchfits.errors.ColumnNotFoundError, match="'glon'"):
        torchfits.sky.sort_healpix(src, str(tmp_path / "o.fits"), 5, ra="glon", hdu="CAT")
    with pytest.raises(ValueError, match="pair"):
        build_index(src, "CAT", sky="ra")
    with pytest.raises(TypeError, match="NAME"):
        build_index(src, "CAT", sky=("name", "dec"))
    assert not os.path.exists(tmp_path / "o.fits")


def test_range_helpers():
    assert sky_index.intersect([(0, 10), (20, 30)], [(5, 25), (29, 40)]) == [(5, 10), (20, 25), (29, 30)]
    cells = np.array([0, 1, 2, 3, 7, 100], np.uint64)
    assert sky_index.coverage(cells, 5) == [0, 4, 7, 8, 100, 101]
    wide = sky_index.coverage(np.arange(0, 12 * 4**5, 7, dtype=np.uint64), 5, max_ranges=4)
    assert wide == [0, 12 * 4**5]
    # unsorted, sorted at order 3 only, sorted
    c = np.array([3000, 1, 2], np.uint64)
    assert sky_index._sorted_depth(c, 4) is None
    assert sky_index._sorted_depth(np.array([4, 7, 5, 16], np.uint64), 4) == 3
    assert sky_index._sorted_depth(np.sort(c), 4) == 4
    assert sky_index.healpix_cells([10.0, np.nan], [95.0, 0.0], 3).tolist() == \
        [int(sky_index.healpix_cells([190.0], [85.0], 3)[0]), 12 * 4**3]


def test_split_fragments_keep_the_sky_ranges(catalogs):
    _, srt = catalogs
    ds = torchfits.dataset(str(srt), "CAT").split(1500)
    full = torchfits.dataset(str(srt), "CAT", index=False)
    assert all(f.stats.sky is not None for f in ds.get_fragments())
    where = "cone(ra, dec, 200.0, -30.0, 0.2)"
    assert sorted(ds.to_table(columns=["ID"], filter=where).column("ID").to_pylist()) == \
        sorted(full.to_table(columns=["ID"], filter=where).column("ID").to_pylist())
    assert len(list(ds.get_fragments(filter=where))) < len(list(ds.get_fragments()))


def test_ascii_and_empty_tables(tmp_path):
    rng = np.random.default_rng(4)
    n = 800
    ra, dec = rng.uniform(0, 360, n), np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    ascii_hdu = fits.TableHDU.from_columns([fits.Column("ra", "F12.7", array=ra),
                                            fits.Column("dec", "F12.7", array=dec),
                                            fits.Column("id", "I6", array=np.arange(n))])
    empty = fits.BinTableHDU.from_columns([fits.Column("ra", "D", array=np.zeros(0)),
                                           fits.Column("dec", "D", array=np.zeros(0))], name="NONE")
    src = str(tmp_path / "a.fits")
    fits.HDUList([fits.PrimaryHDU(), ascii_hdu, empty]).writeto(src)
    out = str(tmp_path / "out" / "a.fits")
    os.makedirs(os.path.dirname(out))
    torchfits.sky.sort_healpix(src, out, 5)
    with fits.open(src) as a, fits.open(out) as b:
        assert sorted(b[1].data["id"]) == list(range(n)) and b[1].header == a[1].header
        cells = sky_index.healpix_cells(b[1].data["ra"], b[1].data["dec"], 5)
        assert np.all(np.diff(cells.astype(np.int64)) >= 0)
    torchfits.sky.sort_healpix(out, out, 5, hdu="NONE", overwrite=True)
    ds = torchfits.dataset(out, "NONE")
    assert next(ds.get_fragments()).stats.sky is not None
    assert ds.to_table(filter="cone(ra, dec, 1.0, 2.0, 3.0)").num_rows == 0


def _around(rng, ra0, dec0, r, n):
    """Points at distance ~r (within 1e-7 r) and inside a cone, every bearing."""
    th = rng.uniform(0, 2 * np.pi, n)
    d = np.radians(np.r_[r * (1 + rng.normal(0, 1e-7, n // 2)), r * np.sqrt(rng.uniform(0, 1, n - n // 2))])
    lat1, lon1 = np.radians(dec0), np.radians(ra0)
    lat2 = np.arcsin(np.clip(np.sin(lat1) * np.cos(d) + np.cos(lat1) * np.sin(d) * np.cos(th), -1, 1))
    lon2 = lon1 + np.arctan2(np.sin(th) * np.sin(d) * np.cos(lat1), np.cos(d) - np.sin(lat1) * np.sin(lat2))
    return np.degrees(lon2) % 360, np.degrees(lat2)


def test_cone_cells_hold_every_point_inside():
    """Cones on the polar caps (where a bare cone coverage can miss a cell the circle crosses),
    across RA 0 and base-cell edges, tiny and wide, at every order."""
    from torchfits.query.sky import in_cone

    rng = np.random.default_rng(11)
    cases = [(45.0, 85.39618692939221, 5.729837568158724, 13),
             (45.0, 86.82656565786051, 3.1003718117351076, 12),
             (36.42700879379864, 88.39317215573874, 2.3600178900301807, 12), (45.0, -88.5188, 2.1336, 13),
             (0.0, 90.0, 0.5, 10), (359.9999, -89.9, 0.2, 9), (90.0, 0.0, 1e-4, 13), (0.0, 0.0, 40.0, 6)]
    for _ in range(40):
        r = float(10 ** rng.uniform(-4, 1.5))
        dec0 = float(rng.choice([1, -1]) * (90 - r * rng.uniform(0, 1.5)))
        cases.append((float(rng.choice([rng.uniform(0, 360), 0.0, 45.0, 90.0])), dec0, r,
                      int(rng.integers(0, 14))))
    for ra0, dec0, r, order in cases:
        ra, dec = _around(rng, ra0, dec0, r, 6000)
        keep = in_cone(ra, dec, ra0, dec0, r)
        cells = sky_index.healpix_cells(ra[keep], dec[keep], order)
        lo, hi = sky_index._cone_cells(ra0, dec0, r, order)
        k = np.searchsorted(hi, cells, side="right")
        hit = k < lo.size
        hit[hit] &= lo[k[hit]] <= cells[hit]
        assert hit.all(), (ra0, dec0, r, order)
