"""Fixtures shared by the 1.x compatibility tests."""
from __future__ import annotations

import sys
import types

import pytest

# The writers of ``torchfits.writing.table_edit`` that the 1.x table API delegates to.
TABLE_EDIT_FUNCTIONS = ("write", "append_rows", "insert_rows", "update_rows", "delete_rows",
                        "insert_column", "replace_column", "rename_columns", "drop_columns")


@pytest.fixture
def fake_edit(monkeypatch):
    """A stand-in ``torchfits.writing.table_edit`` recording each call as ``(name, args, kwargs)``
    (files are left as they are)."""
    calls = []
    module = types.ModuleType("torchfits.writing.table_edit")
    for name in TABLE_EDIT_FUNCTIONS:
        def record(*args, _name=name, **kwargs):
            calls.append((_name, args, kwargs))
        setattr(module, name, record)
    monkeypatch.setitem(sys.modules, "torchfits.writing.table_edit", module)
    import torchfits.writing

    monkeypatch.setattr(torchfits.writing, "table_edit", module, raising=False)
    return calls
