"""torchfits.zarr: the numcodecs/zarr codecs of FITS tiles round-trip through zarr 3 arrays
(formats 2 and 3), and kerchunk references / VirtualiZarr manifests of plain and tile-compressed
images read equal to `torchfits.read_numpy`, through xarray's kerchunk engine and through
fsspec's ``reference://`` + zarr, from local files and over HTTP."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import tomllib

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")
fsspec = pytest.importorskip("fsspec")
xr = pytest.importorskip("xarray")
pytest.importorskip("kerchunk")
fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
import torchfits.zarr as tz  # noqa: E402
from torchfits.fits.hdu_index import get_index  # noqa: E402
from torchfits.image.compressed import CompressedImage  # noqa: E402
from torchfits.zarr import fits_codecs as zc  # noqa: E402
from torchfits.zarr import zarr3 as z3  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(27)
TILE_CODECS = [zc.FitsRice1, zc.FitsGzip1, zc.FitsGzip2, zc.FitsHcompress1, zc.FitsPlio1]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # astropy's and zarr's notes on non-standard codecs
        yield


def _ints(dtype, shape=(37, 50), nonneg=False):
    info = np.iinfo(dtype)
    lo = 0 if nonneg else max(info.min, -30000)
    return RNG.integers(lo, min(info.max, 30000), shape, endpoint=True).astype(dtype)


# -- registration ---------------------------------------------------------------------------------
def test_entry_points_name_the_codecs():
    # The venv's editable install predates these entry points: check the declaration and
    # resolve each one by hand, as importlib.metadata would.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = project["entry-points"]
    assert set(groups["numcodecs.codecs"]) == {c.codec_id for c in TILE_CODECS} | {"fits_scale"}
    for name, target in groups["numcodecs.codecs"].items():
        module, attr = target.split(":")
        cls = getattr(__import__(module, fromlist=[attr]), attr)
        assert cls.codec_id == name
        assert isinstance(numcodecs.get_codec({"id": name}), cls)  # registered by the import
    for name, target in groups["zarr.codecs"].items():
        module, attr = target.split(":")
        cls = getattr(__import__(module, fromlist=[attr]), attr)
        assert cls.codec_name == name == f"numcodecs.{cls.numcodec.codec_id}"
        assert zarr.registry.get_codec_class(name) is cls
    for extra in ("zarr", "test"):
        assert any(req.startswith("numcodecs") for req in project["optional-dependencies"][extra])


def test_codec_config_round_trips_through_json():
    codec = zc.FitsRice1(bitpix=16, tile=[8, 16], blocksize=16, bytepix=2, clipped=[[5, 16]])
    config = json.loads(json.dumps(codec.get_config()))
    again = numcodecs.get_codec(config)
    assert again.get_config() == codec.get_config() and again == codec
    scale = zc.FitsScale(bitpix=16, bscale=0.5, bzero=3.0, blank=-1, dtype="float32")
    assert numcodecs.get_codec(json.loads(json.dumps(scale.get_config()))) == scale


# -- codecs through zarr 3 arrays -----------------------------------------------------------------
def _tile_config(cls, bitpix):
    config = {"bitpix": bitpix, "tile": [8, 16]}
    if cls is zc.FitsRice1:
        config["bytepix"] = abs(bitpix) // 8
    return config


@pytest.mark.parametrize("cls", TILE_CODECS, ids=lambda c: c.codec_id)
@pytest.mark.parametrize("dtype,bitpix", [(np.uint8, 8), (np.int16, 16), (np.int32, 32)])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_tile_codec_round_trips_through_zarr(cls, dtype, bitpix, zarr_format):
    data = _ints(dtype, nonneg=cls is zc.FitsPlio1)  # 37 x 50: edge chunks on both axes
    config = _tile_config(cls, bitpix)
    if zarr_format == 2:  # format 2 chunks hold FITS's big-endian pixels
        arr = zarr.create_array(store={}, shape=data.shape, chunks=(8, 16),
                                dtype=np.dtype(dtype).newbyteorder(">"), compressors=cls(**config),
                                filters=None, zarr_format=2)
    else:  # format 3: the codec is the array's serializer
        v3 = z3.CODECS_V3[cls.zcmptype]
        arr = zarr.create_array(store={}, shape=data.shape, chunks=(8, 16), dtype=dtype,
                                serializer=v3(configuration=config), compressors=None)
    arr[:] = data
    np.testing.assert_array_equal(arr[:], data)
    np.testing.assert_array_equal(arr[3:30, 5:41], data[3:30, 5:41])


@pytest.mark.parametrize("cls", [zc.FitsGzip1, zc.FitsGzip2], ids=lambda c: c.codec_id)
def test_gzip_codecs_round_trip_floats(cls):
    data = RNG.normal(size=(37, 50)).astype(np.float32)
    serializer = z3.CODECS_V3[cls.zcmptype](configuration={"bitpix": -32, "tile": [8, 16]})
    arr = zarr.create_array(store={}, shape=data.shape, chunks=(8, 16), dtype=np.float32,
                            serializer=serializer, compressors=None)
    arr[:] = data
    np.testing.assert_array_equal(arr[:], data)


@pytest.mark.parametrize("bitpix,bscale,bzero,blank,dtype", [
    (16, 0.5, 10.0, -32768, "float32"), (32, 1e-3, -7.0, None, "float64"),
    (16, 1.0, 32768.0, None, "uint16"), (8, 1.0, -128.0, None, "int8"), (32, 1.0, 2.0**31, None, "uint32")])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_scale_filter_round_trips(bitpix, bscale, bzero, blank, dtype, zarr_format):
    stored = _ints(zc.storage_dtype(bitpix).newbyteorder("="))
    config = {"bitpix": bitpix, "bscale": bscale, "bzero": bzero, "blank": blank, "dtype": dtype}
    if blank is not None:
        stored[0, :3] = blank
    physical = zc.FitsScale(**config).decode(stored.astype(zc.storage_dtype(bitpix))).reshape(stored.shape)
    if blank is not None:
        assert np.isnan(physical[0, :3]).all() and not np.isnan(physical[1:]).any()
    expect = stored.astype(np.float64) * bscale + bzero
    if np.dtype(dtype).kind == "f":
        np.testing.assert_array_equal(physical, np.where(stored == blank, np.nan, expect).astype(dtype))
    else:
        np.testing.assert_array_equal(physical.astype(np.float64), expect)
    tile = {"bitpix": bitpix, "tile": [8, 16], "bytepix": abs(bitpix) // 8}
    if zarr_format == 2:
        arr = zarr.create_array(store={}, shape=stored.shape, chunks=(8, 16), dtype=np.dtype(dtype),
                                filters=[zc.FitsScale(**config)], compressors=zc.FitsRice1(**tile),
                                zarr_format=2)
    else:
        arr = zarr.create_array(store={}, shape=stored.shape, chunks=(8, 16), dtype=dtype,
                                filters=[z3.FitsScaleV3(configuration=config)],
                                serializer=z3.FitsRice1V3(configuration=tile), compressors=None)
    arr[:] = physical
    np.testing.assert_array_equal(arr[:], physical)


def test_quantised_codec_refuses_to_encode():
    codec = zc.FitsRice1(bitpix=-32, tile=[4], image=[4], tiles={}, quantize={"zscale": 1.0})
    with pytest.raises(torchfits.errors.CodecError, match="read-only"):
        codec.encode(np.zeros(4, np.float32))
    with pytest.raises(torchfits.errors.CodecError, match="none of the tiles"):
        codec.decode(b"\x00\x01")


# -- references -----------------------------------------------------------------------------------
def _zarr_read(refs, **options):
    """The referenced array read by zarr through fsspec's reference:// file system."""
    fs = fsspec.filesystem("reference", fo=refs, asynchronous=True, **options)
    store = zarr.storage.FsspecStore(fs, read_only=True)
    return zarr.open_array(store, path=_name(refs), zarr_format=2, mode="r")[...]


def _xarray_read(refs, **options):
    ds = xr.open_dataset(refs, engine="kerchunk", storage_options=options)
    (name,) = list(ds.data_vars)
    return ds[name].values


def _check(path, hdu=None, chunk_bytes=tz.DEFAULT_CHUNK_BYTES):
    want = torchfits.read_numpy(path, hdu=hdu)
    refs = tz.references(path, hdu, chunk_bytes=chunk_bytes)
    for got in (_zarr_read(refs), _xarray_read(refs)):
        assert got.dtype.newbyteorder("=") == want.dtype  # unfiltered chunks stay big-endian
        np.testing.assert_array_equal(got, want)
    return refs


PLAIN = {
    "int16": _ints(np.int16, (61, 40)),
    "uint8": _ints(np.uint8, (61, 40)),
    "uint16": _ints(np.uint16, (61, 40), nonneg=True) * 2,
    "int32_3d": _ints(np.int32, (3, 61, 40)),
    "float32": RNG.normal(size=(61, 40)).astype(np.float32),
    "float64": RNG.normal(size=(7, 61)).astype(np.float64),
}


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_plain_image_references(tmp_path, name):
    path = tmp_path / f"{name}.fits"
    torchfits.write(str(path), PLAIN[name])
    refs = _check(str(path), chunk_bytes=1000)  # several row blocks and a short last one
    zarray = json.loads(refs["refs"]["PRIMARY/.zarray"])
    assert zarray["compressor"] is None and zarray["chunks"][1:] == list(PLAIN[name].shape[1:])
    assert len([k for k in refs["refs"] if not k.split("/")[-1].startswith(".")]) > 1


def test_plain_scaled_image_with_blank(tmp_path):
    ints = _ints(np.int16, (61, 40))
    ints[3, :5] = -32768
    hdu = fits.ImageHDU(ints, name="SCALED")
    hdu.header.update(BSCALE=0.1, BZERO=5.0, BLANK=-32768)
    path = str(tmp_path / "scaled.fits")
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    refs = _check(path, "SCALED")
    assert json.loads(refs["refs"]["SCALED/.zarray"])["filters"][0]["id"] == "fits_scale"
    assert json.loads(refs["refs"]["SCALED/.zattrs"])["BSCALE"] == 0.1
    assert np.isnan(_zarr_read(refs)[3, :5]).all()


def test_last_row_block_stays_inside_the_file(tmp_path):
    # 1 x 997 rows of 4 bytes: no padding room for a longer last block
    data = _ints(np.int32, (997, 720))
    path = str(tmp_path / "tight.fits")
    torchfits.write(path, data)
    refs = _check(path, chunk_bytes=720 * 4 * 100)
    size = Path(path).stat().st_size
    assert all(v[1] + v[2] <= size for k, v in refs["refs"].items() if not k.split("/")[-1].startswith("."))


def _compressed(tmp_path, name, data, **kw):
    path = str(tmp_path / f"{name}.fits")
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(data, **kw)]).writeto(path)
    return path


COMPRESSED = [
    # (name, data, astropy options): edge tiles as prefixes, odd edge tiles, lossless floats
    ("rice_i16_rows", _ints(np.int16), {"compression_type": "RICE_1"}),
    ("rice_i32_blocks", _ints(np.int32), {"compression_type": "RICE_1", "tile_shape": (8, 50)}),
    ("rice_u8_squares", _ints(np.uint8), {"compression_type": "RICE_1", "tile_shape": (8, 16)}),
    ("gzip1_i16_squares", _ints(np.int16), {"compression_type": "GZIP_1", "tile_shape": (8, 16)}),
    ("gzip2_i32_rows", _ints(np.int32), {"compression_type": "GZIP_2"}),
    ("gzip1_f32_lossless", RNG.normal(size=(37, 50)).astype(np.float32),
     {"compression_type": "GZIP_1", "quantize_level": 0.0, "tile_shape": (8, 16)}),
    ("gzip2_f64_lossless", RNG.normal(size=(37, 50)), {"compression_type": "GZIP_2", "quantize_level": 0.0}),
    ("hcompress_i16", _ints(np.int16), {"compression_type": "HCOMPRESS_1"}),
    ("hcompress_i32_squares", _ints(np.int32), {"compression_type": "HCOMPRESS_1", "tile_shape": (8, 20)}),
    # (astropy's PLIO writer corrupts its heap on large values: small masks only)
    ("plio_i16", _ints(np.int16, nonneg=True) % 1000, {"compression_type": "PLIO_1", "tile_shape": (8, 16)}),
    ("rice_u16", _ints(np.uint16, nonneg=True), {"compression_type": "RICE_1"}),
    ("rice_cube", _ints(np.int16, (3, 9, 20)), {"compression_type": "RICE_1", "tile_shape": (2, 4, 20)}),
]


@pytest.mark.parametrize("name,data,kw", COMPRESSED, ids=[c[0] for c in COMPRESSED])
def test_compressed_image_references(tmp_path, name, data, kw):
    path = _compressed(tmp_path, name, data, **kw)
    refs = _check(path)
    zarray = json.loads(refs["refs"][f"{_name(refs)}/.zarray"])
    layout = CompressedImage(path, 1).layout
    assert zarray["chunks"] == list(layout.tile)
    assert len([k for k in refs["refs"] if not k.split("/")[-1].startswith(".")]) == layout.ntiles


def _name(refs):
    (name,) = [k[:-len("/.zarray")] for k in refs["refs"] if k.endswith("/.zarray")]
    return name


def test_compressed_scaled_image(tmp_path, fitsio):
    # BSCALE/BZERO of a compressed image: one rounding of the double-precision value, as CFITSIO
    path = _compressed(tmp_path, "scaled", _ints(np.int16, (64, 64)), compression_type="RICE_1")
    with fits.open(path, mode="update", disable_image_compression=True) as hdus:
        hdus[1].header["BSCALE"] = 0.1
        hdus[1].header["BZERO"] = 5.0
    np.testing.assert_array_equal(torchfits.read_numpy(path), fitsio.read(path, ext=1))
    refs = _check(path)
    assert json.loads(refs["refs"][f"{_name(refs)}/.zarray"])["filters"][0]["bscale"] == 0.1


def test_plio_int32_written_by_torchfits(tmp_path):
    path = str(tmp_path / "mask.fits")
    torchfits.write(path, _ints(np.int32, nonneg=True) * 300, compress="PLIO_1")
    _check(path)


@pytest.mark.parametrize("codec", ["RICE_1", "GZIP_2", "HCOMPRESS_1"])
@pytest.mark.parametrize("method", [-1, 1, 2])  # no dither, SUBTRACTIVE_DITHER_1 and _2
def test_quantised_float_references(tmp_path, codec, method):
    data = RNG.normal(size=(37, 50)).astype(np.float32)
    data[5, 3] = np.nan
    data[20:24, 30:34] = 0.0
    path = _compressed(tmp_path, f"q{codec}{method}", data, compression_type=codec, quantize_method=method,
                       tile_shape=(8, 20) if codec == "HCOMPRESS_1" else (8, 16))
    refs = _check(path)
    compressor = json.loads(refs["refs"][f"{_name(refs)}/.zarray"])["compressor"]
    assert len(compressor["tiles"]) == CompressedImage(path, 1).layout.ntiles
    assert len(compressor["quantize"]["zscale"]) == len(compressor["tiles"])


def test_constant_tiles_stored_losslessly(tmp_path):
    # Constant tiles cannot be quantised: they go to GZIP_COMPRESSED_DATA with equal bytes.
    data = RNG.normal(size=(32, 32)).astype(np.float32)
    data[:16] = 3.0
    path = _compressed(tmp_path, "const", data, compression_type="RICE_1", tile_shape=(4, 32))
    refs = _check(path)
    compressor = json.loads(refs["refs"][f"{_name(refs)}/.zarray"])["compressor"]
    assert compressor["quantize"]["gzip"] == [0, 1, 2, 3]
    assert len(compressor["tiles"]) == 5  # the four constant tiles share one fingerprint


def test_tiles_with_shared_bytes_and_other_pixels_are_refused(tmp_path):
    data = RNG.normal(size=(32, 32)).astype(np.float32)
    path = _compressed(tmp_path, "dup", data, compression_type="RICE_1", quantize_method=1,
                       tile_shape=(8, 32))
    entry = get_index(path).resolve(1)
    layout = CompressedImage(path, 1).layout
    raw = bytearray(Path(path).read_bytes())
    col = layout.columns["COMPRESSED_DATA"].offset
    row0 = entry.data_offset + col
    row1 = entry.data_offset + layout.row_bytes + col
    raw[row1:row1 + 8] = raw[row0:row0 + 8]  # tile 1 points at tile 0's bytes
    bad = tmp_path / "dup_patched.fits"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="same compressed bytes but decode to different pixels"):
        tz.references(str(bad))


def test_unsupported_images_are_refused(tmp_path):
    path = str(tmp_path / "bz.fits")
    torchfits.write(path, _ints(np.int16), compress="BZIP2_1")
    with pytest.raises(ValueError, match="BZIP2_1 tiles have no zarr codec"):
        tz.references(path)
    table = str(tmp_path / "t.fits")
    torchfits.write(table, {"a": np.arange(3)})
    with pytest.raises(ValueError, match="is a table"):
        tz.references(table, 1)


def test_references_point_where_asked(tmp_path):
    path = str(tmp_path / "a.fits")
    torchfits.write(path, _ints(np.int16))
    refs = tz.references(path, url="s3://bucket/a.fits", name="img")
    assert refs["refs"]["img/0.0"][0] == "s3://bucket/a.fits"
    assert json.loads(refs["refs"]["img/.zattrs"])["_ARRAY_DIMENSIONS"] == ["y", "x"]


# -- over HTTP --------------------------------------------------------------------------------------
def test_references_over_http(tmp_path, isolated_remote):
    pytest.importorskip("aiohttp")
    from _http_server import FileServer

    plain = _ints(np.uint16, (61, 40), nonneg=True)
    torchfits.write(str(tmp_path / "plain.fits"), plain)
    quant = RNG.normal(size=(37, 50)).astype(np.float32)
    _compressed(tmp_path, "quant", quant, compression_type="RICE_1", tile_shape=(8, 16))
    _compressed(tmp_path, "hc", _ints(np.int16), compression_type="HCOMPRESS_1")
    with FileServer(str(tmp_path)) as srv:
        for name, hdu in (("plain", None), ("quant", 1), ("hc", 1)):
            url = f"{srv.url}/{name}.fits"
            want = torchfits.read_numpy(str(tmp_path / f"{name}.fits"), hdu=hdu)
            refs = tz.references(url, hdu, chunk_bytes=1000, storage_options={"allow_private_hosts": True})
            assert all(v[0] == url for k, v in refs["refs"].items() if isinstance(v, list))
            np.testing.assert_array_equal(
                _zarr_read(refs, remote_protocol="http", remote_options={"asynchronous": True}), want)
            np.testing.assert_array_equal(_xarray_read(refs, remote_protocol="http"), want)


# -- VirtualiZarr ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["uint16", "float32", "quant", "gzip2"])
def test_virtualizarr_manifest_reads_equal(tmp_path, name):
    vz = pytest.importorskip("virtualizarr.manifests")
    registry = pytest.importorskip("obspec_utils.registry")
    local = pytest.importorskip("obstore.store")
    if name in PLAIN:
        path = str(tmp_path / f"{name}.fits")
        torchfits.write(path, PLAIN[name])
    elif name == "quant":
        path = _compressed(tmp_path, name, RNG.normal(size=(37, 50)).astype(np.float32),
                           compression_type="RICE_1", tile_shape=(8, 16))
    else:
        path = _compressed(tmp_path, name, _ints(np.uint16, nonneg=True), compression_type="GZIP_2")
    group = tz.manifest_group(path, chunk_bytes=1000)
    store = vz.ManifestStore(group, registry=registry.ObjectStoreRegistry({"file://": local.LocalStore()}))
    ds = xr.open_zarr(store, zarr_format=3, consolidated=False)
    (var,) = list(ds.data_vars)
    want = torchfits.read_numpy(path)
    got = ds[var].values
    assert got.dtype.newbyteorder("=") == want.dtype
    np.testing.assert_array_equal(got, want)
