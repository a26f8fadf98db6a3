"""torchfits.transforms against astropy.visualization and astropy.stats as oracles, plus inverse
round trips, batched == per-item, dtypes, NaN/mask handling, payloads and bad parameters.

Tolerances: float64 inputs are compared to astropy's float64 results at rtol 1e-10 (the
formulas are the same; only evaluation order differs). float32 inputs are computed in float32
and compared to the float64 oracle at rtol 2e-6 (a few float32 ulps). The zscale line fit runs
in float64 in both, so its limits agree to 1e-9 relative.
"""
from __future__ import annotations

import pickle
import threading
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
viz = pytest.importorskip("astropy.visualization")
astats = pytest.importorskip("astropy.stats")

import torchfits  # noqa: E402
from torchfits import transforms as T  # noqa: E402
from torchfits.errors import FitsError, TransformError, TransformInverseError  # noqa: E402


def sky(shape, seed=0, stars=True, dtype=np.float64):
    """Noise around a pedestal with a few bright 'stars' and some negative outliers."""
    rng = np.random.default_rng(seed)
    a = 100.0 + rng.normal(0, 5, size=shape)
    if stars:
        flat = a.reshape(-1, shape[-2] * shape[-1])
        for row in flat:
            idx = rng.choice(row.size, size=max(2, row.size // 50), replace=False)
            row[idx] += rng.uniform(50, 5000, size=idx.size)
            row[rng.choice(row.size, 2, replace=False)] -= 80
    return a.astype(dtype)


def t_(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def close(actual, expected, rtol, atol=0.0, what=""):
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=rtol,
                               atol=atol, equal_nan=True, err_msg=what)


# ----------------------------------------------------------------------------------------
# stretches vs astropy
# ----------------------------------------------------------------------------------------

X_STRETCH = np.linspace(0.0, 1.0, 201)


@pytest.mark.parametrize("a", [0.05, 1.0, 10.0])
def test_arcsinh_matches_astropy(a):
    expected = viz.AsinhStretch(a=1.0 / a)(X_STRETCH, clip=False)
    close(T.ArcsinhStretch(a)(t_(X_STRETCH)), expected, 1e-10, 1e-15)
    close(T.ArcsinhStretch(a)(t_(X_STRETCH.astype(np.float32))), expected, 2e-6, 1e-7)
    # odd function: negative input stays negative
    assert float(T.ArcsinhStretch(a)(torch.tensor([-0.5]))) < 0


@pytest.mark.parametrize("a", [10.0, 1000.0])
def test_log_matches_astropy(a):
    expected = viz.LogStretch(a=a)(X_STRETCH, clip=False)
    close(T.LogStretch(a)(t_(X_STRETCH)), expected, 1e-10, 1e-15)
    close(T.LogStretch(a)(t_(X_STRETCH.astype(np.float32))), expected, 2e-6, 1e-7)


def test_sqrt_matches_astropy():
    close(T.SqrtStretch()(t_(X_STRETCH)), viz.SqrtStretch()(X_STRETCH, clip=False), 1e-12)


@pytest.mark.parametrize("stretch", [T.ArcsinhStretch(3.0), T.LogStretch(100.0), T.SqrtStretch()])
def test_stretch_inverse_round_trip(stretch):
    x = torch.linspace(0, 50, 101, dtype=torch.float64)
    torch.testing.assert_close(stretch.inverse(stretch(x)), x, rtol=1e-10, atol=1e-10)
    x32 = x.float()
    torch.testing.assert_close(stretch.inverse(stretch(x32)), x32, rtol=2e-5, atol=2e-5)


def test_stretch_clamps_negatives():
    x = torch.tensor([-3.0, 0.0, 4.0])
    assert T.SqrtStretch()(x).tolist() == [0.0, 0.0, 2.0]
    assert T.LogStretch()(x)[0] == 0
    assert T.LogStretch().inverse(T.LogStretch()(x))[0] == 0


def test_safe_helpers():
    x = torch.tensor([0.0, -1.0, 1.0, float("nan")], dtype=torch.float16)
    y = T.safe_log(x)
    assert y.dtype == torch.float16
    assert torch.isfinite(y[:3]).all() and torch.isnan(y[3])
    assert float(y[1]) == pytest.approx(np.log(1e-9), rel=1e-3)  # floored, not NaN
    assert float(T.safe_log(torch.tensor([0.0]), eps=1e-3)) == pytest.approx(np.log(1e-3))
    assert T.safe_log(torch.tensor([5], dtype=torch.int16)).dtype == torch.float32
    # float16 would overflow in scale * x; computed in float32, cast back
    big = torch.tensor([60000.0], dtype=torch.float16)
    assert float(T.safe_arcsinh(big, 100.0)) == pytest.approx(np.arcsinh(6e6), rel=1e-3)
    close(T.safe_arcsinh(t_(X_STRETCH), 2.0), np.arcsinh(2 * X_STRETCH), 1e-12)
    with pytest.raises(TransformError):
        T.safe_log(x, eps=0)


# ----------------------------------------------------------------------------------------
# robust statistics and zscale
# ----------------------------------------------------------------------------------------

def test_estimate_background_matches_numpy_and_astropy():
    a = sky((3, 2, 41, 37), seed=1)
    a[0, 0, 3, 4] = np.nan
    med, sig = T.estimate_background(t_(a))
    assert med.shape == (3, 2, 1, 1)
    close(med, np.nanmedian(a, axis=(-2, -1), keepdims=True), 1e-12)
    close(sig, astats.mad_std(a, axis=(-2, -1), ignore_nan=True)[..., None, None], 1e-12)
    # even counts interpolate (numpy), they do not take the lower median (torch.median)
    med2, _ = T.estimate_background(torch.tensor([[1.0, 2.0], [3.0, 10.0]]))
    assert float(med2) == 2.5


@pytest.mark.parametrize("shape,seed", [((50, 60), 0), ((300, 257), 1), ((7, 3), 2), ((2, 2), 3)])
def test_zscale_iraf_matches_astropy(shape, seed):
    a = sky(shape, seed=seed)
    if a.size > 20:
        a.flat[::97] = np.nan
    lo, hi = viz.ZScaleInterval().get_limits(a)
    z1, z2 = T.zscale_limits(t_(a), algorithm="iraf")
    close(z1, lo, 1e-9, what="z1")
    close(z2, hi, 1e-9, what="z2")


def test_zscale_iraf_float32_and_contrast_and_samples():
    a = sky((120, 90), seed=4).astype(np.float32)
    for kwargs in ({}, {"contrast": 0.5}, {"n_samples": 300}, {"contrast": 0.0}):
        zi = viz.ZScaleInterval(**kwargs)
        lo, hi = zi.get_limits(a)
        z1, z2 = T.zscale_limits(t_(a), algorithm="iraf", **kwargs)
        assert z1.dtype == torch.float32
        close(z1, lo, 1e-6, 1e-4, what=str(kwargs))
        close(z2, hi, 1e-6, 1e-4, what=str(kwargs))


def test_zscale_batched_equals_per_item_and_masks():
    a = sky((4, 3, 40, 33), seed=5)
    x = t_(a)
    mask = torch.rand(x.shape, generator=torch.Generator().manual_seed(0)) > 0.1
    for algorithm in ("proxy", "iraf"):
        z1, z2 = T.zscale_limits(x, algorithm=algorithm, mask=mask)
        for b in range(4):
            for c in range(3):
                w1, w2 = T.zscale_limits(x[b, c], algorithm=algorithm, mask=mask[b, c])
                torch.testing.assert_close(z1[b, c], w1, rtol=1e-12, atol=0)
                torch.testing.assert_close(z2[b, c], w2, rtol=1e-12, atol=0)
        # a masked pixel counts exactly like a NaN pixel
        xn = torch.where(mask, x, torch.nan)
        n1, n2 = T.zscale_limits(xn, algorithm=algorithm)
        torch.testing.assert_close(n1, z1)
        torch.testing.assert_close(n2, z2)
    # iraf with masks agrees with astropy on the valid values
    lo, hi = viz.ZScaleInterval().get_limits(a[1, 2][mask[1, 2].numpy()])
    z1, z2 = T.zscale_limits(x[1, 2], algorithm="iraf", mask=mask[1, 2])
    close(z1, lo, 1e-9)
    close(z2, hi, 1e-9)


def test_zscale_proxy_definition():
    a = sky((64, 64), seed=6)
    med = np.median(a)
    sig = astats.mad_std(a)
    z1, z2 = T.zscale_limits(t_(a), contrast=0.25)
    close(z1, max(med - sig / 0.25, a.min()), 1e-12)
    close(z2, min(med + sig / 0.25, a.max()), 1e-12)


def test_zscale_degenerate_groups():
    const = torch.full((8, 8), 7.0)
    for algorithm in ("proxy", "iraf"):
        z1, z2 = T.zscale_limits(const, algorithm=algorithm)
        assert float(z1) == 7.0 and float(z2) > 7.0
        e1, e2 = T.zscale_limits(torch.full((5, 5), float("nan")), algorithm=algorithm)
        assert torch.isnan(e1).all() and torch.isnan(e2).all()
    out = T.ZScaleNormalize()(const)
    assert torch.equal(out, torch.zeros_like(out))


# ----------------------------------------------------------------------------------------
# normalizations
# ----------------------------------------------------------------------------------------

def test_zscale_normalize_matches_astropy_interval():
    a = sky((2, 70, 80), seed=7)
    y = T.ZScaleNormalize(algorithm="iraf")(t_(a))
    for i in range(2):
        lo, hi = viz.ZScaleInterval().get_limits(a[i])
        close(y[i], (a[i] - lo) / (hi - lo), 1e-9, 1e-12)  # 1x.: no clipping to [0, 1]
    assert float(y.max()) > 1


@pytest.mark.parametrize("lo,hi", [(1.0, 99.0), (0.5, 99.5), (10.0, 90.0), (0.0, 100.0)])
def test_percentile_clip_matches_astropy(lo, hi):
    a = sky((2, 45, 52), seed=8)
    a[0, 1, 1] = np.nan
    y = T.PercentileClipNormalize(lo, hi)(t_(a))
    for i in range(2):
        vmin, vmax = viz.AsymmetricPercentileInterval(lo, hi).get_limits(a[i])
        expected = np.clip((a[i] - vmin) / (vmax - vmin), 0, 1)
        close(y[i], expected, 1e-10, 1e-14)


def test_minmax_matches_astropy():
    a = sky((3, 20, 21), seed=9)
    y = T.MinMaxNormalize()(t_(a))
    for i in range(3):
        vmin, vmax = viz.MinMaxInterval().get_limits(a[i])
        close(y[i], (a[i] - vmin) / (vmax - vmin), 1e-12, 1e-15)
    const = T.MinMaxNormalize()(torch.full((3, 3), 5.0))
    assert torch.equal(const, torch.zeros(3, 3))


def test_robust_and_background():
    a = sky((2, 31, 30), seed=10)
    med = np.median(a, axis=(-2, -1), keepdims=True)
    sig = astats.mad_std(a, axis=(-2, -1))[:, None, None]
    close(T.RobustNormalize()(t_(a)), (a - med) / sig, 1e-10, 1e-12)
    close(T.BackgroundSubtract()(t_(a)), a - med, 1e-12, 1e-12)


@pytest.mark.parametrize("stat", ["median", "max", "mean", "rms"])
def test_global_scalar_norm(stat):
    a = sky((2, 3, 10, 12), seed=11)
    ref = {"median": np.median(a), "max": a.max(), "mean": a.mean(),
           "rms": np.sqrt((a * a).mean())}[stat]
    close(T.GlobalScalarNorm(stat)(t_(a)), a / ref, 1e-12)
    per_image = T.GlobalScalarNorm(stat, dim=(-2, -1))(t_(a))
    ref12 = {"median": np.median(a[1, 2]), "max": a[1, 2].max(), "mean": a[1, 2].mean(),
             "rms": np.sqrt((a[1, 2] ** 2).mean())}[stat]
    close(per_image[1, 2], a[1, 2] / ref12, 1e-12)
    neg = T.GlobalScalarNorm("max")(torch.tensor([-4.0, -2.0]))
    assert neg.tolist() == [2.0, 1.0]  # a negative statistic keeps its sign


NORMALIZERS = [
    lambda: T.ZScaleNormalize(), lambda: T.ZScaleNormalize(algorithm="iraf", contrast=0.1),
    lambda: T.RobustNormalize(), lambda: T.BackgroundSubtract(), lambda: T.MinMaxNormalize(),
    lambda: T.GlobalScalarNorm(), lambda: T.GlobalScalarNorm("rms", dim=(-2, -1)),
    lambda: T.PercentileClipNormalize(0.0, 100.0),
]


@pytest.mark.parametrize("make", NORMALIZERS)
def test_normalizer_inverse_round_trip(make):
    t = make()
    x = t_(sky((2, 3, 24, 20), seed=12))
    torch.testing.assert_close(t.inverse(t(x)), x, rtol=1e-12, atol=1e-9)
    x32 = x.float()
    torch.testing.assert_close(t.inverse(t(x32)), x32, rtol=1e-5, atol=1e-3)


def test_percentile_inverse_is_approximate():
    t = T.PercentileClipNormalize(5, 95)
    x = t_(sky((30, 30), seed=13))
    back = t.inverse(t(x))
    lo, hi = np.percentile(x.numpy(), [5, 95])
    close(back, np.clip(x.numpy(), lo, hi), 1e-10, 1e-9)


ALL_IMAGE_TRANSFORMS = NORMALIZERS + [
    lambda: T.ArcsinhStretch(0.1), lambda: T.LogStretch(), lambda: T.SqrtStretch(),
    lambda: T.SigmaClip(), lambda: T.SigmaClip(fill="median", cenfunc="median"),
    lambda: T.AsymmetricSigmaClip(2.0, 4.0), lambda: T.PercentileClipNormalize(),
    lambda: T.FITSHeaderScale(2.0, -3.0),
    lambda: T.FITSHeaderNormalize({"BITPIX": -32}, scale_floats=True, dim=(-2, -1)),
    lambda: T.Compose([T.BackgroundSubtract(), T.ArcsinhStretch(0.2), T.MinMaxNormalize()]),
]


# GlobalScalarNorm with dim=None is one statistic over the whole batch, by definition
@pytest.mark.parametrize("make", [m for m in ALL_IMAGE_TRANSFORMS
                                  if not (isinstance(t := m(), T.GlobalScalarNorm) and t.dim is None)])
def test_batched_equals_per_item(make):
    x = t_(sky((3, 2, 26, 23), seed=14)).float()
    x[1, 0, 5, 5] = float("nan")
    t = make()
    batched = t(x)
    for b in range(3):
        single = make()(x[b])
        torch.testing.assert_close(batched[b], single, rtol=1e-6, atol=1e-6, equal_nan=True)
        for c in range(2):
            torch.testing.assert_close(batched[b, c], make()(x[b, c]), rtol=1e-6, atol=1e-6,
                                       equal_nan=True)


@pytest.mark.parametrize("make", ALL_IMAGE_TRANSFORMS)
def test_dtypes_float16_float64_int(make):
    a = sky((2, 20, 20), seed=15) / 100.0  # ~1: representable in float16
    x64 = t_(a)
    ref = make()(x64)
    assert ref.dtype == torch.float64
    y16 = make()(x64.half())
    assert y16.dtype == torch.float16
    # float16 inputs are rounded to 11 bits before anything runs: compare to the float64
    # result of the rounded input, at float16 precision.
    ref16 = make()(x64.half().double())
    torch.testing.assert_close(y16.double(), ref16, rtol=2e-3, atol=2e-3, equal_nan=True)
    y32 = make()(x64.float())
    assert y32.dtype == torch.float32
    yi = make()(t_((a * 100).astype(np.int16)))
    assert yi.dtype == torch.float32
    assert make()(t_((a * 100).astype(np.int32))).dtype == torch.float64
    yb = make()(x64.bfloat16())
    assert yb.dtype == torch.bfloat16
    torch.testing.assert_close(yb.double(), make()(x64.bfloat16().double()), rtol=2e-2, atol=2e-2,
                               equal_nan=True)


@pytest.mark.parametrize("make", ALL_IMAGE_TRANSFORMS)
def test_device_path_on_cpu(make, monkeypatch):
    """What runs on a GPU (sort-based quantiles, no NumPy) gives the CPU path's results."""
    from torchfits.transforms import stats

    x = t_(sky((2, 3, 21, 19), seed=27))
    x[0, 1, 2, 3] = float("nan")
    expected = make()(x)
    monkeypatch.setattr(stats, "SELECT_WITH_NUMPY", False)
    torch.testing.assert_close(make()(x), expected, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_gradients_flow():
    x = t_(sky((2, 12, 12), seed=28)).requires_grad_()
    for t in (T.RobustNormalize(), T.ArcsinhStretch(0.1), T.SigmaClip(), T.ZScaleNormalize()):
        (g,) = torch.autograd.grad(t(x).nansum(), x)
        assert torch.isfinite(g).all() and g.abs().sum() > 0


@pytest.mark.parametrize("make", ALL_IMAGE_TRANSFORMS)
def test_nan_and_mask(make):
    x = t_(sky((2, 18, 17), seed=16))
    xn = x.clone()
    xn[0, 3, 4] = float("nan")
    xn[1, 0, 0] = float("inf")
    out = make()(xn)
    assert torch.isnan(out[0, 3, 4]) and torch.isnan(out[1, 0, 0])
    mask = torch.isfinite(xn)
    # a mask on finite data == the same pixels being NaN
    masked = make()(x, mask=mask)
    torch.testing.assert_close(masked, out, equal_nan=True)
    # a payload's own mask counts the same; an explicit mask wins over it
    payload = make()({"flux": x, "mask": mask})
    torch.testing.assert_close(payload["flux"], out, equal_nan=True)
    assert payload["mask"] is mask
    torch.testing.assert_close(make()({"flux": x, "mask": ~mask}, mask=mask)["flux"], out,
                               equal_nan=True)
    # a (H, W) mask broadcasts over the batch
    hw = torch.ones(18, 17, dtype=torch.bool)
    hw[2, 2] = False
    assert torch.isnan(make()(x, mask=hw)[:, 2, 2]).all()


# ----------------------------------------------------------------------------------------
# sigma clipping vs astropy.stats.sigma_clip
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("cenfunc", ["mean", "median"])
@pytest.mark.parametrize("sigma,maxiters", [(3.0, 5), (2.0, 10), (2.5, 1)])
def test_sigma_clip_matches_astropy(cenfunc, sigma, maxiters):
    a = sky((3, 40, 45), seed=17)
    a[0, 2, 2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # astropy notes that it masked the NaN
        ref = astats.sigma_clip(a, sigma=sigma, maxiters=maxiters, cenfunc=cenfunc,
                                stdfunc="std", axis=(-2, -1))
    clip = T.SigmaClip(sigma, maxiters, cenfunc=cenfunc)
    kept = clip.clip_mask(t_(a))
    assert np.array_equal(kept.numpy(), ~np.ma.getmaskarray(ref))
    out = clip(t_(a))
    fill = ref.mean(axis=(-2, -1)).data[:, None, None]  # the clipped mean
    expected = np.where(np.ma.getmaskarray(ref), fill, a)
    expected[0, 2, 2] = np.nan  # no data stays no data
    close(out, expected, 1e-12)
    med = np.ma.median(ref, axis=(-2, -1)).data
    out_med = T.SigmaClip(sigma, maxiters, fill="median", cenfunc=cenfunc)(t_(a))
    for i in range(3):
        clipped = np.ma.getmaskarray(ref)[i] & np.isfinite(a[i])
        close(out_med[i][torch.from_numpy(clipped)], np.full(clipped.sum(), med[i]), 1e-12)
    assert torch.isnan(T.SigmaClip(sigma, maxiters, fill="nan", cenfunc=cenfunc)(t_(a))
                       [torch.from_numpy(np.ma.getmaskarray(ref))]).all()


def test_sigma_clip_global_dim():
    a = sky((2, 30, 30), seed=18)
    ref = astats.sigma_clip(a, sigma=3, maxiters=5, cenfunc="mean", stdfunc="std", axis=None)
    kept = T.SigmaClip(dim=None).clip_mask(t_(a))
    assert np.array_equal(kept.numpy(), ~np.ma.getmaskarray(ref))


@pytest.mark.parametrize("n_low,n_high", [(3.0, 3.0), (1.5, 4.0), (5.0, 2.0)])
def test_asymmetric_clip_matches_astropy(n_low, n_high):
    a = sky((2, 50, 41), seed=19)
    ref = astats.sigma_clip(a, sigma_lower=n_low, sigma_upper=n_high, maxiters=1,
                            cenfunc="median", stdfunc="mad_std", axis=(-2, -1))
    clip = T.AsymmetricSigmaClip(n_low, n_high)
    assert np.array_equal(clip.clip_mask(t_(a)).numpy(), ~np.ma.getmaskarray(ref))
    out = clip(t_(a)).numpy()
    med = np.median(a, axis=(-2, -1), keepdims=True)
    close(out, np.where(np.ma.getmaskarray(ref), med, a), 1e-12)


def test_clips_have_no_inverse():
    for t in (T.SigmaClip(), T.AsymmetricSigmaClip(), T.TNullToNan({})):
        assert t.invertible is False
        with pytest.raises(TransformInverseError):
            t.inverse(torch.zeros(3, 3))
    assert not T.Compose([T.SigmaClip()]).invertible


# ----------------------------------------------------------------------------------------
# colour
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("Q,stretch,minimum", [(8, 0.5, 0.0), (3, 5, 0.0), (10, 2, [0.1, 0.0, 0.2]),
                                               (0, 1, 0.0)])
def test_lupton_rgb_matches_astropy(Q, stretch, minimum):
    rng = np.random.default_rng(20)
    r, g, b = (rng.gamma(1.5, 1.0, size=(30, 40)) - 0.3 for _ in range(3))
    expected = viz.make_lupton_rgb(r, g, b, minimum=minimum, stretch=stretch, Q=Q,
                                   output_dtype=np.float64)
    out = T.lupton_rgb(t_(r), t_(g), t_(b), Q=Q, stretch=stretch, minimum=minimum)
    assert out.shape == (30, 40, 3) and out.dtype == torch.float64
    close(out, expected, 1e-12, 1e-14)
    batch = T.lupton_rgb(torch.stack([t_(r)] * 2), torch.stack([t_(g)] * 2),
                         torch.stack([t_(b)] * 2), Q=Q, stretch=stretch, minimum=minimum,
                         dtype=torch.float32)
    assert batch.shape == (2, 30, 40, 3) and batch.dtype == torch.float32
    close(batch[1], expected, 1e-6, 1e-7)


def test_rgb_auto_preview():
    rng = np.random.default_rng(21)
    bands = [t_(rng.normal(10 * (i + 1), 1 + i, size=(64, 48))) for i in range(5)]
    for b in bands:
        b[20:24, 30:34] += 200
    out = T.rgb(*bands)
    assert out.shape == (64, 48, 3) and float(out.min()) >= 0 and float(out.max()) <= 1
    # per-band equalization: pedestals and gains do not change the picture
    scaled = T.rgb(*[b * (3 + i) + 1000 * i for i, b in enumerate(bands)])
    torch.testing.assert_close(scaled, out, rtol=1e-9, atol=1e-9)
    # the stacked form and the batched form give the same image
    stack = torch.stack(bands)
    torch.testing.assert_close(T.rgb(stack), out)
    batch = T.rgb(torch.stack([stack, stack * 2]))
    assert batch.shape == (2, 64, 48, 3)
    torch.testing.assert_close(batch[0], out)
    # the source is brighter than the sky; one band is grey
    assert float(out[21, 31].mean()) > float(out[5, 5].mean())
    grey = T.rgb(bands[0])
    torch.testing.assert_close(grey[..., 0], grey[..., 2])
    # three bands go to B, G, R one to one: a source only in the reddest band is red
    three = [t_(rng.normal(0, 1, size=(40, 40))) for _ in range(3)]
    three[2][10:20, 10:20] += 100
    img = T.rgb(*three, saturation=1.0)
    assert float(img[15, 15, 0]) > float(img[15, 15, 2])
    for scene in ("empty", "filled"):
        assert T.rgb(*bands, scene=scene, dtype=torch.float32).dtype == torch.float32
    zp = T.rgb(*bands, zeropoints=[25.0] * 5)
    torch.testing.assert_close(zp, T.rgb(*bands, calibrated=True))
    weighted = T.rgb(*bands[:2], weights=[[0, 1], [0.5, 0.5], [1, 0]])
    assert weighted.shape == (64, 48, 3)
    nan = bands[0].clone()
    nan[0, 0] = float("nan")
    assert torch.isfinite(T.rgb(nan, bands[1], bands[2])).all()


def test_colour_errors():
    z = torch.zeros(4, 4)
    with pytest.raises(TransformError):
        T.lupton_rgb(z, z, torch.zeros(3, 4))
    with pytest.raises(TransformError):
        T.lupton_rgb(z, z, z, stretch=0)
    with pytest.raises(TransformError):
        T.lupton_rgb(z, z, z, Q=-1)
    with pytest.raises(TransformError):
        T.lupton_rgb(z, z, z, minimum=[0, 1])
    with pytest.raises(TransformError):
        T.lupton_rgb(z, z, z, dtype=torch.uint8)
    with pytest.raises(TransformError):
        T.rgb()
    with pytest.raises(TransformError):
        T.rgb(torch.zeros(8, 4, 4))
    with pytest.raises(TransformError):
        T.rgb(z, brightness=1.0)
    with pytest.raises(TransformError):
        T.rgb(z, scene="dark")
    with pytest.raises(TransformError):
        T.rgb(z, z, weights=[[1, 0]])
    with pytest.raises(TransformError):
        T.rgb(z, z, zeropoints=[25.0])
    with pytest.raises(TransformError):
        T.rgb(z, torch.zeros(3, 3))


# ----------------------------------------------------------------------------------------
# payloads, ivar, composition, modules, pickling, threads
# ----------------------------------------------------------------------------------------

def test_payload_ivar_propagation_linear():
    x = t_(sky((2, 16, 16), seed=22))
    ivar = torch.full_like(x, 0.25)
    t = T.RobustNormalize()
    out = t({"flux": x, "ivar": ivar, "label": 3})
    assert out["label"] == 3 and set(out) == {"flux", "ivar", "label"}
    _, sigma = T.estimate_background(x)
    torch.testing.assert_close(out["ivar"], ivar * sigma ** 2)
    back = t.inverse(out)
    torch.testing.assert_close(back["ivar"], ivar)
    torch.testing.assert_close(back["flux"], x)
    bg = T.BackgroundSubtract()({"flux": x, "ivar": ivar})
    assert torch.equal(bg["ivar"], ivar)
    hs = T.FITSHeaderScale(2.0, 1.0)({"flux": x, "ivar": ivar})
    torch.testing.assert_close(hs["ivar"], ivar / 4)
    # masked pixels: NaN flux, zero ivar
    m = torch.ones_like(x, dtype=torch.bool)
    m[0, 1, 1] = False
    out = t({"flux": x, "ivar": ivar}, mask=m)
    assert torch.isnan(out["flux"][0, 1, 1]) and out["ivar"][0, 1, 1] == 0


def test_payload_ivar_nonlinear_warns_or_propagates():
    x = torch.linspace(0.1, 4, 20, dtype=torch.float64)
    ivar = torch.full_like(x, 4.0)
    with pytest.warns(UserWarning, match="nonlinear"):
        out = T.ArcsinhStretch(2.0)({"flux": x, "ivar": ivar})
    assert torch.equal(out["ivar"], ivar)
    with pytest.warns(UserWarning, match="nonlinear"):
        T.SigmaClip()({"flux": x.reshape(4, 5), "ivar": ivar.reshape(4, 5)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sq = T.SqrtStretch(propagate_ivar=True)({"flux": x, "ivar": 1 / x})  # Poisson
        torch.testing.assert_close(sq["ivar"], torch.full_like(x, 4.0))
        a = 2.0
        st = T.ArcsinhStretch(a, propagate_ivar=True)
        out = st({"flux": x, "ivar": ivar})
        slope = a / (torch.sqrt(1 + (a * x) ** 2) * np.arcsinh(a))
        torch.testing.assert_close(out["ivar"], ivar / slope ** 2)
        torch.testing.assert_close(st.inverse(out)["ivar"], ivar)
        lg = T.LogStretch(10.0, propagate_ivar=True)({"flux": torch.tensor([-1.0, 1.0]),
                                                      "ivar": torch.ones(2)})
        assert float(lg["ivar"][0]) == 0.0  # clamped input carries no information


def test_compose_as_module_and_repr():
    x = t_(sky((2, 1, 20, 20), seed=23))
    pipe = T.Compose([T.BackgroundSubtract(), T.ArcsinhStretch(0.05), T.MinMaxNormalize()])
    y = pipe(x)
    assert len(pipe) == 3 and isinstance(pipe[1], T.ArcsinhStretch)
    assert [type(t).__name__ for t in pipe] == ["BackgroundSubtract", "ArcsinhStretch",
                                               "MinMaxNormalize"]
    torch.testing.assert_close(pipe.inverse(y), x, rtol=1e-10, atol=1e-8)
    assert "ArcsinhStretch(a=0.05)" in repr(pipe)
    model = torch.nn.Sequential(T.as_module(pipe), torch.nn.Flatten(), torch.nn.Linear(400, 1,
                                                                                        dtype=torch.float64))
    assert model(x).shape == (2, 1)
    assert isinstance(T.AsModule(pipe), torch.nn.Module)
    # plain callables compose too
    torch.testing.assert_close(T.Compose([lambda t: t * 2, T.SqrtStretch()])(x.abs()),
                               (2 * x.abs()).sqrt())
    with pytest.raises(TransformError):
        T.Compose([1])
    with pytest.raises(TransformError):
        T.Compose(T.SqrtStretch())
    with pytest.raises(TransformError):
        T.AsModule(3)


def test_inverse_needs_forward_and_state_is_per_thread():
    t = T.RobustNormalize()
    with pytest.raises(TransformInverseError, match="forward"):
        t.inverse(torch.zeros(3, 3))
    with pytest.raises(RuntimeError):  # the 1.x exception type still catches it
        T.MinMaxNormalize().inverse(torch.zeros(3, 3))
    data = [t_(sky((10, 10), seed=s)) for s in range(4)]
    results = {}
    barrier = threading.Barrier(4)

    def work(i):
        y = t(data[i])
        barrier.wait()  # every thread has run forward before any inverse
        results[i] = t.inverse(y)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i in range(4):
        torch.testing.assert_close(results[i], data[i])


def test_pickle_starts_fresh():
    t = T.Compose([T.SigmaClip(2.5), T.ZScaleNormalize(algorithm="iraf"), T.ArcsinhStretch(3.0)])
    x = t_(sky((12, 12), seed=24))
    y = t(x)
    clone = pickle.loads(pickle.dumps(t))
    torch.testing.assert_close(clone(x), y)
    fresh = pickle.loads(pickle.dumps(T.ZScaleNormalize()))
    with pytest.raises(TransformInverseError):
        fresh.inverse(y)


# ----------------------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: T.ArcsinhStretch(0), lambda: T.ArcsinhStretch(float("nan")), lambda: T.LogStretch(-1),
    lambda: T.LogStretch(eps=0), lambda: T.ZScaleNormalize(contrast=-1),
    lambda: T.ZScaleNormalize(algorithm="fast"), lambda: T.RobustNormalize(dim=("a",)),
    lambda: T.MinMaxNormalize(dim=(1, 1)), lambda: T.PercentileClipNormalize(99, 1),
    lambda: T.PercentileClipNormalize(-1, 50), lambda: T.PercentileClipNormalize(1, 101),
    lambda: T.GlobalScalarNorm("mode"), lambda: T.SigmaClip(0), lambda: T.SigmaClip(max_iter=0),
    lambda: T.SigmaClip(fill="zero"), lambda: T.SigmaClip(cenfunc="mode"),
    lambda: T.AsymmetricSigmaClip(n_low=float("nan")), lambda: T.AsymmetricSigmaClip(fill="mean"),
    lambda: T.FITSHeaderScale(0), lambda: T.FITSHeaderScale("x"),
    lambda: T.FITSHeaderNormalize({"BITPIX": 12}), lambda: T.FITSHeaderNormalize({}),
    lambda: T.FITSScaleColumns({"A": (0, 1)}), lambda: T.FITSScaleColumns({"A": 3}),
    lambda: T.TNullToNan({"A": "x"}),
    lambda: T.zscale_limits(torch.zeros(4, 4), algorithm="x"),
    lambda: T.zscale_limits(torch.zeros(4, 4), n_samples=0),
])
def test_bad_parameters(make):
    with pytest.raises(TransformError) as info:
        make()
    assert isinstance(info.value, FitsError) and isinstance(info.value, ValueError)


def test_bad_inputs():
    t = T.RobustNormalize()
    with pytest.raises(TransformError, match="out of range"):
        t(torch.zeros(5))  # dim (-2, -1) on 1-D data
    with pytest.raises(TransformError, match="flux"):
        t({"image": torch.zeros(3, 3)})
    with pytest.raises(TypeError):  # 1.x raised TypeError for a non-tensor
        t([[1.0, 2.0]])
    with pytest.raises(TransformError, match="broadcast"):
        t(torch.zeros(3, 3), mask=torch.ones(4, dtype=torch.bool))
    with pytest.raises(TransformError, match="ivar"):
        t({"flux": torch.zeros(3, 3), "ivar": torch.zeros(2)})
    with pytest.raises(TransformError, match="real"):
        T.SqrtStretch()(torch.zeros(2, 2, dtype=torch.complex64))
    with pytest.raises(TransformError):
        T.FITSScaleColumns({"A": (2, 0)})(torch.zeros(3))
    y = t(torch.rand(2, 4, 4, dtype=torch.float64))
    with pytest.raises(TransformError, match="match"):
        t.inverse(y[:, :3, :3].reshape(3, 2, 3))


def test_import_without_torch_says_what_to_install():
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"
            "import torchfits\n"
            "try:\n    torchfits.transforms\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pip install 'torchfits[torch]'" in out.stdout


def test_namespace_and_lazy_import():
    assert torchfits.transforms is T
    assert set(T.__all__) >= {"FITSTransform", "Compose", "AsModule", "as_module", "ArcsinhStretch",
                              "LogStretch", "SqrtStretch", "ZScaleNormalize", "RobustNormalize",
                              "BackgroundSubtract", "PercentileClipNormalize", "MinMaxNormalize",
                              "GlobalScalarNorm", "SigmaClip", "AsymmetricSigmaClip",
                              "FITSHeaderScale", "FITSHeaderNormalize", "FITSScaleColumns",
                              "TNullToNan", "lupton_rgb", "rgb", "zscale_limits",
                              "estimate_background", "safe_arcsinh", "safe_log"}
    assert callable(T.rgb)  # the function, not a module of the same name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_on_the_tensor_device():
    x = t_(sky((2, 3, 64, 64), seed=25)).cuda()
    for make in ALL_IMAGE_TRANSFORMS:
        t = make()
        y = t(x)
        assert y.device == x.device
        torch.testing.assert_close(y.cpu(), make()(x.cpu()), rtol=1e-9, atol=1e-9, equal_nan=True)
    assert T.rgb(x[0]).device == x.device
    assert T.lupton_rgb(x[0, 0], x[0, 1], x[0, 2]).device == x.device


def test_quantile_paths_agree_with_numpy():
    """The CPU selection path (NumPy partition) and the sort path (used on GPUs) both equal
    numpy.nanquantile, including rows with different valid counts and empty rows."""
    from torchfits.transforms import stats

    rng = np.random.default_rng(26)
    data = rng.normal(size=(7, 53))
    valid = rng.random((7, 53)) > rng.uniform(0, 0.9, size=(7, 1))
    valid[3] = False
    qs = (0.0, 0.01, 0.25, 0.5, 0.9, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the all-NaN row
        expected = np.nanquantile(np.where(valid, data, np.nan), qs, axis=-1)
    fast = stats.row_quantiles(t_(data), t_(valid), qs)
    s, count = stats.sorted_rows(t_(data), t_(valid))
    slow = [stats.quantile_sorted(s, count, q) for q in qs]
    for j in range(len(qs)):
        close(fast[j][:, 0], expected[j], 1e-14, 1e-15)
        close(slow[j][:, 0], expected[j], 1e-14, 1e-15)


@pytest.mark.parametrize("shape", [(0, 1, 8, 8), (2, 1, 1, 1), (3, 0, 4)])
@pytest.mark.parametrize("make", ALL_IMAGE_TRANSFORMS)
def test_empty_and_tiny_inputs(make, shape):
    x = torch.rand(shape, generator=torch.Generator().manual_seed(1))
    y = make()(x)
    assert y.shape == x.shape
