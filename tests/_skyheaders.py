"""Celestial WCS header cards of every kind the cutout tests check (TAN, TAN-SIP, TPV, ZPN, a
Digitized Sky Survey plate solution), for images of about 250 x 300 pixels."""
from __future__ import annotations


def tan_cards() -> dict:
    return {"CTYPE1": "RA---TAN", "CTYPE2": "DEC--TAN", "CRVAL1": 210.5, "CRVAL2": -12.25,
            "CRPIX1": 151.0, "CRPIX2": 124.5, "CD1_1": -2.0e-4, "CD1_2": 1.5e-6,
            "CD2_1": 1.2e-6, "CD2_2": 2.0e-4}


def sip_cards() -> dict:
    return {"CTYPE1": "RA---TAN-SIP", "CTYPE2": "DEC--TAN-SIP", "CRVAL1": 150.1, "CRVAL2": 2.2,
            "CRPIX1": 140.5, "CRPIX2": 120.25, "CD1_1": -1.1e-4, "CD1_2": 2.0e-6,
            "CD2_1": 1.0e-6, "CD2_2": 1.1e-4, "A_ORDER": 3, "B_ORDER": 3,
            "A_2_0": 2e-6, "A_1_1": -1e-6, "A_0_2": 3e-6, "A_3_0": 1e-9, "A_1_2": -2e-9,
            "B_2_0": -2e-6, "B_1_1": 1e-6, "B_0_2": 4e-6, "B_0_3": 3e-9, "B_2_1": 1e-9}


def tpv_cards() -> dict:
    """A DECam-like TPV distortion (PVi_j polynomial in intermediate coordinates)."""
    cards = {"CTYPE1": "RA---TPV", "CTYPE2": "DEC--TPV", "CRVAL1": 36.7, "CRVAL2": -4.3,
             "CRPIX1": 160.0, "CRPIX2": 110.0, "CD1_1": 7.3e-5, "CD1_2": -1.0e-7,
             "CD2_1": 1.2e-7, "CD2_2": 7.3e-5}
    for axis, terms in ((1, (0.0012, 1.003, 0.0021, 0.0, -0.01, 0.004, -0.008)),
                        (2, (-0.0009, 0.998, -0.0017, 0.0, 0.006, -0.012, 0.003))):
        for j, value in enumerate(terms):
            cards[f"PV{axis}_{j}"] = value
    return cards


def zpn_cards() -> dict:
    """A zenithal polynomial projection (PV2_m: the radial polynomial)."""
    return {"CTYPE1": "RA---ZPN", "CTYPE2": "DEC--ZPN", "CRVAL1": 83.6, "CRVAL2": 22.0,
            "CRPIX1": 145.0, "CRPIX2": 130.0, "CDELT1": -3.0e-4, "CDELT2": 3.0e-4,
            "PV2_0": 0.0, "PV2_1": 1.0, "PV2_2": 0.0, "PV2_3": 0.35}


def dss_cards(with_approximate_wcs: bool = False) -> dict:
    """A Digitized Sky Survey plate solution (POSS-style plate constants, 25.28 um pixels)."""
    cards = dict(
        PLTLABEL="SJ01467", PLATEID="A0JP", REGION="S292", PLTRAH=1, PLTRAM=33, PLTRAS=53.9,
        PLTDECSN="+", PLTDECD=30, PLTDECM=39, PLTDECS=12.0, EQUINOX=2000.0, PLTSCALE=67.20,
        XPIXELSZ=25.28445, YPIXELSZ=25.28445, PPO1=0.0, PPO2=0.0, PPO3=177500.0, PPO4=0.0,
        PPO5=0.0, PPO6=177500.0,
        AMDX1=67.1550839184, AMDX2=0.0104637209, AMDX3=-292.895023315, AMDX4=-2.68285e-05,
        AMDX5=2.56798e-05, AMDX6=-8.31258e-06, AMDX7=0.0, AMDX8=2.1185e-06, AMDX9=-1.2366e-07,
        AMDX10=2.17497e-06, AMDX11=1.38834e-08, AMDX12=0.0, AMDX13=0.0,
        AMDY1=67.1591347031, AMDY2=-0.0097399713, AMDY3=263.33129138, AMDY4=-2.44e-05,
        AMDY5=2.47e-05, AMDY6=1.11e-05, AMDY7=0.0, AMDY8=2.09e-06, AMDY9=-6.5e-08,
        AMDY10=2.05e-06, AMDY11=-8.8e-10, AMDY12=0.0, AMDY13=0.0, CNPIX1=6011, CNPIX2=7023)
    if with_approximate_wcs:
        # DSS archive files also carry an approximate linear WCS; WCSLIB reads the plate
        # solution and ignores these.
        cards.update(CTYPE1="RA---TAN", CTYPE2="DEC--TAN", CRPIX1=150.5, CRPIX2=125.5,
                     CRVAL1=23.94, CRVAL2=30.72, CDELT1=-4.7e-4, CDELT2=4.7e-4)
    return cards


SKY_KINDS = {"tan": tan_cards, "sip": sip_cards, "tpv": tpv_cards, "zpn": zpn_cards,
             "dss": dss_cards}
