"""The kernels' portability headers, each branch built and run here (issue 27, Windows wheels).

``cython_src/_portable.h`` has three branches: GCC/Clang builtins, MSVC intrinsics, plain C.
``check_portable.c`` prints every macro (and the swap kernels of ``_swap.h``) on edge and
random inputs; each branch's output must equal the values computed here in Python:

- the GCC/Clang branch and the plain-C one (``TF_PORTABLE_GENERIC``) with the host C compiler
  (so too ``check_unshuffle.c``: GZIP_2's un-shuffle of ``_unshuffle.h`` against its definition);
- the MSVC branch (forced with ``TF_PORTABLE_MSVC``) with the host compiler against
  ``msvc_stub/intrin.h``, stand-ins with MSVC's semantics, for x64, x86 and ARM64; and a
  preprocessor pass showing that ``_MSC_VER`` without ``__GNUC__`` selects that branch;
- with the MinGW-w64 cross compiler (Debian's gcc-mingw-w64-x86-64; CI has none, so those tests
  skip there), all three branches against the real Windows headers, and ``_safemap.h``'s Windows
  branch (MapViewOfFile) through ``check_safemap.c``; under Wine, when it is installed, the
  Windows programs run too (a mapped file refuses truncation there, as on Windows).

MSVC itself compiles none of this here: the Windows wheel build (cibuildwheel on a Windows
runner) is the first place it does.
"""
from __future__ import annotations

import os
import random
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "cython_src"
MASK64 = (1 << 64) - 1
WARNINGS = ["-Wall", "-Wextra", "-Werror"]
MINGW = "x86_64-w64-mingw32-gcc"


def _host_compiler() -> list[str] | None:
    """The C compiler Python's extensions are built with (``$CC`` first), if it is here."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    argv = shlex.split(cc)
    if argv and shutil.which(argv[0]):
        return argv[:1]
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return [name]
    return None


def _wine() -> str | None:
    for name in ("wine64", "wine"):
        if shutil.which(name):
            return shutil.which(name)
    return "/usr/lib/wine/wine64" if os.access("/usr/lib/wine/wine64", os.X_OK) else None


HOST = _host_compiler()
needs_host = pytest.mark.skipif(HOST is None or sys.platform == "win32",
                                reason="no C compiler on PATH (cc, gcc, clang or $CC)")
needs_mingw = pytest.mark.skipif(shutil.which(MINGW) is None,
                                 reason=f"{MINGW} not installed (apt-get install gcc-mingw-w64-x86-64)")


def _values() -> list[int]:
    """Edge inputs (0, 1, all ones, each single bit, each run of low ones, the top bit of each
    width) and seeded random 64-bit words, sparse and dense."""
    vals = {0, 1, 2, 3, MASK64, 1 << 63, 0x0123456789ABCDEF, 0xFEDCBA9876543210,
            0xFFFF, 0x8000, 0xFFFFFFFF, 0x80000000, 0x00FF00FF00FF00FF}
    for k in range(64):
        vals |= {1 << k, (1 << k) - 1 or 1, MASK64 ^ (1 << k), MASK64 << k & MASK64}
    rng = random.Random(27)
    for _ in range(200):
        vals.add(rng.getrandbits(64))
        vals.add(rng.getrandbits(64) & rng.getrandbits(64) & rng.getrandbits(64))
    return sorted(vals)


def _bswap(v: int, nbytes: int) -> int:
    return int.from_bytes((v & ((1 << 8 * nbytes) - 1)).to_bytes(nbytes, "little"), "big")


def _clz(v: int, bits: int) -> int:
    return bits - (v & ((1 << bits) - 1)).bit_length()


def _ctz(v: int) -> int:
    return (v & -v).bit_length() - 1


def _expected(values: list[int]) -> list[str]:
    """check_portable.c's lines after its header, computed in Python."""
    out = []
    for v in values:
        v32, v16 = v & 0xFFFFFFFF, v & 0xFFFF
        out += [f"bswap16 {v} {_bswap(v16, 2)}", f"bswap32 {v} {_bswap(v32, 4)}",
                f"bswap64 {v} {_bswap(v, 8)}", f"likely {v} {int(v != 0)}",
                f"unlikely {v} {int(v == 0)}"]
        if v:
            out += [f"clz64 {v} {_clz(v, 64)}", f"ctz64 {v} {_ctz(v)}"]
        if v32:
            out += [f"clz32 {v} {_clz(v32, 32)}", f"ctz32 {v} {_ctz(v32)}"]
        b = v.to_bytes(8, "little")
        out += [f"memcpy {v} {v}",
                f"swap16 {v} {int.from_bytes(b[:2], 'big') ^ 0x8000}",
                f"swap32 {v} {int.from_bytes(b[:4], 'big') ^ 0x80000000}",
                f"swap64 {v} {_bswap(v, 8)}",
                "inplace64 1", "inplace32 1", "inplace16 1", "stream 1"]
    return out + ["done"]


def _build(compiler: list[str], tmp: Path, source: str, flags: list[str], exe: str,
           values: list[int] | None = None) -> Path:
    if values is not None:
        (tmp / "values.h").write_text("#define TF_VALUES " + ", ".join(f"{v}ull" for v in values) + "\n")
    out = tmp / exe
    cmd = [*compiler, "-std=c99", "-O2", *WARNINGS, *flags, f"-I{tmp}", f"-I{SRC}",
           str(HERE / source), "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, " ".join(cmd) + "\n" + done.stderr
    return out


def _run(argv: list[str]) -> list[str]:
    env = dict(os.environ, WINEDEBUG="-all")
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.replace("\r\n", "\n").splitlines()


def _check(lines: list[str], values: list[int], branch: str, dispatch: int) -> list[str]:
    """Compares a run's macro lines with Python's; returns its "cpu" line's two flags."""
    assert lines[0] == f"branch {branch} {dispatch}"
    assert lines[2:4] == ["target 2", "clones 3"]
    expected = _expected(values)
    assert len(lines[4:]) == len(expected)
    bad = [(got, want) for got, want in zip(lines[4:], expected) if got != want]
    assert not bad, bad[:10]
    return lines[1].split()[1:]


def _cpu_flags() -> set[str] | None:
    try:
        with open("/proc/cpuinfo") as fh:
            return next((set(line.split(":", 1)[1].split()) for line in fh
                         if line.startswith("flags")), None)
    except OSError:
        return None


# -- host compiler: the GCC/Clang branch and the plain-C one -------------------------------------

@needs_host
@pytest.mark.parametrize("generic", [False, True], ids=["builtins", "generic"])
def test_portable_branches_compute_what_python_does(tmp_path, generic):
    values = _values()
    gnu = "clang" in HOST[0] or "gcc" in HOST[0] or HOST[0] == "cc"
    flags = ["-DTF_PORTABLE_GENERIC"] if generic else []
    exe = _build(HOST, tmp_path, "check_portable.c", flags, "check", values)
    lines = _run([str(exe)])
    if generic:
        assert _check(lines, values, "generic", 0) == ["0", "0"]  # baseline loops only
        return
    if not gnu:
        pytest.skip(f"{HOST[0]} is not GCC or Clang")
    x86 = sysconfig.get_platform().endswith(("x86_64", "amd64"))
    cpu = _check(lines, values, "gnu", int(x86))
    flags_seen = _cpu_flags()
    if x86 and flags_seen is not None:  # the run-time CPU checks agree with the kernel's
        assert cpu == [str(int("avx2" in flags_seen)),
                       str(int({"abm", "bmi2"} <= flags_seen or {"lzcnt", "bmi2"} <= flags_seen))]


@needs_host
@pytest.mark.parametrize("arch", ["_M_X64", "_M_IX86", "_M_ARM64"])
def test_msvc_branch_against_stand_in_intrinsics(tmp_path, arch):
    """The MSVC branch's own code (index arithmetic of _BitScan*, the 32-bit fallbacks of the
    64-bit scans) runs here with intrinsics that behave as MSVC documents them."""
    values = _values()
    flags = ["-DTF_PORTABLE_MSVC", f"-D{arch}", f"-I{HERE / 'msvc_stub'}"]
    exe = _build(HOST, tmp_path, "check_portable.c", flags, "check", values)
    assert _check(_run([str(exe)]), values, "msvc", 0) == ["0", "0"]


@needs_host
def test_msvc_compiler_selects_the_msvc_branch(tmp_path):
    """``_MSC_VER`` without ``__GNUC__`` (what cl.exe predefines) selects the MSVC branch, with no
    target attributes and no CPU dispatch; a GCC or Clang selects the builtins."""
    def macros(*flags: str) -> set[str]:
        cmd = [*HOST, "-E", "-dM", *flags, f"-I{HERE / 'msvc_stub'}", str(SRC / "_portable.h")]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"{HOST[0]} cannot preprocess as MSVC: {done.stderr[:200]}")
        return {line.split()[1].split("(")[0] for line in done.stdout.splitlines()
                if line.startswith("#define ")}
    msvc = macros("-U__GNUC__", "-U__clang__", "-D_MSC_VER=1930", "-D_M_X64", "-Wno-builtin-macro-redefined")
    assert "TF_PORTABLE_MSVC" in msvc and not {"TF_PORTABLE_GNU", "TF_PORTABLE_GENERIC"} & msvc
    assert "TF_X86_DISPATCH" not in msvc
    assert "TF_PORTABLE_GNU" in macros()


@needs_host
@pytest.mark.parametrize("generic", [False, True], ids=["builtins", "generic"])
def test_unshuffle_header_host_branches(tmp_path, generic):
    """GZIP_2's un-shuffle (``_unshuffle.h``): its SSE2 steps (x86-64, plain and streaming
    stores) and its plain-C loop (``TF_PORTABLE_GENERIC``, the whole decoder elsewhere) give every
    element of tiles of 0-69 elements and a few longer ones, for 1-, 2-, 4- and 8-byte elements
    at every offset within 16 bytes, and write nothing outside the tile."""
    exe = _build(HOST, tmp_path, "check_unshuffle.c", ["-DTF_PORTABLE_GENERIC"] if generic else [],
                 "unshuffle")
    assert _run([str(exe)]) == [f"checked {2 * 76 * (16 + 8 + 4 + 2)}"]


@needs_host
def test_safemap_header_host_branch(tmp_path):
    """_safemap.h's POSIX branch (the one the kernels build here) outside Python, with the
    builtins and with the plain-C fence."""
    big, empty = tmp_path / "f.bin", tmp_path / "e.bin"
    big.write_bytes(bytes(i * 7 & 255 for i in range(3 * 4096 + 5)))
    empty.write_bytes(b"")
    for flags in ([], ["-DTF_PORTABLE_GENERIC"]):
        exe = _build(HOST, tmp_path, "check_safemap.c", ["-D_GNU_SOURCE", *flags], "safemap")
        out = dict(line.partition(" ")[::2] for line in _run([str(exe), str(big), str(empty)]))
        assert out["map"] == "1 0" and out["bytes"] == "1" and out["bytes_after_release"] == "1"
        assert out["size"] == str(3 * 4096 + 5) and out["release"] == "0"
        assert out["faulted"] == "0 0" and out["empty_size"] == "0" and out["empty_map"] == "1 1"


# -- MinGW-w64: the real Windows headers, run under Wine where it is installed -------------------

@needs_mingw
@pytest.mark.parametrize("mode", ["gnu", "msvc", "generic"])
def test_windows_cross_build_of_portable(tmp_path, mode):
    """MinGW's own branch is the GCC one (with x86 dispatch); forcing the MSVC branch builds it
    against the real <intrin.h> (the Windows SDK's intrinsics as MinGW declares them)."""
    values = _values()
    flags = {"gnu": [], "msvc": ["-DTF_PORTABLE_MSVC"], "generic": ["-DTF_PORTABLE_GENERIC"]}[mode]
    exe = _build([MINGW], tmp_path, "check_portable.c", flags, "check.exe", values)
    wine = _wine()
    if wine is None:
        pytest.skip("built for Windows; Wine is not installed to run it")
    _check(_run([wine, str(exe)]), values, mode, int(mode == "gnu"))


@needs_mingw
def test_windows_cross_build_of_safemap(tmp_path):
    """_safemap.h's Windows branch: CreateFileMapping/MapViewOfFile on a descriptor's handle;
    under Wine the file refuses truncation while mapped (why no fault handler is needed)."""
    exe = _build([MINGW], tmp_path, "check_safemap.c", [], "safemap.exe")
    wine = _wine()
    if wine is None:
        pytest.skip("built for Windows; Wine is not installed to run it")
    big, empty = tmp_path / "f.bin", tmp_path / "e.bin"
    big.write_bytes(bytes(i * 7 & 255 for i in range(3 * 4096 + 5)))
    empty.write_bytes(b"")
    out = dict(line.partition(" ")[::2] for line in _run([wine, str(exe), str(big), str(empty)]))
    assert out["install"] == "0" and out["map"] == "1 0" and out["bytes"] == "1"
    assert out["release"] == "0" and out["bytes_after_release"] == "1"
    assert out["truncate_refused"] == "1" and out["truncate_unmapped"] == "1"
    assert out["faulted"] == "0 0" and out["empty_map"] == "1 1"
    assert big.stat().st_size == 10  # truncated once unmapped
