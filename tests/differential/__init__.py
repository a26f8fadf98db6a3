"""Differential harness: files built by independent writers, read through every torchfits route
and compared with astropy, fitsio and each other (docs/reliability.md, "Differential harness")."""
