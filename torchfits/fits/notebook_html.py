"""Notebook HTML: the escaped summary tables that Jupyter shows for our objects (`_repr_html_`).

Every value is escaped: a keyword, an EXTNAME or a path is file content, not markup.
"""
from __future__ import annotations

import base64
from collections.abc import Sequence
from html import escape
from typing import Any

__all__ = ["html_summary", "html_table"]


def html_summary(class_name: str, fields: Sequence[tuple[str, Any]],
                 picture: bytes | None = None) -> str:
    """The class name over a two-column table of ``(name, value)`` fields, then ``picture`` (PNG
    bytes) inline when given: Jupyter shows the HTML of an object that has both, so a thumbnail
    appears only if the HTML carries it."""
    rows = "".join(f"<tr><th style=\"text-align:left\">{escape(str(k))}</th>"
                   f"<td style=\"text-align:left\">{escape(str(v))}</td></tr>" for k, v in fields)
    img = "" if picture is None else (
        "<img alt=\"thumbnail\" src=\"data:image/png;base64,"
        f"{base64.b64encode(picture).decode('ascii')}\"/>")
    return f"<div><strong>{escape(class_name)}</strong><table>{rows}</table>{img}</div>"


def html_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, more: int = 0) -> str:
    """A table with a header row; ``more`` rows left out are said under it."""
    head = "".join(f"<th style=\"text-align:left\">{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td style=\"text-align:left\">{escape(str(v))}</td>" for v in r)
                   + "</tr>" for r in rows)
    tail = f"<p>… {more} more</p>" if more > 0 else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{tail}"
