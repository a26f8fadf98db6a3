"""Table HDU objects (docs/compatibility.md), incl. ``open()``."""
from __future__ import annotations

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torchfits.hdu as hdu_module  # noqa: E402
from torchfits.compat.table_hdu import TableDataAccessor, TableHDU, TableHDURef  # noqa: E402
from torchfits.fits.header import Header  # noqa: E402

N = 6


@pytest.fixture
def tabfile(tmp_path, fits):
    """Primary image + BINTABLE "CAT" + ASCII "ASC"."""
    cat = fits.BinTableHDU.from_columns([
        fits.Column(name="ID", format="J", array=np.arange(N)),
        fits.Column(name="MAG", format="D", unit="mag", array=np.arange(N) * 0.5),
        fits.Column(name="NAME", format="5A", array=np.array(["a", "bb", "ccc", "", "e", "ff"])),
        fits.Column(name="VEC", format="2E", array=np.arange(2 * N, dtype=np.float32).reshape(N, 2)),
        fits.Column(name="VLA", format="PE()", array=[np.arange(i, dtype=np.float32) for i in range(N)]),
        fits.Column(name="NUL", format="I", null=-1, array=np.array([-1, 1, 2, -1, 4, 5], np.int16)),
        fits.Column(name="ONE", format="1A", array=np.array(["x", "y", "z", "x", "y", "z"])),
    ], name="CAT")
    asc = fits.TableHDU.from_columns([fits.Column(name="K", format="I4", array=np.arange(3))],
                                     name="ASC")
    path = tmp_path / "tab.fits"
    fits.HDUList([fits.PrimaryHDU(np.zeros((2, 2), np.int16)), cat, asc]).writeto(path)
    return str(path)


@pytest.fixture
def ref(tabfile):
    return hdu_module.open(tabfile)[1]


# ----------------------------------------------------------------------------- open()


def test_open_gives_table_refs_with_raw_headers(tabfile):
    with hdu_module.open(tabfile) as hdul:
        assert isinstance(hdul[1], TableHDURef) and isinstance(hdul["ASC"], TableHDURef)
        h = hdul[1].header
        assert isinstance(h, Header)
        assert h["NAXIS2"] == str(N)  # raw card strings (QUIRK of open())
        assert h["EXTNAME"] == "CAT"
        out = io.StringIO()
        hdul.info(out)
        text = out.getvalue()
        assert "TableHDU" in text and f"({N}R x 7C)" in text and "(3R x 1C)" in text
        refs = [hdul[1], hdul[2]]
    # Refs reopen by path: they keep working after the HDUList is closed.
    assert refs[0].num_rows == N and refs[1].read()["K"].tolist() == [0, 1, 2]


def test_hdu_module_exports(tabfile):
    assert "TableDataAccessor" in hdu_module.__all__ and "DataView" in hdu_module.__all__
    assert hdu_module.TableDataAccessor is TableDataAccessor
    assert hdu_module.TableHDURef is TableHDURef and hdu_module.TableHDU is TableHDU


# ----------------------------------------------------------------------------- TableHDURef


def test_ref_description(ref):
    assert ref.columns == ["ID", "MAG", "NAME", "VEC", "VLA", "NUL", "ONE"]
    assert ref.num_rows == N and len(ref) == N
    assert ref.string_columns == ["NAME", "ONE"]
    assert ref.vla_lengths == {"VLA": list(range(N))}
    schema = ref.schema
    assert set(schema) == {"columns", "string_columns", "vla_columns"}
    first = schema["columns"][0]
    assert set(first) == {"name", "tform", "repeat", "code", "string", "vla", "tdim"}
    by_name = {c["name"]: c for c in schema["columns"]}
    assert by_name["NAME"]["string"] and by_name["NAME"]["repeat"] == 5
    assert by_name["VLA"]["vla"] and schema["vla_columns"] == ["VLA"]
    assert schema["string_columns"] == ["NAME", "ONE"]
    assert "TableHDURef" in repr(ref) and "CAT" in repr(ref)
    assert not hasattr(ref, "to_tensor")
    with pytest.raises(AttributeError):
        ref.to_tensor()


def test_ref_column_access_shapes(ref):
    assert ref["ID"].dtype == torch.int32 and ref["ID"].shape == (N,)
    assert ref["VEC"].shape == (N, 2)
    assert ref["NAME"].dtype == torch.uint8 and ref["NAME"].shape == (N, 5)
    assert ref["NUL"].tolist() == [-1, 1, 2, -1, 4, 5]  # TNULL never applied
    assert ref.data["ONE"].shape == (N, 1)  # strings are never squeezed
    assert ref.data["ID"].tolist() == list(range(N))
    assert ref.data.keys() == ref.columns and "MAG" in ref.data and len(ref.data) == 7
    assert isinstance(ref.data["VLA"], list) and ref.data["VLA"][3].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(KeyError, match="Column 'NOPE' not found"):
        ref["NOPE"]


def test_ref_read(ref):
    d = ref.read(columns=["ID", "MAG"], row_slice=(1, 3))
    assert list(d) == ["ID", "MAG"] and d["ID"].tolist() == [1, 2]
    assert ref.read(row_slice=slice(4, None))["ID"].tolist() == [4, 5]
    assert ref.read(columns="ID", mmap=False, device="cpu")["ID"].shape == (N,)
    with pytest.raises(ValueError, match="row_slice step must be 1"):
        ref.read(row_slice=slice(0, 4, 2))
    with pytest.raises(ValueError, match="device"):
        ref.read(device="gpu")
    with pytest.raises(ValueError, match="mmap"):
        ref.read(mmap="sometimes")
    a = ref.read(columns=["ID"])
    a["ID"][0] = 99
    assert ref.read(columns=["ID"])["ID"][0].item() == 0


def test_ref_select_head_are_new_refs(ref):
    small = ref.select(["MAG", "ID"]).head(3)
    assert isinstance(small, TableHDURef) and small is not ref
    assert small.columns == ["MAG", "ID"] and small.num_rows == 3 and len(small) == 3
    assert small.read()["ID"].tolist() == [0, 1, 2]
    assert small.read(row_slice=(1, 10))["ID"].tolist() == [1, 2]  # within the window
    assert ref.columns[0] == "ID" and ref.num_rows == N  # the original is unchanged
    assert ref.select("NAME").columns == ["NAME"]
    with pytest.raises(KeyError):
        ref.select(["NOPE"])
    assert ref.head(100).num_rows == N and ref.head(0).num_rows == 0


def test_ref_materialize_and_filter(ref):
    t = ref.select(["ID", "NAME"]).materialize()
    assert isinstance(t, TableHDU) and t.num_rows == N and t.columns == ["ID", "NAME"]
    f = ref.filter("NUL IS NOT NULL AND MAG > 0.5")
    assert isinstance(f, TableHDU) and f["ID"].tolist() == [2, 4, 5]
    assert f.columns == ref.columns
    assert ref.head(3).filter("ID >= 1")["ID"].tolist() == [1, 2]
    assert ref.filter("NAME == 'bb' OR NAME IN ('e')")["ID"].tolist() == [1, 4]
    assert ref.filter("ID > 100").num_rows == 0
    with pytest.raises(ValueError, match="unknown column"):
        ref.filter("NOPE > 1")


def test_ref_iter_rows_yields_batches(ref):
    batches = list(ref.select(["ID", "VLA"]).iter_rows(batch_size=4))
    assert [b["ID"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5]]
    assert list(batches[0]) == ["ID", "VLA"] and isinstance(batches[0]["VLA"], list)
    assert [b["ID"].tolist() for b in ref.head(3).iter_rows(2)] == [[0, 1], [2]]
    with pytest.raises(ValueError):
        ref.iter_rows(0)


def test_ref_strings_and_vla(ref):
    assert ref.get_string_column("NAME") == ["a", "bb", "ccc", "", "e", "ff"]
    raw = ref.get_string_column("NAME", strip=False)
    assert raw[0] == "a\0\0\0\0" and len(raw[3]) == 5  # NUL padding kept
    assert ref.head(2).get_string_column("ONE") == ["x", "y"]
    with pytest.raises(KeyError):
        ref.get_string_column("ID")
    vla = ref.get_vla_column("VLA")
    assert len(vla) == N and vla[2].dtype == torch.float32 and vla[2].tolist() == [0.0, 1.0]
    assert ref.get_vla_lengths("VLA") == list(range(N))
    assert ref.head(2).get_vla_lengths("VLA") == [0, 1]
    with pytest.raises(KeyError):
        ref.get_vla_column("ID")


def test_ref_arrow_methods(ref):
    import pyarrow as pa
    sel = ref.select(["ID", "NUL"])
    t = sel.to_arrow()
    assert isinstance(t, pa.Table) and t.column_names == ["ID", "NUL"]
    assert t.column("NUL").null_count == 2  # Arrow paths apply TNULL
    assert sel.to_arrow(where="ID > 3").column("ID").to_pylist() == [4, 5]
    assert sel.head(4).to_arrow().num_rows == 4
    batches = list(sel.scan_arrow(batch_size=4))
    assert [b.num_rows for b in batches] == [4, 2]
    r = sel.reader_arrow()
    assert r.schema.metadata == {b"fits_hdu": b"1"}
    for method in (sel.to_arrow, sel.scan_arrow, sel.reader_arrow):
        with pytest.raises(TypeError, match="duplicate argument"):
            method(columns=["ID"])
    with pytest.raises(TypeError, match="duplicate argument"):
        sel.head(2).to_arrow(row_slice=(0, 1))


def test_ref_without_header_reads_it(tabfile):
    r = TableHDURef(source_path=tabfile, source_hdu="CAT", columns=["ID"], row_slice=(2, 4))
    assert r.header["EXTNAME"] == "CAT" and r.columns == ["ID"] and r.num_rows == 2
    assert r.read()["ID"].tolist() == [2, 3]
    with pytest.raises(ValueError, match="No file handle"):
        _ = TableHDURef().columns


def test_ref_sees_a_rewritten_file(tmp_path, fits):
    path = tmp_path / "live.fits"
    fits.BinTableHDU.from_columns([fits.Column(name="A", format="J", array=np.arange(3))]).writeto(path)
    r = hdu_module.open(path)[1]
    assert r.num_rows == 3
    path.unlink()
    fits.BinTableHDU.from_columns([fits.Column(name="A", format="J", array=np.arange(7))]).writeto(path)
    assert r.num_rows == 7


def test_ref_file_mutations_delegate_and_refresh(ref, fake_edit, tabfile):
    sel = ref.select(["ID", "MAG"])
    out = sel.append_rows_file({"ID": [7]})
    assert isinstance(out, TableHDURef) and out is not sel and out.columns == ["ID", "MAG"]
    assert fake_edit[-1] == ("append_rows", (tabfile, {"ID": [7]}), {"hdu": 1})
    sel.insert_rows_file({"ID": [1]}, row=2)
    assert fake_edit[-1][2] == {"row": 2, "hdu": 1}
    sel.update_rows_file({"ID": [1]}, (0, 1), mmap=True)
    assert fake_edit[-1][1][2] == (0, 1) and fake_edit[-1][2] == {"hdu": 1, "mmap": True}
    sel.delete_rows_file(slice(0, 2))
    assert fake_edit[-1][1] == (tabfile, slice(0, 2))
    sel.insert_column_file("NEW", [1] * N, index=0, unit="m")
    assert fake_edit[-1][0] == "insert_column" and fake_edit[-1][2]["unit"] == "m"
    sel.replace_column_file("MAG", [0.0] * N, tnull=None)
    assert fake_edit[-1][0] == "replace_column"
    renamed = sel.rename_columns_file({"MAG": "MAGNITUDE"})
    assert fake_edit[-1][1][1] == {"MAG": "MAGNITUDE"} and renamed._columns == ["ID", "MAGNITUDE"]
    dropped = sel.drop_columns_file(["MAG"])
    assert fake_edit[-1][0] == "drop_columns" and dropped.columns == ["ID"]


# ----------------------------------------------------------------------------- TableHDU


def _mem():
    return TableHDU({"ra": torch.tensor([1.0, 2.0, 3.0]), "id": np.array([10, 20, 30]),
                     "tag": ["x", "y", "z"],
                     "name": torch.tensor([[97, 0], [98, 98], [32, 99]], dtype=torch.uint8),
                     "col": torch.tensor([[1], [2], [3]]),
                     "vla": [torch.arange(i) for i in range(3)],
                     "ok": torch.tensor([True, False, True])},
                    header={"EXTNAME": "MEM"})


def test_table_hdu_constructor_checks():
    with pytest.raises(TypeError, match="tensor_dict must be a dictionary"):
        TableHDU([1, 2])
    with pytest.raises(ValueError, match="ra=2, dec=1"):
        TableHDU({"ra": [1, 2], "dec": [1]})
    t = TableHDU({})
    assert t.num_rows == 0 and t.columns == [] and repr(t) == "TableHDU(name='TABLE', rows=0, cols=0)"


def test_table_hdu_members():
    t = _mem()
    assert t.columns == t.col_names == ["ra", "id", "tag", "name", "col", "vla", "ok"]
    assert t.num_rows == 3 and len(t) == 3
    assert repr(t) == "TableHDU(name='MEM', rows=3, cols=7)"
    assert t["tag"] == ["x", "y", "z"] and isinstance(t["id"], np.ndarray)
    assert set(t.to_tensor_dict()) == {"ra", "name", "col", "ok"}  # the vla list is not a tensor
    assert t.data["col"].shape == (3,) and t["col"].shape == (3, 1)
    assert t.data.keys() == t.columns and len(t.data) == 7 and t.data.columns == t.columns
    assert t.string_columns == ["name"]
    assert t.vla_lengths == {"vla": [0, 1, 2]}
    assert t.get_vla_column("vla")[2].tolist() == [0, 1] and t.get_vla_lengths("vla") == [0, 1, 2]
    assert t.get_string_column("name") == ["a", "bb", " c"]
    assert t.get_string_column("name", strip=False)[0] == "a\0"
    with pytest.raises(KeyError):
        t.get_string_column("tag")
    with pytest.raises(KeyError):
        t.get_vla_column("ra")
    feats = t.feat_types
    assert feats["ra"] == "numerical" and feats["id"] == "numerical"
    assert feats["tag"] == "categorical" and feats["name"] == "categorical"
    schema = t.schema
    assert schema["string_columns"] == ["name"] and schema["vla_columns"] == ["vla"]
    assert isinstance(t.header, Header) and t.header["EXTNAME"] == "MEM"
    with pytest.raises(KeyError, match="Column 'zz' not found"):
        t["zz"]


def test_table_hdu_functional_updates_return_new_objects():
    t = _mem()
    t2 = t.add_column("z", np.zeros(3))
    assert "z" in t2.columns and "z" not in t.columns
    assert t.add_column("ra", [0, 0, 0], overwrite=True)["ra"] == [0, 0, 0]
    with pytest.raises(KeyError, match="Column 'ra' already exists"):
        t.add_column("ra", [0, 0, 0])
    with pytest.raises(ValueError, match="Column 'Z' has 4 rows, expected 3"):
        t.add_column("Z", [1, 2, 3, 4])
    r = t.rename_column("ra", "RA")
    assert r.columns[0] == "RA" and t.columns[0] == "ra"
    assert t.drop_columns(["tag", "vla"]).columns == ["ra", "id", "name", "col", "ok"]
    assert t.drop_columns("tag").num_rows == 3
    with pytest.raises(KeyError):
        t.drop_columns(["nope"])
    small = t.select(["id", "ra"])
    a = small.append_rows({"id": [40], "ra": torch.tensor([4.0])})
    assert a["id"].tolist() == [10, 20, 30, 40] and a["ra"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert small.num_rows == 3
    with pytest.raises(KeyError):
        small.append_rows({"id": [1]})
    h = t.head(2)
    assert h.num_rows == 2 and h["tag"] == ["x", "y"] and len(h["vla"]) == 2


def test_table_hdu_filter_iter_materialize():
    t = _mem()
    f = t.filter("ra > 1.5 AND ok == True")
    assert f["id"].tolist() == [30] and f["tag"] == ["z"] and f["ra"].tolist() == [3.0]
    assert t.filter("tag IN ('x', 'z')")["id"].tolist() == [10, 30]
    assert t.filter("name == 'bb'")["id"].tolist() == [20]
    batches = list(t.iter_rows(batch_size=2))
    assert [b["id"].tolist() for b in batches] == [[10, 20], [30]]
    assert [len(b["vla"]) for b in batches] == [2, 1]
    m = t.materialize()
    assert isinstance(m, TableHDU) and m is not t and m.columns == t.columns


def test_table_hdu_fits_round_trip(tmp_path, tabfile):
    t = TableHDU({"a": torch.arange(4, dtype=torch.int32), "b": np.linspace(0, 1, 4)},
                 header={"EXTNAME": "OUT", "OBSERVER": "me"})
    path = tmp_path / "out.fits"
    t.to_fits(path)
    with pytest.raises(FileExistsError, match="already exists. Use overwrite=True"):
        t.to_fits(path)
    t.to_fits(path, overwrite=True)
    back = TableHDU.from_fits(path)
    assert back["a"].tolist() == [0, 1, 2, 3] and back["b"].dtype == torch.float64
    assert back.header["OBSERVER"] == "me" and back.name == "OUT"
    cat = TableHDU.from_fits(tabfile, hdu_index="CAT")
    assert cat.num_rows == N and cat.header["NAXIS2"] == N  # typed header from read_torch
