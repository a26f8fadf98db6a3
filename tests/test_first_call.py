"""The first call of a process imports only what it needs (issue 29, docs/architecture.md,
"Start-up"): no path below imports pandas, polars, torch, ``pyarrow.dataset`` or DuckDB unless
its result is made of them, and a where the row kernel takes whole builds no pyarrow
expression (``pyarrow.compute`` stays out)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from _oracles import write_image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("pandas", "polars", "torch", "pyarrow.dataset", "pyarrow.acero", "duckdb")
# what a native where-scan of a binary table does not need, so does not load: the 1.x where
# dialect, cone geometry, ASCII-table and variable-length decoding, globbing and the
# did-you-mean suggestions of error messages
OFF_WHERE_PATH = ("pyarrow.compute", "torchfits.query.where_compat", "torchfits.query.sky",
                  "torchfits.tables.ascii_decode", "torchfits._kernels._asciitable",
                  "torchfits.tables.variable_length", "glob", "difflib")


def loaded_after(code: str, *args: str, watch: tuple[str, ...] = HEAVY) -> list[str]:
    """Run ``code`` in a fresh interpreter (cwd = repo root) and list the modules of ``watch``
    it imported."""
    script = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        print(json.dumps([m for m in {list(watch)!r} if m in sys.modules]))
    """)
    proc = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True,
                          text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout:{proc.stdout}\nstderr:{proc.stderr[-4000:]}"
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from astropy.io import fits

    tmp = tmp_path_factory.mktemp("first_call")
    img = write_image(tmp / "img.fits", np.arange(20 * 30, dtype=np.int16).reshape(20, 30),
                      bitpix=16, extension=True, extname="SCI")
    tab = tmp / "tab.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(
        [fits.Column(name="a", format="J", array=np.arange(6)),
         fits.Column(name="b", format="E", array=np.arange(6) * 0.5),
         fits.Column(name="s", format="8A", array=np.array(["w", "x", "y", "z", "x", "q"]))],
        name="T")]).writeto(tab)
    return str(img), str(tab)


def test_header_and_image_paths(files):
    img, _ = files
    assert loaded_after("""
        import sys, torchfits
        assert torchfits.read_header(sys.argv[1], 1)["EXTNAME"] == "SCI"
        assert torchfits.read_numpy(sys.argv[1], 1).shape == (20, 30)
        assert torchfits.open_image(sys.argv[1], 1)[2:5, 3].shape == (3,)
    """, img) == []


def test_1x_image_read_imports_torch_only(files):
    pytest.importorskip("torch")
    img, _ = files
    assert loaded_after("""
        import sys, torchfits
        assert tuple(torchfits.read(sys.argv[1], 1).shape) == (20, 30)
    """, img) == ["torch"]


def test_scan_without_where(files):
    _, tab = files
    assert loaded_after("""
        import sys, torchfits
        assert torchfits.scan(sys.argv[1]).to_arrow().num_rows == 6
    """, tab, watch=(*HEAVY, "pyarrow.compute")) == []


def test_where_the_kernel_takes_builds_no_expression(files):
    # the type check runs over stand-ins: pyarrow.compute is not even imported
    _, tab = files
    assert loaded_after("""
        import sys, torchfits
        got = torchfits.scan(sys.argv[1], where="a > 1 AND b BETWEEN 1 AND 2").to_arrow()
        assert got.column("a").to_pylist() == [2, 3, 4]
    """, tab, watch=(*HEAVY, *OFF_WHERE_PATH)) == []


def test_where_path_runs_no_dataclass_decorator(files):
    # the decorator execs generated code per class: the value types of the where path are
    # records (torchfits.fits.record), so a where-scan creates no dataclass of ours
    _, tab = files
    script = textwrap.dedent("""
        import dataclasses, sys
        made = []
        real = dataclasses._process_class
        def spy(cls, *args, **kwargs):
            made.append(f"{cls.__module__}.{cls.__qualname__}")
            return real(cls, *args, **kwargs)
        dataclasses._process_class = spy
        import torchfits
        got = torchfits.scan(sys.argv[1], columns=["a"], where="a > 1 AND b BETWEEN 1 AND 2").to_arrow()
        assert got.column("a").to_pylist() == [2, 3, 4]
        print([m for m in made if m.startswith("torchfits")])
    """)
    proc = subprocess.run([sys.executable, "-c", script, tab], capture_output=True, text=True,
                          timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("where, want", [
    ("s == 'x'", [1, 4]),
    ("s LIKE 'x%'", [1, 4]),
    ("a > 1 AND s != 'q'", [2, 3, 4]),
    ("abs(b) > 1 OR a < 1", [0, 3, 4, 5]),
    ("a IN (1, 3) OR b * 2 > 4.5", [1, 3, 5]),
])
def test_residual_where_without_pandas(files, where, want):
    # a residual evaluates with pyarrow.compute calls on the batch, never through Acero
    # (which imports pyarrow.dataset and pandas), and its literals are built from buffers
    _, tab = files
    assert loaded_after(f"""
        import sys, torchfits
        s = torchfits.scan(sys.argv[1], where={where!r})
        assert s._residual_tree is not None
        assert s.to_arrow().column("a").to_pylist() == {want!r}
    """, tab) == []


def test_1x_table_read(files):
    _, tab = files
    assert loaded_after("""
        import sys, torchfits
        t = torchfits.table.read(sys.argv[1], where="a > 2")
        assert t.column("a").to_pylist() == [3, 4, 5]
        t = torchfits.table.read(sys.argv[1], columns=["a"], where="s == 'x'")
        assert t.column("a").to_pylist() == [1, 4]
    """, tab) == []


def test_cli_imports_only_the_module_of_its_command(files):
    img, _ = files
    modules = ("torchfits.cli.compress_commands", "torchfits.cli.diff_command",
               "torchfits.cli.edit_commands", "torchfits.cli.index_commands",
               "torchfits.cli.inspect_commands", "torchfits.cli.sql_commands")
    assert loaded_after("""
        import contextlib, io, sys
        from torchfits.cli.main import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["header", sys.argv[1]]) == 0
    """, img, watch=(*modules, "numpy")) == []
    assert loaded_after("""
        import contextlib, io, sys
        from torchfits.cli.main import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["diff", sys.argv[1], sys.argv[1]]) == 0
    """, img, watch=modules) == ["torchfits.cli.diff_command"]
    _, tab = files
    pytest.importorskip("duckdb")
    assert loaded_after("""
        import contextlib, io, sys
        from torchfits.cli.main import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["sql", f"select count(*) from '{sys.argv[1]}' where a > 2"]) == 0
    """, tab, watch=(*modules, "torchfits.image", "pandas")) == ["torchfits.cli.sql_commands"]


def test_cli_command_table_names_every_module_command():
    from torchfits.cli import main as cli

    cli.COMMANDS.clear()
    cli.build_parser()
    builtin = {"info", "header", "demo"}
    assert set(cli.COMMANDS) - builtin == set(cli._COMMAND_MODULES)
    for command, module in cli._COMMAND_MODULES.items():
        cli.COMMANDS.clear()
        cli.build_parser(command)
        assert set(cli.COMMANDS) - builtin == {c for c, m in cli._COMMAND_MODULES.items() if m == module}
    cli.COMMANDS.clear()
    cli.build_parser()
