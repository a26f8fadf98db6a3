"""Jupyter ``_repr_html_`` of the 1.x HDU objects: class name, escaped EXTNAME, shape / rows."""
import os

import numpy as np
import pytest

import torchfits
from torchfits.hdu import TableHDU, TableHDURef, TensorHDU

astropy_fits = pytest.importorskip("astropy.io.fits")
torch = pytest.importorskip("torch")

EVIL = "<script>alert(1)</script>"


@pytest.fixture
def mixed_file(tmp_path):
    path = str(tmp_path / "mixed.fits")
    image = astropy_fits.ImageHDU(np.zeros((3, 4), np.float32), name=EVIL)
    cols = [astropy_fits.Column(name="a", format="J", array=np.arange(7)),
            astropy_fits.Column(name="b", format="D", array=np.ones(7))]
    table = astropy_fits.BinTableHDU.from_columns(cols, name=EVIL)
    astropy_fits.HDUList([astropy_fits.PrimaryHDU(), image, table]).writeto(path)
    return path


def test_tensor_hdu_html(mixed_file):
    with torchfits.open(mixed_file) as hdul:
        html = hdul[1]._repr_html_()
    assert "TensorHDU" in html
    # astropy writes the EXTNAME upper-cased
    assert "<script>" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html.lower()
    assert "(3, 4)" in html


def test_in_memory_tensor_hdu_html():
    html = TensorHDU(data=torch.zeros(2, 5), header={"EXTNAME": "A&B"})._repr_html_()
    assert "TensorHDU" in html and "A&amp;B" in html and "(2, 5)" in html


def test_table_hdu_html():
    t = TableHDU({"x": torch.arange(4), "y": torch.zeros(4)}, header={"EXTNAME": EVIL})
    html = t._repr_html_()
    assert "TableHDU" in html and "table" in html
    assert "4" in html and "rows" in html
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


def test_table_hdu_ref_html_escaped(mixed_file):
    with torchfits.open(mixed_file) as hdul:
        ref = hdul[2]
        assert isinstance(ref, TableHDURef)
        html = ref._repr_html_()
    assert "TableHDURef" in html
    # astropy writes the EXTNAME upper-cased
    assert "<script>" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html.lower()
    assert "7" in html and "rows" in html


def test_table_hdu_ref_html_reads_no_data(mixed_file, monkeypatch):
    with torchfits.open(mixed_file) as hdul:
        ref = hdul[2]

    def no_source(self):
        raise AssertionError("_repr_html_ opened the table's data")

    monkeypatch.setattr(TableHDURef, "_source", no_source)
    html = ref._repr_html_()
    assert "TableHDURef" in html and "7" in html


def test_table_hdu_ref_html_with_data_absent(tmp_path):
    """The file stops right after the table's header: the HTML still shows the rows."""
    path = str(tmp_path / "t.fits")
    cols = [astropy_fits.Column(name="a", format="K", array=np.arange(1000))]
    astropy_fits.HDUList([astropy_fits.PrimaryHDU(),
                          astropy_fits.BinTableHDU.from_columns(cols, name="CAT")]).writeto(path)
    header_end = 2880 * 2  # primary header + table header, one block each
    with open(path, "rb") as f:
        head = f.read(header_end)
    assert os.path.getsize(path) > header_end
    with torchfits.open(path) as hdul:
        ref = hdul[1]
    with open(path, "wb") as f:
        f.write(head)
    html = ref._repr_html_()
    assert "TableHDURef" in html and "CAT" in html and "1000" in html


def test_table_hdu_ref_html_row_window(mixed_file):
    with torchfits.open(mixed_file) as hdul:
        ref = hdul[2]
    narrowed = ref.head(3)
    assert "3" in narrowed._repr_html_()
    assert ">7<" not in narrowed._repr_html_()
