"""The ``torchfits`` command line."""
