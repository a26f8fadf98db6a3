"""Root interop helpers over column dicts (docs/compatibility.md): to_arrow, to_pandas, to_polars,
to_astropy."""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pytest

torch = pytest.importorskip("torch")

from torchfits.compat import interop as interop  # noqa: E402


def _columns():
    """What ``read_torch`` gives: scalars, a byte-matrix string column, a vector, a VLA."""
    return {
        "id": torch.arange(4, dtype=torch.int32),
        "flux": torch.tensor([1.0, 2.5, -1.0, 0.0], dtype=torch.float64),
        "name": torch.tensor([list(b"ab\0\0"), list(b"c d "), list(b"    "), list(b"xyzw")],
                             dtype=torch.uint8),
        "vec": torch.arange(8, dtype=torch.float32).reshape(4, 2),
        "vla": [torch.arange(i, dtype=torch.float32) for i in range(4)],
        "ok": torch.tensor([True, False, True, True]),
    }


def test_to_arrow_types_and_values():
    t = interop.to_arrow(_columns())
    assert t.column_names == ["id", "flux", "name", "vec", "vla", "ok"]
    types = dict(zip(t.schema.names, t.schema.types))
    assert types["id"] == pa.int32() and types["flux"] == pa.float64()
    assert types["name"] == pa.list_(pa.uint8(), 4)
    assert types["vec"] == pa.list_(pa.float32(), 2)
    assert types["vla"] == pa.list_(pa.float64())  # 1.2.3 widened float32 VLA to double
    assert types["ok"] == pa.bool_()
    assert t.column("vec").to_pylist()[1] == [2.0, 3.0]
    assert t.column("vla").to_pylist() == [[], [0.0], [0.0, 1.0], [0.0, 1.0, 2.0]]
    assert t.column("name").to_pylist()[0] == [97, 98, 0, 0]


def test_to_arrow_is_zero_copy_for_numeric_tensors():
    cols = _columns()
    t = interop.to_arrow(cols)
    cols["id"][1] = 42
    cols["flux"][0] = 9.0
    assert t.column("id")[1].as_py() == 42
    assert t.column("flux")[0].as_py() == 9.0


def test_to_arrow_decode_bytes():
    t = interop.to_arrow(_columns(), decode_bytes=True)
    assert t.schema.field("name").type == pa.string()
    assert t.column("name").to_pylist() == ["ab", "c d", "", "xyzw"]
    kept = interop.to_arrow(_columns(), decode_bytes=True, strip=False)
    assert kept.column("name").to_pylist() == ["ab", "c d ", "    ", "xyzw"]  # NULs always go


def test_to_arrow_policies_and_errors():
    assert "vla" not in interop.to_arrow(_columns(), vla_policy="drop").column_names
    with pytest.raises(ValueError, match="vla_policy"):
        interop.to_arrow(_columns(), vla_policy="object")
    with pytest.raises(ValueError, match="complex"):
        interop.to_arrow({"z": torch.zeros(3, dtype=torch.complex64)})
    with pytest.raises(ValueError, match="complex"):
        interop.to_arrow({"z": [torch.zeros(2, dtype=torch.complex128)]})


def test_to_arrow_accepts_numpy_lists_and_offsets_pairs():
    t = interop.to_arrow({"a": np.arange(3), "b": [1.5, 2.5, 3.5], "s": ["x", None, "z"],
                          "v": (np.array([1, 2, 3], np.int16), np.array([0, 1, 1, 3]))})
    assert t.column("a").to_pylist() == [0, 1, 2] and t.column("b").type == pa.float64()
    assert t.column("s").to_pylist() == ["x", None, "z"]
    assert t.column("v").to_pylist() == [[1], [], [2, 3]]


def test_to_arrow_from_read_torch(tmp_path, fits):
    from torchfits import table

    path = tmp_path / "t.fits"
    fits.BinTableHDU.from_columns([
        fits.Column(name="A", format="J", array=np.arange(3)),
        fits.Column(name="S", format="3A", array=np.array(["a", "bb", "ccc"])),
    ]).writeto(path)
    t = interop.to_arrow(table.read_torch(path), decode_bytes=True)
    assert t.to_pydict() == {"A": [0, 1, 2], "S": ["a", "bb", "ccc"]}


def test_to_pandas():
    pd = pytest.importorskip("pandas")
    df = interop.to_pandas(_columns())
    assert isinstance(df, pd.DataFrame) and list(df.columns) == ["id", "flux", "name", "vec", "vla", "ok"]
    assert df["id"].tolist() == [0, 1, 2, 3]
    assert df["vec"].dtype == object and isinstance(df["vec"][1], np.ndarray)
    assert df["vec"][1].tolist() == [2.0, 3.0]
    assert isinstance(df["vla"][2], np.ndarray) and df["vla"][2].tolist() == [0.0, 1.0]
    assert df["vla"][2].dtype == np.float32
    assert isinstance(df["name"][0], np.ndarray)
    assert interop.to_pandas(_columns(), decode_bytes=True)["name"].tolist() == ["ab", "c d", "", "xyzw"]
    assert "vla" not in interop.to_pandas(_columns(), vla_policy="drop").columns
    with pytest.raises(ValueError, match="vla_policy"):
        interop.to_pandas(_columns(), vla_policy="list")


def test_to_polars():
    pl = pytest.importorskip("polars")
    df = interop.to_polars(_columns(), rechunk=True)
    assert isinstance(df, pl.DataFrame) and df.height == 4
    assert isinstance(df.schema["vec"], pl.Array) and isinstance(df.schema["vla"], pl.List)
    assert df["id"].to_list() == [0, 1, 2, 3]
    assert interop.to_polars(_columns(), decode_bytes=True)["name"].to_list() == ["ab", "c d", "", "xyzw"]
    assert "vla" not in interop.to_polars(_columns(), vla_policy="drop").columns
    with pytest.raises(ValueError):
        interop.to_polars(_columns(), vla_policy="object")


def test_to_astropy_from_dict_and_path(tmp_path, fits):
    from astropy.table import MaskedColumn, Table

    t = interop.to_astropy(_columns(), decode_bytes=True)
    assert isinstance(t, Table) and t.colnames == ["id", "flux", "name", "vec", "vla", "ok"]
    assert t["vec"].shape == (4, 2) and list(t["name"]) == ["ab", "c d", "", "xyzw"]
    assert t["vla"][3].tolist() == [0.0, 1.0, 2.0]
    assert "vla" not in interop.to_astropy(_columns(), vla_policy="drop").colnames
    assert interop.to_astropy(_columns())["name"].shape == (4, 4)

    path = tmp_path / "t.fits"
    fits.BinTableHDU.from_columns([
        fits.Column(name="A", format="J", null=-1, unit="s", array=np.array([-1, 2, 3])),
    ]).writeto(path)
    from_path = interop.to_astropy(str(path))
    assert isinstance(from_path["A"], MaskedColumn) and from_path["A"].mask.tolist() == [True, False, False]
    assert str(from_path["A"].unit) == "s"


@pytest.mark.parametrize("func, package", [("to_pandas", "pandas"), ("to_polars", "polars"),
                                           ("to_astropy", "astropy")])
def test_missing_dependency_names_the_package(monkeypatch, func, package):
    monkeypatch.setitem(sys.modules, package, None)
    with pytest.raises(ImportError, match=package):
        getattr(interop, func)(_columns())


def test_input_must_be_a_dict():
    with pytest.raises(TypeError):
        interop.to_arrow([1, 2, 3])


def test_importing_interop_is_light():
    import subprocess

    code = "import sys, torchfits.compat.interop; print('pyarrow' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
