"""fits_collate_fn errors and FitsTableDataset's repr in the 1.x wording (issue #25)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torchfits  # noqa: E402
from torchfits.data import FitsTableDataset, fits_collate_fn  # noqa: E402


def test_ragged_non_tensor_column_is_named():
    batch = [{"x": torch.zeros(2), "tags": ["a"]}, {"x": torch.ones(2), "tags": ["b", "c"]}]
    with pytest.raises(ValueError, match="non-tensor column 'tags'") as ei:
        fits_collate_fn(batch)
    assert "collate_fn" in str(ei.value)


@pytest.mark.parametrize("item", [3, "text", [torch.zeros(1)], (torch.zeros(1), 2)])
def test_unsupported_sample_type(item):
    with pytest.raises(TypeError, match="Unsupported sample type"):
        fits_collate_fn([item, item])


def test_table_dataset_repr_shows_n_rows(tmp_path):
    path = tmp_path / "t.fits"
    torchfits.write(str(path), {"a": np.arange(7, dtype=np.int32)}, overwrite=True)
    ds = FitsTableDataset(str(path), hdu=1)
    assert "n_rows=7" in repr(ds)
