"""Deterministic benchmark data for torchfits.

Writes FITS files into ``benchmarks/data/`` (gitignored) from fixed seeds; a file that
already exists with the expected size is kept, so runners can call :func:`ensure` freely.

Adding a data set (tables, tile-compressed images, ...) means writing one function that
writes the file and registering it with :func:`register` and its expected byte size::

    register(Dataset("catalog_1m", "catalog_1m.fits", size, _write_catalog, "..."))

Run ``python benchmarks/generate.py --list`` to see what is registered, and
``python benchmarks/generate.py [NAME ...] [--force]`` to build files.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

BLOCK = 2880
CARD = 80
DATA_DIR = Path(__file__).resolve().parent / "data"


def padded(nbytes: int) -> int:
    """Round ``nbytes`` up to a whole number of 2880-byte FITS blocks.

    Parameters
    ----------
    nbytes : int
        Unpadded size of a header or data unit.

    Returns
    -------
    int
        Size on disk.
    """
    return -(-nbytes // BLOCK) * BLOCK


def hdu_size(ncards: int, data_nbytes: int) -> int:
    """Bytes one HDU takes on disk.

    Parameters
    ----------
    ncards : int
        Header cards, not counting ``END`` (counted here).
    data_nbytes : int
        Unpadded size of the data unit (0 for none).

    Returns
    -------
    int
        Padded header plus padded data.
    """
    return padded((ncards + 1) * CARD) + padded(data_nbytes)


@dataclass(frozen=True)
class Dataset:
    """One generated benchmark file.

    Attributes
    ----------
    name : str
        Key used by runners and on the command line.
    filename : str
        File name inside the data directory.
    expected_size : int
        Exact size in bytes of a complete file; an existing file of this size is
        reused, anything else is rewritten.
    write : callable
        ``write(path)`` writes the whole file at ``path`` deterministically.
    description : str
        One line for ``--list`` and for the benchmark report.
    """

    name: str
    filename: str
    expected_size: int
    write: Callable[[Path], None]
    description: str


DATASETS: dict[str, Dataset] = {}


def register(dataset: Dataset) -> Dataset:
    """Add ``dataset`` to the registry (names must be unique).

    Parameters
    ----------
    dataset : Dataset
        The data set to register.

    Returns
    -------
    Dataset
        The same object, so registration can be used inline.
    """
    if dataset.name in DATASETS:
        raise ValueError(f"dataset {dataset.name!r} is already registered")
    DATASETS[dataset.name] = dataset
    return dataset


def path_of(name: str, data_dir: Path = DATA_DIR) -> Path:
    """Path where data set ``name`` lives (whether or not it exists yet)."""
    return Path(data_dir) / DATASETS[name].filename


def ensure(name: str, data_dir: Path = DATA_DIR, force: bool = False, verbose: bool = True) -> Path:
    """Return the path of data set ``name``, writing the file first if needed.

    Parameters
    ----------
    name : str
        Registered data set name.
    data_dir : Path, optional
        Directory for the files (default ``benchmarks/data``).
    force : bool, optional
        Rewrite the file even if it already has the expected size.
    verbose : bool, optional
        Print a line when a file is written.

    Returns
    -------
    Path
        Path of the complete file.

    Raises
    ------
    RuntimeError
        If the written file does not have the registered size, which means the
        writer and ``expected_size`` disagree (a bug in this module).
    """
    dataset = DATASETS[name]
    path = path_of(name, data_dir)
    if not force and path.exists() and path.stat().st_size == dataset.expected_size:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write under a temporary name and rename, so an interrupted run never leaves
    # a file that a later size check could mistake for a complete one.
    tmp = path.with_name(path.name + ".part")
    if tmp.exists():
        tmp.unlink()
    t0 = time.perf_counter()
    dataset.write(tmp)
    size = tmp.stat().st_size
    if size != dataset.expected_size:
        tmp.unlink()
        raise RuntimeError(
            f"{name}: writer produced {size} bytes, registry expects {dataset.expected_size}"
        )
    os.replace(tmp, path)
    if verbose:
        print(f"wrote {path} ({size / 2**20:.1f} MiB, {time.perf_counter() - t0:.1f} s)")
    return path


def ensure_all(names: Iterable[str] | None = None, data_dir: Path = DATA_DIR,
               force: bool = False) -> dict[str, Path]:
    """Ensure several data sets (all registered ones by default).

    Returns
    -------
    dict of str to Path
        Data set name to file path.
    """
    selected = list(DATASETS) if names is None else list(names)
    return {name: ensure(name, data_dir, force=force) for name in selected}


# --------------------------------------------------------------------------- images

IMAGE_SIDE = 4096


def _write_primary_image(path: Path, data: np.ndarray, cards: list[tuple[str, object, str]]) -> None:
    """Write ``data`` as the primary HDU with extra header ``cards``."""
    from astropy.io import fits

    hdu = fits.PrimaryHDU(data=data)
    for key, value, comment in cards:
        hdu.header[key] = (value, comment)
    # uint16 arrays are written by astropy as BITPIX=16 with BZERO=32768, BSCALE=1.
    hdu.writeto(path, output_verify="exception")


def _image_cards(what: str, seed: int) -> list[tuple[str, object, str]]:
    """The cards of a synthetic primary image: what it holds, its unit and the seed of its values."""
    return [
        ("OBJECT", "benchmark", f"synthetic {what} image"),
        ("BUNIT", "adu", "pixel unit"),
        ("SEED", seed, "numpy.random.default_rng seed"),
    ]


_FLOAT32_SEED = 20240601
_FLOAT32_CARDS = _image_cards("float32", _FLOAT32_SEED)
_UINT16_SEED = 20240602
_UINT16_CARDS = _image_cards("uint16", _UINT16_SEED)


def _write_image_f32(path: Path) -> None:
    rng = np.random.default_rng(_FLOAT32_SEED)
    # Sky level plus unit noise: realistic magnitudes, no NaN, every value exact in float32.
    data = rng.standard_normal((IMAGE_SIDE, IMAGE_SIDE), dtype=np.float32)
    data += np.float32(1000.0)
    _write_primary_image(path, data, _FLOAT32_CARDS)


def _write_image_u16(path: Path) -> None:
    rng = np.random.default_rng(_UINT16_SEED)
    # The full 0..65535 range, so both halves of the BZERO=32768 offset are exercised.
    data = rng.integers(0, 65536, size=(IMAGE_SIDE, IMAGE_SIDE), dtype=np.uint16)
    _write_primary_image(path, data, _UINT16_CARDS)


# Primary image cards: SIMPLE BITPIX NAXIS NAXIS1 NAXIS2 EXTEND + extras (+ BSCALE BZERO).
register(Dataset(
    name="image_f32",
    filename="image_4096_f32.fits",
    expected_size=hdu_size(6 + len(_FLOAT32_CARDS), IMAGE_SIDE * IMAGE_SIDE * 4),
    write=_write_image_f32,
    description="4096x4096 float32 primary image (BITPIX=-32), 64 MiB",
))
register(Dataset(
    name="image_u16",
    filename="image_4096_u16.fits",
    expected_size=hdu_size(8 + len(_UINT16_CARDS), IMAGE_SIDE * IMAGE_SIDE * 2),
    write=_write_image_u16,
    description="4096x4096 uint16 primary image (BITPIX=16, BZERO=32768), 32 MiB",
))


# ---------------------------------------------------------------------- many HDUs

MANY_HDUS = 100
MANY_HDU_SIDE = 32
# Cards added to every HDU on top of the mandatory ones (EXTNAME included); with those an
# HDU carries ~30 cards, typical of a detector extension.
MANY_HDU_EXTRA_CARDS = 22


def _many_hdu_cards(index: int, rng: np.random.Generator) -> list[tuple[str, object, str]]:
    """Deterministic, varied header cards for HDU ``index``: strings, ints, floats, bools."""
    cards: list[tuple[str, object, str]] = [
        ("EXTNAME", f"CCD{index:03d}", "extension name"),
        ("EXTVER", 1, "extension version"),
        ("DETECTOR", f"chip-{index % 8}", "detector name"),
        ("CCDSUM", "1 1", "binning"),
        ("GAIN", round(float(rng.uniform(1.0, 3.0)), 6), "[e-/adu] gain"),
        ("RDNOISE", round(float(rng.uniform(2.0, 9.0)), 6), "[e-] read noise"),
        ("SATURATE", int(rng.integers(40000, 65535)), "[adu] saturation level"),
        ("EXPTIME", 30.0, "[s] exposure time"),
        ("MJD-OBS", 60000.0 + index / 1440.0, "modified Julian date"),
        ("DATE-OBS", "2024-06-01T00:00:00.000", "start of exposure"),
        ("FILTER", "r", "filter name"),
        ("CTYPE1", "RA---TAN", "WCS projection"),
        ("CTYPE2", "DEC--TAN", "WCS projection"),
        ("CRPIX1", float(MANY_HDU_SIDE / 2 + 0.5), "reference pixel"),
        ("CRPIX2", float(MANY_HDU_SIDE / 2 + 0.5), "reference pixel"),
        ("CRVAL1", round(150.0 + index * 0.01, 8), "[deg] reference RA"),
        ("CRVAL2", round(2.0 + index * 0.01, 8), "[deg] reference Dec"),
        ("CD1_1", -7.305555555556e-05, "WCS matrix"),
        ("CD1_2", 0.0, "WCS matrix"),
        ("CD2_1", 0.0, "WCS matrix"),
        ("CD2_2", 7.305555555556e-05, "WCS matrix"),
        ("PHOTOMET", True, "photometric conditions"),
    ]
    # expected_size below counts on this many cards.
    assert len(cards) == MANY_HDU_EXTRA_CARDS
    return cards


def _write_many_hdus(path: Path) -> None:
    from astropy.io import fits

    rng = np.random.default_rng(20240603)
    hdus: list[fits.PrimaryHDU | fits.ImageHDU] = []
    for index in range(MANY_HDUS):
        data = rng.integers(0, 1000, size=(MANY_HDU_SIDE, MANY_HDU_SIDE), dtype=np.int16)
        hdu = fits.PrimaryHDU(data=data) if index == 0 else fits.ImageHDU(data=data)
        for key, value, comment in _many_hdu_cards(index, rng):
            hdu.header[key] = (value, comment)
        hdus.append(hdu)
    fits.HDUList(hdus).writeto(path, output_verify="exception")


# Primary: SIMPLE BITPIX NAXIS NAXIS1 NAXIS2 EXTEND (6); extension: XTENSION BITPIX NAXIS
# NAXIS1 NAXIS2 PCOUNT GCOUNT (7); each plus the extra cards.
_MANY_DATA = MANY_HDU_SIDE * MANY_HDU_SIDE * 2
register(Dataset(
    name="many_hdus",
    filename="many_hdus_100.fits",
    expected_size=(
        hdu_size(6 + MANY_HDU_EXTRA_CARDS, _MANY_DATA)
        + (MANY_HDUS - 1) * hdu_size(7 + MANY_HDU_EXTRA_CARDS, _MANY_DATA)
    ),
    write=_write_many_hdus,
    description=f"{MANY_HDUS} HDUs (primary + {MANY_HDUS - 1} IMAGE extensions), "
    f"{MANY_HDU_SIDE}x{MANY_HDU_SIDE} int16 each, ~30 cards and an EXTNAME per HDU",
))


# ------------------------------------------------------------------------ catalog

CATALOG_ROWS = 2_000_000
CATALOG_SEED = 20240604
CATALOG_CLASSES = ("STAR", "GALAXY", "QSO", "UNKNOWN", "BLEND", "SN_CAND", "ARTEFACT")
# name, FITS TFORM, NumPy dtype of the values: 12 columns, 59 bytes a row.
CATALOG_COLUMNS: list[tuple[str, str, str]] = [
    ("id", "K", "i8"),
    ("ra", "D", "f8"),
    ("dec", "D", "f8"),
    ("mag_u", "E", "f4"),
    ("mag_g", "E", "f4"),
    ("mag_r", "E", "f4"),
    ("mag_i", "E", "f4"),
    ("mag_z", "E", "f4"),
    ("flags", "J", "i4"),
    ("count", "I", "i2"),
    ("good", "L", "?"),
    ("kind", "8A", "S8"),
]
CATALOG_ROW_BYTES = sum(np.dtype(dt).itemsize for _, _, dt in CATALOG_COLUMNS)


def catalog_rows(nrows: int = CATALOG_ROWS, seed: int = CATALOG_SEED) -> np.ndarray:
    """The catalog's rows as a native-order structured array (the values the file holds).

    Sky positions are uniform on the sphere; magnitudes ~ N(20.5, 1.8) plus colour offsets
    and noise, so ``mag_r < 16`` keeps ~0.6% of the rows and ``ra BETWEEN 10 AND 100`` a
    quarter; ``kind`` strings have 3 to 8 characters (short ones exercise blank stripping);
    ``good`` is T for ~90% of the rows, F otherwise (no nulls).
    """
    rng = np.random.default_rng(seed)
    rows = np.empty(nrows, dtype=[(n, dt) for n, _, dt in CATALOG_COLUMNS])
    rows["id"] = np.arange(nrows, dtype=np.int64) * 7 + 1_000_000_000_000
    rows["ra"] = rng.uniform(0.0, 360.0, nrows)
    rows["dec"] = np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, nrows)))
    base = rng.normal(20.5, 1.8, nrows).astype(np.float32)
    for name, offset in (("mag_u", 1.6), ("mag_g", 0.6), ("mag_r", 0.0), ("mag_i", -0.3), ("mag_z", -0.5)):
        rows[name] = base + np.float32(offset) + rng.normal(0.0, 0.15, nrows).astype(np.float32)
    rows["flags"] = (rng.integers(0, 1 << 20, nrows, dtype=np.int32)
                     & rng.integers(0, 1 << 20, nrows, dtype=np.int32))
    rows["count"] = rng.integers(-32768, 32768, nrows, dtype=np.int16)
    rows["good"] = rng.random(nrows) < 0.9
    classes = np.array(CATALOG_CLASSES, dtype="S8")
    rows["kind"] = classes[rng.integers(0, len(classes), nrows)]
    return rows


def _write_catalog_rows(path: Path, rows: np.ndarray, seed: int) -> None:
    import fitsio

    fitsio.write(str(path), rows, extname="CATALOG", clobber=True,
                 header=[{"name": "SEED", "value": seed, "comment": "numpy.random.default_rng seed"}])


def _write_catalog(path: Path) -> None:
    _write_catalog_rows(path, catalog_rows(), CATALOG_SEED)


# fitsio's empty primary: SIMPLE BITPIX NAXIS EXTEND + 2 COMMENT cards (6). Extension:
# XTENSION BITPIX NAXIS NAXIS1 NAXIS2 PCOUNT GCOUNT TFIELDS (8) + TTYPEn/TFORMn (24) + EXTNAME SEED.
CATALOG_FILE_SIZE = (hdu_size(6, 0)
                     + hdu_size(8 + 2 * len(CATALOG_COLUMNS) + 2, CATALOG_ROWS * CATALOG_ROW_BYTES))

register(Dataset(
    name="catalog_2m",
    filename="catalog_2m.fits",
    expected_size=CATALOG_FILE_SIZE,
    write=_write_catalog,
    description=f"{CATALOG_ROWS:,}-row BINTABLE 'CATALOG', 12 columns (K, 2D, 5E, J, I, L, 8A), "
    f"{CATALOG_ROW_BYTES} B/row, {CATALOG_ROWS * CATALOG_ROW_BYTES / 2**20:.0f} MiB",
))


def catalog_uniform_rows(nrows: int = CATALOG_ROWS, seed: int = CATALOG_SEED + 1) -> np.ndarray:
    """`catalog_rows` with ``ra`` uniform in 0–360 and the five magnitudes uniform in 14–26, so
    a predicate's literals set the fraction of rows it keeps (``benchmarks/run_query.py``)."""
    rows = catalog_rows(nrows, seed)
    rng = np.random.default_rng(seed + 1)
    rows["ra"] = rng.uniform(0.0, 360.0, nrows)
    for name in ("mag_u", "mag_g", "mag_r", "mag_i", "mag_z"):
        rows[name] = rng.uniform(14.0, 26.0, nrows).astype(np.float32)
    return rows


def _write_catalog_uniform(path: Path) -> None:
    _write_catalog_rows(path, catalog_uniform_rows(), CATALOG_SEED + 1)


register(Dataset(
    name="catalog_uniform",
    filename="catalog_uniform_2m.fits",
    expected_size=CATALOG_FILE_SIZE,
    write=_write_catalog_uniform,
    description=f"catalog_2m's columns with ra uniform in 0-360 and magnitudes uniform in 14-26, "
    f"{CATALOG_ROWS:,} rows",
))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: build (or list) registered data sets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="data sets to build (default: all)")
    parser.add_argument("--force", action="store_true", help="rewrite files that look complete")
    parser.add_argument("--list", action="store_true", help="list registered data sets and exit")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    if args.list:
        for dataset in DATASETS.values():
            print(f"{dataset.name:12s} {dataset.filename:24s} {dataset.expected_size:>12d}  "
                  f"{dataset.description}")
        return 0
    unknown = [n for n in args.names if n not in DATASETS]
    if unknown:
        parser.error(f"unknown data set(s): {', '.join(unknown)}; known: {', '.join(DATASETS)}")
    ensure_all(args.names or None, args.data_dir, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
