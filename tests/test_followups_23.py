"""Follow-ups of issue 23: small wrong answers found by the first round of fixes.

Each test failed on the code before its fix."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import torchfits
from torchfits.errors import FitsError


def _table(path: Path, hdu: int = 1):
    fits = pytest.importorskip("astropy.io.fits")
    from astropy.table import Table

    with fits.open(path) as h:
        return Table.read(h[hdu])


# -- 1. TNULLn in a user header given to the table writer -------------------------------------------
def _columns():
    return {"a": np.arange(3, dtype="f4"), "b": np.array(["x", "y", "z"]),
            "c": np.arange(3, dtype="i2"), "d": np.array([1, -999, 3], dtype="i4")}


@pytest.mark.parametrize("kind", ["dict", "arrow"])
def test_header_tnull_of_an_integer_column_is_applied(tmp_path, kind):
    import pyarrow as pa
    data = _columns() if kind == "dict" else pa.table(_columns())
    out = tmp_path / "t.fits"
    torchfits.write(out, data, header={"TNULL4": -999, "OBSERVER": "me"})
    t = _table(out)
    assert list(np.ma.getmaskarray(t["d"])) == [False, True, False]
    assert t["d"][0] == 1 and t["d"][2] == 3
    assert torchfits.scan(str(out), hdu=1).to_arrow().column("d").to_pylist() == [1, None, 3]
    assert torchfits.read_header(out, 1)["TNULL4"] == -999
    assert torchfits.read_header(out, 1)["OBSERVER"] == "me"


def test_header_tnull_also_stores_the_data_nulls(tmp_path):
    import pyarrow as pa
    out = tmp_path / "t.fits"
    torchfits.write(out, pa.table({"n": pa.array([5, None, 7], pa.int16())}), header={"TNULL1": 99})
    assert torchfits.read_header(out, 1)["TNULL1"] == 99
    assert list(np.ma.getmaskarray(_table(out)["n"])) == [False, True, False]


@pytest.mark.parametrize("key, value, why", [
    ("TNULL1", -999, "float"),        # a float column: its nulls are NaN
    ("TNULL2", 0, "string"),          # a string column has no TNULL
    ("TNULL3", 40000, "range"),       # does not fit a 16-bit field
    ("TNULL4", 1.5, "integer"),       # not an integer
])
def test_header_tnull_the_column_cannot_take_is_refused(tmp_path, key, value, why):
    out = tmp_path / "t.fits"
    out.write_bytes(b"precious")
    with pytest.raises(FitsError) as err:
        torchfits.write(out, _columns(), header={key: value}, overwrite=True)
    text = str(err.value)
    assert key in text and str(out) in text and why in text
    assert out.read_bytes() == b"precious"


def test_header_tnull_of_a_column_the_table_lacks_or_an_ascii_null_is_dropped(tmp_path):
    out = tmp_path / "t.fits"
    torchfits.write(out, _columns(), header={"TNULL9": 5, "TNULL3": "*"})
    h = torchfits.read_header(out, 1)
    assert "TNULL9" not in h and "TNULL3" not in h


# -- 2. update_header refuses a rename onto a keyword that exists -----------------------------------
def _image_with_keys(path: Path) -> Path:
    torchfits.write(path, np.zeros((2, 2), "f4"), header={"OBJECT": "M31", "FILTER": "r", "TELESCOP": "x"})
    return path


@pytest.mark.parametrize("rename", [{"OBJECT": "FILTER"}, {"object": "filter"},
                                    {"TELESCOP": "INSTRUME", "OBJECT": "INSTRUME"}])
def test_rename_onto_an_existing_keyword_is_refused(tmp_path, rename):
    path = _image_with_keys(tmp_path / "i.fits")
    before = path.read_bytes()
    with pytest.raises(FitsError) as err:
        torchfits.update_header(path, 0, rename=rename)
    text = str(err.value)
    old, new = list(rename.items())[-1]
    assert old.upper() in text and new.upper() in text and str(path) in text and "HDU 0" in text
    assert path.read_bytes() == before


def test_rename_onto_a_keyword_deleted_in_the_same_edit_or_onto_itself_is_fine(tmp_path):
    path = _image_with_keys(tmp_path / "i.fits")
    torchfits.update_header(path, 0, delete=["FILTER"], rename={"OBJECT": "FILTER"})
    h = torchfits.read_header(path)
    assert h["FILTER"] == "M31" and "OBJECT" not in h
    torchfits.update_header(path, 0, rename={"FILTER": "filter"})
    assert list(torchfits.read_header(path)).count("FILTER") == 1


# -- 3. CLI compress/decompress of a file with nothing to convert ------------------------------------
def _cli(capsys, *argv):
    from torchfits.cli.main import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command, data, src_name, dst_name, wanted", [
    ("decompress", np.arange(12, dtype="i2").reshape(3, 4), "plain.fits", "back.fits", "tile-compressed"),
    ("compress", {"x": np.arange(3)}, "cat.fits", "z.fits", "image"),
], ids=["decompress-without-compressed-hdus", "compress-without-images"])
def test_conversion_of_a_file_without_its_kind_of_hdu_is_a_usage_error(tmp_path, capsys, command, data,
                                                                        src_name, dst_name, wanted):
    src = tmp_path / src_name
    torchfits.write(src, data)
    code, out, err = _cli(capsys, command, src, tmp_path / dst_name)
    assert code == 2, err
    assert src_name in err and wanted in err and err.count("\n") == 1
    assert not (tmp_path / dst_name).exists()


def test_compress_and_decompress_still_convert_what_there_is(tmp_path, capsys):
    src = tmp_path / "img.fits"
    data = np.arange(12, dtype="i2").reshape(3, 4)
    torchfits.write(src, data)
    assert _cli(capsys, "compress", src, tmp_path / "img.fits.fz", "--json")[0] == 0
    assert _cli(capsys, "decompress", tmp_path / "img.fits.fz", tmp_path / "back.fits")[0] == 0
    np.testing.assert_array_equal(torchfits.read_numpy(tmp_path / "back.fits"), data)


# -- 4. columns= and names that differ only by case --------------------------------------------------
@pytest.fixture
def cased(tmp_path):
    path = tmp_path / "cased.fits"
    torchfits.write(path, {"flux": np.array([1.0, 2.0]), "FLUX": np.array([10.0, 20.0]),
                           "Mag": np.array([3.0, 4.0])})
    return path


def test_projection_exact_spelling_first_then_unique_case_insensitive(cased):
    assert torchfits.scan(str(cased), columns=["FLUX"]).to_arrow().column(0).to_pylist() == [10.0, 20.0]
    assert torchfits.scan(str(cased), columns=["flux"]).to_arrow().column(0).to_pylist() == [1.0, 2.0]
    got = torchfits.scan(str(cased), columns=["mag"]).to_arrow()
    assert got.column_names == ["Mag"]


@pytest.mark.parametrize("route", ["scan", "table.read"])
def test_projection_matching_several_columns_by_case_only_is_refused(cased, route):
    from torchfits.errors import ColumnNotFoundError

    with pytest.raises(ColumnNotFoundError) as err:
        if route == "scan":
            torchfits.scan(str(cased), columns=["Flux"]).to_arrow()
        else:
            torchfits.table.read(str(cased), columns=["Flux"])
    text = str(err.value)
    assert "'Flux'" in text and "'flux'" in text and "'FLUX'" in text


# -- 5. FitsSpectrumDataset: the native torch null rule on table columns -----------------------------
@pytest.fixture
def spectrum_table(tmp_path):
    import pyarrow as pa
    path = tmp_path / "spec.fits"
    torchfits.write(path, pa.table({
        "flux": pa.array([1.0, None, 3.0]), "ivar": pa.array([1, None, 3], pa.int32()),
        "good": pa.array([True, None, False]), "wave": pa.array([4000.0, 4001.0, 4002.0])}))
    return path


@pytest.mark.parametrize("iterable", [False, True])
def test_spectrum_table_integer_and_logical_nulls_raise(spectrum_table, iterable):
    from torchfits.data import FitsSpectrumDataset, FitsSpectrumIterableDataset
    from torchfits.errors import NullValueError

    cls = FitsSpectrumIterableDataset if iterable else FitsSpectrumDataset
    for kwargs, column in (({"ivar_column": "ivar"}, "ivar"), ({"mask_column": "good"}, "good")):
        ds = cls(str(spectrum_table), hdu=1, column="flux", **kwargs)
        with pytest.raises(NullValueError) as err:
            next(iter(ds)) if iterable else ds[0]
        text = str(err.value)
        assert repr(column) in text and "spec.fits" in text and "null_value=" in text and "masks=True" in text


def test_spectrum_table_null_value_fills_and_float_nulls_are_nan(spectrum_table):
    from torchfits.data import FitsSpectrumDataset

    ds = FitsSpectrumDataset(str(spectrum_table), hdu=1, column="flux", ivar_column="ivar",
                             wavelength_column="wave", null_value={"ivar": -1})
    item = ds[0]
    assert item["ivar"].tolist() == [1, -1, 3]
    assert item["flux"].isnan().tolist() == [False, True, False]
    assert "ivar_mask" not in item and "flux_mask" not in item


def test_spectrum_table_masks_adds_validity_tensors(spectrum_table):
    from torchfits.data import FitsSpectrumDataset

    ds = FitsSpectrumDataset(str(spectrum_table), hdu=1, column="flux", ivar_column="ivar",
                             mask_column="good", masks=True)
    item = ds[0]
    assert item["ivar"].tolist() == [1, 0, 3]
    assert item["ivar_mask"].tolist() == [True, False, True]
    assert item["mask_mask"].tolist() == [True, False, True]
    assert "flux_mask" not in item  # float nulls are NaN: no mask


def test_spectrum_null_options_are_checked_at_construction(spectrum_table):
    from torchfits.data import FitsSpectrumDataset
    from torchfits.errors import ColumnNotFoundError

    with pytest.raises(ColumnNotFoundError):
        FitsSpectrumDataset(str(spectrum_table), hdu=1, column="flux", null_value={"nope": 0})
    with pytest.raises(TypeError):
        FitsSpectrumDataset(str(spectrum_table), hdu=1, column="flux", null_value="zero")


# -- 6. CLI cutout of an image with lookup-table distortions ----------------------------------------
def _lookup_file(path: Path, in_extension: bool) -> Path:
    """A SIP image whose CPDIS1/CPDIS2 and D2IMDIS2 are LOOKUP tables in WCSDVARR/D2IMARR HDUs."""
    fits = pytest.importorskip("astropy.io.fits")
    hdr = fits.Header({"CTYPE1": "RA---TAN-SIP", "CTYPE2": "DEC--TAN-SIP", "CRVAL1": 210.3,
                       "CRVAL2": -12.6, "CRPIX1": 101.5, "CRPIX2": 90.25, "CD1_1": -9.0e-5,
                       "CD1_2": 1.5e-6, "CD2_1": 2.0e-6, "CD2_2": 9.2e-5, "A_ORDER": 2,
                       "B_ORDER": 2, "A_2_0": 3e-6, "A_0_2": -2e-6, "B_1_1": 4e-6, "B_2_0": 1e-6})
    for j in (1, 2):
        hdr[f"CPDIS{j}"] = "LOOKUP"
        for record in (f"EXTVER: {j}", "NAXES: 2", "AXIS.1: 1", "AXIS.2: 2"):
            hdr.append((f"DP{j}", record))
    hdr["D2IMDIS2"] = "LOOKUP"
    for record in ("EXTVER: 1", "NAXES: 2", "AXIS.1: 1", "AXIS.2: 2"):
        hdr.append(("D2IM2", record))
    rng = np.random.default_rng(7)
    image = rng.normal(size=(180, 200)).astype(np.float32)
    hdus = [fits.PrimaryHDU(image, header=hdr)] if not in_extension else \
        [fits.PrimaryHDU(), fits.ImageHDU(image, header=hdr, name="SCI")]
    for extname, ver in (("WCSDVARR", 1), ("WCSDVARR", 2), ("D2IMARR", 1)):
        table = fits.ImageHDU(rng.normal(0, 0.3, (13, 15)).astype(np.float32))
        table.header.update({"EXTNAME": extname, "EXTVER": ver, "CRPIX1": 1.0, "CRPIX2": 1.0,
                             "CRVAL1": 0.0, "CRVAL2": 0.0, "CDELT1": 14.0, "CDELT2": 14.0})
        hdus.append(table)
    fits.HDUList(hdus).writeto(path)
    return path


def _lookup_wcs(path: Path, hdu: int):
    import warnings

    fits = pytest.importorskip("astropy.io.fits")
    from astropy import wcs

    hdul = fits.open(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = wcs.WCS(hdul[hdu].header, hdul)
    return w, hdul


@pytest.mark.parametrize("in_extension", [False, True])
@pytest.mark.parametrize("how", ["box", "strided section"])
def test_cli_cutout_writes_the_lookup_tables_it_names(tmp_path, capsys, in_extension, how):
    src = _lookup_file(tmp_path / "lookup.fits", in_extension)
    out = tmp_path / "cut.fits"
    hdu = 1 if in_extension else 0
    if how == "box":
        argv, (x0, y0, sx, sy) = ["cutout", "--box", "37,55,121,140", src, out], (37, 55, 1, 1)
    else:  # CFITSIO section, 1-based inclusive, x step 2 and y step 3
        argv, (x0, y0, sx, sy) = ["cutout", f"{src}[{hdu}][38:121:2,56:140:3]", out], (37, 55, 2, 3)
    code, _, err = _cli(capsys, *argv)
    assert code == 0, err
    parent, ph = _lookup_wcs(src, hdu)
    cut, ch = _lookup_wcs(out, 0)
    try:
        assert cut.cpdis1 is not None and cut.cpdis2 is not None and cut.det2im2 is not None
        names = sorted((h.name, h.ver) for h in ch[1:])
        assert names == [("D2IMARR", 1), ("WCSDVARR", 1), ("WCSDVARR", 2)]
        xs = np.array([0.0, 3, 10, 20, 30, 41])
        ys = np.array([0.0, 5, 12, 17, 22, 28])
        np.testing.assert_allclose(np.array(cut.all_pix2world(xs, ys, 0)),
                                   np.array(parent.all_pix2world(x0 + xs * sx, y0 + ys * sy, 0)),
                                   rtol=0, atol=1e-9)
    finally:
        ph.close()
        ch.close()
    import shutil
    import subprocess

    if shutil.which("fitsverify"):
        run = subprocess.run(["fitsverify", "-q", "-e", str(out)], capture_output=True, text=True)
        assert "verification OK" in run.stdout, run.stdout
