"""1.x argument checks run before any file is opened, with the 1.x wording (issue #25)."""
import pytest

import torchfits
from torchfits import table

MISSING = "/nonexistent/dir/never.fits"


@pytest.mark.parametrize("call", [
    lambda: torchfits.read([MISSING, 3]),
    lambda: torchfits.read((MISSING, None)),
    lambda: torchfits.read_batch([MISSING, 3.5]),
])
def test_path_list_with_non_string_item(call):
    with pytest.raises(ValueError, match="Path must be a string or list of strings"):
        call()


@pytest.mark.parametrize("call", [
    lambda: torchfits.read(MISSING, hdu=-1),
    lambda: torchfits.read([MISSING], hdu=-1),
    lambda: torchfits.read(MISSING, hdu=[0, -1]),
    lambda: torchfits.read_tensor(MISSING, -1),
    lambda: torchfits.read_hdus(MISSING, [0, -2]),
    lambda: torchfits.read_batch([MISSING], hdu=-1),
    lambda: torchfits.read_subset(MISSING, -1, 0, 0, 1, 1),
    lambda: torchfits.open_subset_reader(MISSING, -1),
    lambda: torchfits.read_header(MISSING, -1),
    lambda: torchfits.read_shape(MISSING, -1),
    lambda: torchfits.read_nrows(MISSING, -1),
    lambda: table.read(MISSING, hdu=-1),
    lambda: table.read_torch(MISSING, hdu=-1),
    lambda: torchfits.open_table_reader(MISSING, -1),
])
def test_negative_hdu_before_open(call):
    with pytest.raises(ValueError, match="HDU index must be a non-negative integer"):
        call()
