"""The torchfits error hierarchy.

Every error derives from :class:`FitsError` and also from the builtin types that code written
against torchfits 1.2.3 catches for the same situation, so existing ``except`` clauses keep working.
"""
from __future__ import annotations

__all__ = [
    "FitsError",
    "FitsFileNotFoundError",
    "NotFitsError",
    "CorruptHeaderError",
    "TruncatedFileError",
    "NaxisOverflowError",
    "HDUNotFoundError",
    "HDUTypeError",
    "ColumnNotFoundError",
    "KeywordNotFoundError",
    "WhereSyntaxError",
    "UnsupportedColumnError",
    "FitsFileExistsError",
    "UInt64WriteError",
    "QuantizeError",
    "HttpBlockedError",
    "UnsafePathError",
    "TooManyAxesError",
    "InvalidRowError",
    "CompressedTileError",
    "CodecError",
    "FitsWriteError",
    "HeaderCardError",
    "TransformError",
    "TransformInverseError",
    "FitsIOError",
    "WhereEvaluationError",
    "NullValueError",
    "CutoutEdgeError",
    "RemoteReadError",
    "RemoteFileChangedError",
]


class FitsError(Exception):
    """Root of every error torchfits raises about a file, an HDU, a column or an argument."""

    def __str__(self) -> str:
        # KeyError would repr-quote the message; every subclass prints it as written.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class FitsFileNotFoundError(FitsError, FileNotFoundError, RuntimeError):
    """The file does not exist or cannot be opened."""


class NotFitsError(FitsError, OSError, RuntimeError):
    """The bytes are not a FITS file (no SIMPLE card, garbage where a header should be)."""


class CorruptHeaderError(FitsError, OSError, RuntimeError, ValueError):
    """A header is unreadable: it never ends, or a structural keyword is missing or invalid."""


class TruncatedFileError(FitsError, OSError, RuntimeError):
    """The file ends before the data an HDU declares."""


class NaxisOverflowError(CorruptHeaderError):
    """NAXISn values whose product overflows or exceeds the file."""


class HDUNotFoundError(FitsError, KeyError, IndexError, ValueError, RuntimeError, OSError):
    """No HDU with that index or EXTNAME."""


class HDUTypeError(FitsError, RuntimeError, ValueError):
    """The HDU is of the wrong kind for the call (an image API on a table, or the reverse)."""


class KeywordNotFoundError(FitsError, KeyError, RuntimeError):
    """A requested header keyword is absent."""


class ColumnNotFoundError(FitsError, KeyError, ValueError):
    """A projection or a where-expression names a column the table does not have (1.2.3 raised
    ``KeyError`` for the first and ``ValueError`` for the second)."""


class WhereSyntaxError(FitsError, ValueError):
    """A where-expression does not parse; the message points at the offending token."""


class UnsupportedColumnError(FitsError, NotImplementedError):
    """A column type that the requested output cannot represent."""


class FitsFileExistsError(FitsError, FileExistsError, RuntimeError):
    """A write would clobber an existing file and ``overwrite`` is false."""


class UInt64WriteError(FitsError, ValueError):
    """uint64 data cannot be written losslessly."""


class QuantizeError(FitsError, ValueError):
    """Quantisation asked of data that cannot be quantised."""


class HttpBlockedError(FitsError, OSError):
    """A URL that points at a blocked scheme or an internal/private network."""


class TooManyAxesError(FitsError, ValueError, RuntimeError):
    """An image with more axes than a NumPy array (or tensor) can hold (64)."""


class UnsafePathError(FitsError, ValueError, RuntimeError, OSError):
    """A path CFITSIO would run as a command or treat specially (a pipe, a leading ``!``, a
    shell-like scheme); refused with torchfits 1.2.3's "Security Error" wording."""


class InvalidRowError(FitsError, RuntimeError):
    """A 1-based row window that starts past the end of the table ("Invalid start row")."""


class CompressedTileError(CorruptHeaderError):
    """A tile that cannot be decoded: corrupt or truncated bytes, or a descriptor that points
    outside the heap. The message names the file, the HDU and the tile."""


class CodecError(FitsError, ValueError):
    """A tile's bytes do not decode (corrupt or truncated); callers add the file, HDU and tile."""


class FitsWriteError(FitsError, RuntimeError, ValueError, TypeError):
    """A write failed; the message names the file (``Failed to write FITS file '<path>'``)."""


class HeaderCardError(FitsWriteError):
    """A header card that FITS cannot hold: a keyword, value or comment with a character outside
    printable ASCII (a newline, a tab, an accented letter), a NaN or infinite value, a value that
    is not a scalar, a malformed keyword or a card too long for 80 characters. Raised before
    anything is written; names the keyword (and the file and HDU, where known)."""


class TransformError(FitsError, ValueError, TypeError):
    """A transform got a bad parameter, or an input (shape, dtype, payload) it cannot take.

    torchfits 1.x raised ``ValueError`` for bad parameters and ``TypeError`` for bad inputs;
    both ``except`` clauses catch this.
    """


class TransformInverseError(FitsError, RuntimeError):
    """``inverse()`` cannot run: the transform has none, or no ``forward()`` ran on this thread."""


class FitsIOError(FitsError, OSError, RuntimeError):
    """The operating system refused a read or write (a full disk, an I/O error); names the file.

    ``errno`` is the underlying error number.
    """


class WhereEvaluationError(FitsError, ValueError):
    """A where-expression that parses but cannot be applied to a table: a column type it cannot
    filter, an operand of the wrong kind, 64-bit integer arithmetic that overflows; names the
    file and HDU."""


class NullValueError(FitsError, ValueError, TypeError):
    """A table column holds nulls (a TNULL value, a logical column's zero byte) that a tensor
    cannot show; names the file, HDU and column and the ways out (``null_value=`` to fill,
    ``masks=True`` for a validity tensor). Also a ``TypeError``, what torch routes raised
    for nulls before."""


class CutoutEdgeError(FitsError, ValueError):
    """A cutout box that leaves its image, read where boxes must lie inside it (the datasets'
    default ``edge="raise"``), or a ``pad_value`` the cutout's type cannot hold; names the file,
    the HDU, the box and the image shape."""


class RemoteReadError(FitsError, OSError, RuntimeError):
    """A remote read that failed after its retries: a refused or failed request, a response
    that does not hold the bytes asked for, a timeout. The message names the URL (without
    user, password or query string), the byte range and the HTTP status; so do ``url``,
    ``byte_range`` (``(start, stop)`` or None) and ``status`` (None when no response came)."""

    def __init__(self, message: str, *, url: str = "", byte_range: tuple[int, int] | None = None,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.byte_range = byte_range
        self.status = status


class RemoteFileChangedError(RemoteReadError):
    """The remote object changed while it was being read (its ETag or Last-Modified is no longer
    the one the read started with): no bytes of two versions are ever mixed; open it again."""
