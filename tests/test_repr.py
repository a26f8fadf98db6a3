"""What the REPL shows: `info()` as a table (and HTML), and reprs that say what an object is."""
import shutil

import numpy as np
import pytest

import torchfits
from torchfits.cli.demo import make_sample_files


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("repr")
    return make_sample_files(str(d))


def test_info_repr_is_a_table_and_stays_a_list(samples):
    image, catalog = samples
    hdus = torchfits.info(image)
    lines = repr(hdus).splitlines()
    assert lines[0] == f"{image}: 3 HDUs"
    assert lines[1].split() == ["No.", "Name", "Type", "Dimensions", "Format", "Cards"]
    assert lines[2].split()[:3] == ["0", "PRIMARY", "EMPTY"]
    assert lines[3].split()[:5] == ["1", "SCI", "IMAGE", "256x256", "float32"]
    assert str(hdus) == repr(hdus)
    assert [h.name for h in hdus] == ["PRIMARY", "SCI", "MASK"] and len(hdus) == 3
    assert hdus[1].shape == (256, 256) and hdus[2].dtype == "uint16"
    html = hdus._repr_html_()
    assert html.count("<tr>") == 4 and "<td>SCI</td>" in html
    cat = repr(torchfits.info(catalog)).splitlines()
    assert cat[3].split()[:3] == ["1", "CATALOG", "BINTABLE"] and "10000 rows x 8 cols" in cat[3]


def test_info_of_compressed_hdus_shows_name_and_dtype(samples, tmp_path):
    image, _ = samples
    path = tmp_path / "c.fits"
    data = np.arange(100, dtype=np.uint16).reshape(10, 10)
    torchfits.write(str(path), [np.empty(0, np.uint8), {"data": data, "header": {"EXTNAME": "RAW"}}],
                    compress="RICE_1", overwrite=True)
    hdus = torchfits.info(str(path))
    assert hdus[1].name == "RAW" and hdus[1].dtype == "uint16" and hdus[1].type == "COMPRESSED_IMAGE"
    assert hdus[1].dtype == str(torchfits.read_numpy(str(path), 1).dtype)
    assert "uint16 (RICE_1)" in repr(hdus)


def test_reprs_say_what_objects_are(samples):
    image, catalog = samples
    img = torchfits.open_image(image, "SCI")
    assert repr(img) == f"Image(path={image!r}, hdu=1, shape=(256, 256), dtype=float32)"
    s = torchfits.scan(catalog, columns=["id", "ra"], where="mag_r < 16")
    assert repr(s) == f"Scanner({catalog!r}, hdu=1, columns=['id', 'ra'], where='mag_r < 16')"
    assert "rows=<3 selected>" in repr(torchfits.scan(catalog, rows=[0, 1, 2]))
    ds = torchfits.dataset(catalog)
    assert repr(ds).startswith(f"<FitsDataset {catalog!r}, hdu=1, 1 fragment, columns=[id, ra,")
    with torchfits.open(image) as hdul:
        view = hdul[1].data
        assert repr(view) == (f"<DataView of {image!r} HDU 1: shape=(256, 256), dtype=float32; "
                              "view[y0:y1, x0:x1] reads that window>")
    header = torchfits.read_header(image, "SCI")
    assert repr(header).splitlines()[0].startswith("XTENSION= 'IMAGE   '")


@pytest.fixture
def mixed_file(tmp_path):
    """Unsigned and scaled images, a long EXTNAME, a compressed image and a table."""
    fits = pytest.importorskip("astropy.io.fits")
    path = tmp_path / "mixed.fits"
    scaled = fits.ImageHDU(np.arange(6, dtype=np.int16).reshape(2, 3), name="SCALED")
    scaled.header["BSCALE"], scaled.header["BZERO"] = 0.5, 10.0
    fits.HDUList([
        fits.PrimaryHDU(np.arange(12, dtype=np.uint16).reshape(3, 4)),       # BZERO=32768
        fits.ImageHDU(np.zeros((2, 2), np.float32), name="A_VERY_LONG_EXTENSION_NAME"),
        scaled,
        fits.CompImageHDU(np.zeros((8, 8), np.float32), name="COMP"),
        fits.BinTableHDU.from_columns([fits.Column(name="x", format="J", array=np.arange(3))],
                                      name="CATALOG_WITH_A_LONG_NAME"),
    ]).writeto(path)
    return str(path)


def test_hdulist_info_shows_the_dtype_a_read_gives(mixed_file):
    """`torchfits.open(...).info()` and `TensorHDU` show the dtype the user gets (uint16 for
    BZERO=32768, float32 for BSCALE/BZERO), with the stored one beside it where they differ."""
    with torchfits.open(mixed_file) as hdul:
        prim = hdul[0]
        assert prim.data.dtype == torch_dtype("uint16")
        assert repr(prim) == "TensorHDU(name='PRIMARY', shape=(3, 4), dtype=uint16)"
        assert prim.dtype_str == "int16"  # the 1.x attribute: the storage dtype
        rows = [line for line in repr(hdul).splitlines()[1:]]
        assert rows[0].split()[-3:] == ["uint16", "(stored", "int16)"]
        assert "float32 (stored int16)" in rows[2]
        assert repr(hdul[2]) == "TensorHDU(name='SCALED', shape=(2, 3), dtype=float32)"
        assert rows[1].rstrip().endswith("float32")


def test_hdulist_info_columns_align_for_any_length(mixed_file):
    with torchfits.open(mixed_file) as hdul:
        lines = repr(hdul).splitlines()
    header = lines[0]
    starts = [header.index(h) for h in ("Name", "Type", "Cards", "Dimensions", "Format")]
    for line in lines[1:]:
        # every column starts where its heading does, after at least one blank
        for col, start in enumerate(starts):
            if start < len(line):  # a table's row ends at its dimensions
                assert line[start - 1] == " " and line[start] != " " or col == 2, (col, line)
        fields = line.split()
        assert fields[2] in ("PrimaryHDU", "ImageHDU", "TableHDU"), line
    assert "A_VERY_LONG_EXTENSION_NAME ImageHDU" in " ".join(lines[2].split())
    assert lines[5].split()[1:3] == ["CATALOG_WITH_A_LONG_NAME", "TableHDU"]
    # the native listing aligns too (its columns are sized to their longest cell)
    native = repr(torchfits.info(mixed_file)).splitlines()
    at = native[1].index("Type")
    assert all(line[at - 1] == " " and line[at - 2] == " " for line in native[2:])


def torch_dtype(name):
    torch = pytest.importorskip("torch")
    return getattr(torch, name)


def test_notebook_html_of_header_image_scanner_and_dataset(samples, tmp_path):
    image, catalog = samples
    hdr = torchfits.read_header(image, 1)
    html = hdr._repr_html_()
    assert html.count("<tr>") == len(hdr.cards) + 1  # the header row, then a row a card
    assert "<td style=\"text-align:left\">NAXIS1</td>" in html
    # values are file content, not markup; long headers are cut and counted
    path = str(tmp_path / "odd.fits")
    cards = [("OBJECT", "<b>M31</b> & co", "a <comment>")] + [(f"K{i}", i, "") for i in range(250)]
    torchfits.write(path, np.zeros((2, 2), np.float32), header=cards, overwrite=True)
    odd = torchfits.read_header(path, 0)._repr_html_()
    assert "<b>" not in odd and "&lt;b&gt;M31&lt;/b&gt; &amp; co" in odd and "a &lt;comment&gt;" in odd
    assert odd.count("<tr>") == 201 and f"… {len(torchfits.read_header(path, 0).cards) - 200} more" in odd

    img = torchfits.open_image(image, 1)._repr_html_()
    assert "<strong>Image</strong>" in img and "(256, 256)" in img and "float32" in img

    sc = torchfits.scan(catalog, columns=["ra", "dec"], where="ra > 10")._repr_html_()
    assert "<strong>Scanner</strong>" in sc and "ra, dec" in sc and "ra &gt; 10" in sc

    second = str(tmp_path / "second.fits")
    shutil.copyfile(catalog, second)
    ds = torchfits.dataset([catalog, second])._repr_html_()
    assert "<strong>FitsDataset</strong>" in ds and "2 files, first" in ds and "ra: double" in ds
