"""Functions run in spawned child processes by tests/data/test_data.py (importable by name there)."""
from __future__ import annotations

import pickle

import numpy as np


def read_pickled_image(blob: bytes) -> np.ndarray:
    img = pickle.loads(blob)
    return np.asarray(img[1:4, 2:7]), img.read()


def read_pickled_scanner(blob: bytes) -> dict:
    return pickle.loads(blob).to_numpy()


def read_pickled_fragment(blob: bytes) -> dict:
    frag = pickle.loads(blob)
    return frag.to_table().to_pydict()


def read_pickled_dataset(blob: bytes) -> list:
    ds = pickle.loads(blob)
    return [ds[i] for i in range(len(ds))]
