"""One module per concept in the 1.x layer: one text rule for byte-matrix strings on every
route, one row-window parser for reads and edits, one variable-length test, the where evaluator
beside the other 1.x code, and no cross-module use of underscore names in compat/ and query/."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
torch = pytest.importorskip("torch")

import torchfits  # noqa: E402
from _tablehelpers import write_raw_bintable  # noqa: E402
from torchfits import table, where  # noqa: E402
from torchfits.compat.table_hdu import TableHDU  # noqa: E402
from torchfits.compat.tensor_columns import decode_byte_rows, is_vla, vla_lengths  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

# trailing blanks and NULs in every mix, embedded NULs and blanks, leading blanks, all padding
CELLS = [b"ab  \0\0", b"ab \0  ", b"ab\0  x", b"ab    ", b"ab\0cd ", b"  c d ", b"\0bc   ",
         b"      ", b"\0\0\0\0\0\0", b"a \0 \0 "]


@pytest.fixture
def strings(tmp_path):
    return write_raw_bintable(tmp_path / "s.fits", [("TTYPE1", "S"), ("TFORM1", "6A")],
                              b"".join(CELLS), len(CELLS), 6)


def test_the_text_rule():
    matrix = np.frombuffer(b"".join(CELLS), np.uint8).reshape(len(CELLS), 6)
    stripped = ["ab", "ab", "ab\0  x", "ab", "ab\0cd", "  c d", "\0bc", "", "", "a"]
    assert decode_byte_rows(matrix, "ascii", True) == stripped
    # without strip only the trailing NULs go
    assert decode_byte_rows(matrix, "ascii", False) == [c.rstrip(b"\0").decode() for c in CELLS]
    assert decode_byte_rows(matrix, "ascii", False, keep_padding=True) == [c.decode() for c in CELLS]


@pytest.mark.parametrize("strip", [True, False])
def test_arrow_reads_and_byte_matrix_routes_agree(strings, strip):
    arrow = table.read(strings, strip=strip)["S"].to_pylist()
    tensors = table.read_torch(strings)
    assert tensors["S"].shape == (len(CELLS), 6)  # the raw field, padding kept
    assert torchfits.to_arrow(tensors, decode_bytes=True, strip=strip)["S"].to_pylist() == arrow
    assert list(torchfits.to_pandas(tensors, decode_bytes=True, strip=strip)["S"]) == arrow
    assert list(torchfits.to_astropy(tensors, decode_bytes=True, strip=strip)["S"]) == arrow
    if strip:
        ref = torchfits.open(strings)[1]
        assert ref.get_string_column("S") == arrow
        assert TableHDU(tensors).get_string_column("S") == arrow


def test_stripped_text_matches_astropy_table_read(strings):
    from astropy.table import Table

    theirs = Table.read(strings)["S"]
    ours = table.read(strings)["S"].to_pylist()
    assert [("" if m else str(v)) for v, m in zip(theirs, np.ma.getmaskarray(theirs))] == ours


def test_get_string_column_without_strip_is_the_raw_field(strings):
    # 1.2.3 kept NULs and blanks here, unlike Arrow reads (docs/compatibility.md)
    raw = [c.decode() for c in CELLS]
    assert torchfits.open(strings)[1].get_string_column("S", strip=False) == raw
    assert TableHDU(table.read_torch(strings)).get_string_column("S", strip=False) == raw


def test_where_on_text_agrees_on_both_routes(strings):
    on_file = table.read(strings, where="S == 'ab'")["S"].to_pylist()
    in_memory = TableHDU(table.read_torch(strings)).filter("S == 'ab'")
    assert len(on_file) == in_memory.num_rows == 3


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "t.fits"
    table.write(path, {"a": np.arange(5, dtype=np.int32)})
    return str(path)


@pytest.mark.parametrize("bad, message", [
    (slice(0, 4, 2), "row_slice step must be 1"),
    ((0, 1, 2), "row_slice tuple must have 2 items"),
    ([0, 2], "row_slice must be a slice, \\(start, stop\\), or None"),
    ((-1, 2), "row_slice start must be >= 0"),
    ((0, -1), "negative stop"),
])
def test_reads_refs_and_edits_share_the_row_window_parser(small, bad, message):
    with pytest.raises(ValueError, match=message):
        table.read(small, row_slice=bad)
    with pytest.raises(ValueError, match=message):
        torchfits.open(small)[1].read(row_slice=bad)
    with pytest.raises(ValueError, match=message):
        table.update_rows(small, {"a": [1, 2]}, row_slice=bad)
    with pytest.raises(ValueError, match=message):
        table.delete_rows(small, row_slice=bad)
    assert table.read(small)["a"].to_pylist() == [0, 1, 2, 3, 4]


def test_edit_windows_after_the_shared_parser(small):
    table.update_rows(small, {"a": [7, 8]}, row_slice=slice(3, None))
    table.delete_rows(small, (0, 1))
    assert table.read(small)["a"].to_pylist() == [1, 2, 7, 8]
    with pytest.raises(ValueError, match="never extends"):
        table.update_rows(small, {"a": [1, 2]}, row_slice=(3, 5))
    with pytest.raises(ValueError, match="needs a row_slice"):
        table.update_rows(small, {"a": [1]}, row_slice=None)


def test_header_row_count_uses_the_same_window(small):
    ref = torchfits.open(small)[1]
    for window in [None, (1, 3), slice(2, None), (4, 99), (9, 12)]:
        narrowed = ref._narrowed(row_slice=window)
        assert narrowed._header_rows() == narrowed.num_rows


def test_one_variable_length_test_for_interop_and_table_hdu():
    rows = [np.arange(2.0), None, np.arange(3.0)]
    pair = (np.array([0.0, 1.0, 0.0, 1.0, 2.0]), np.array([0, 2, 2, 5]))
    for value in (rows, pair):
        assert is_vla(value)
        assert vla_lengths(value) == [2, 0, 3]
        t = TableHDU({"v": value, "i": np.arange(3)})
        assert t.num_rows == 3 and t.vla_lengths == {"v": [2, 0, 3]}
        assert t.schema["columns"][0]["vla"] and t.schema["columns"][0]["shape"] == (3,)
        assert torchfits.to_arrow({"v": value})["v"].to_pylist()[2] == [0.0, 1.0, 2.0]
    assert not is_vla([]) and not is_vla([1, 2]) and not is_vla(np.arange(3))


def test_where_module_exports_parser_and_evaluator():
    from torchfits.compat import where_eval
    from torchfits.query import where_compat

    assert where.evaluate_where is where_eval.evaluate_where
    assert where.parse_where_expression is where_compat.parse_where_expression
    assert not hasattr(where_compat, "evaluate_where")
    assert where.from_compat_ast is where_compat.from_compat_ast  # names outside __all__ too
    assert where.evaluate_where(where.parse_where_expression("A IN (1, 3)"),
                                {"A": np.arange(4)}).tolist() == [False, True, False, True]


def test_table_namespace_takes_the_conversions_from_interop():
    from torchfits.compat import interop

    assert table.to_pandas is interop.table_to_pandas
    assert table.to_astropy is interop.table_to_astropy
    assert torchfits.to_pandas is interop.to_pandas  # the column-dict helper
    assert table.write_parquet is interop.write_parquet


def _module_names() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "torchfits").rglob("*"):
        if path.suffix in (".py", ".pyi") or path.suffix == ".so":
            parts = path.relative_to(ROOT).parts
            stem = parts[-1].split(".")[0]
            name = ".".join(parts[:-1] + (() if stem == "__init__" else (stem,)))
            out.setdefault(name, path)
    return out


def test_compat_and_query_use_no_underscore_names_of_other_modules():
    modules = _module_names()
    found = []
    for name, path in sorted(modules.items()):
        if path.suffix != ".py" or not name.startswith(("torchfits.compat", "torchfits.query")):
            continue
        tree = ast.parse(path.read_text())
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1] + [node.module or ""]
                                ).rstrip(".") if node.level else node.module or ""
                for a in node.names:
                    if f"{base}.{a.name}" in modules:  # a module (kernel modules are _-named)
                        aliases.add(a.asname or a.name)
                    elif a.name.startswith("_") and not a.name.startswith("__"):
                        found.append(f"{name}:{node.lineno} imports {base}.{a.name}")
            elif isinstance(node, ast.Import):
                aliases |= {a.asname for a in node.names if a.asname}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                v = node.value
                if isinstance(v, ast.Name) and v.id in aliases:
                    found.append(f"{name}:{node.lineno} uses {v.id}.{node.attr}")
                elif isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
                    found.append(f"{name}:{node.lineno} uses {v.func.id}().{node.attr}")
    assert found == []
