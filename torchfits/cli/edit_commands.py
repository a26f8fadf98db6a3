"""``torchfits verify`` (checksums, exit 4 on failure) and ``torchfits setkey`` (edit header
keywords in place or into copies)."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

__all__ = ["cmd_verify", "cmd_setkey", "add_parsers"]

from .common import EXIT_CHECKSUM, EXIT_OK, UsageError, common_options, emit, hdus, selected


def _paths(args: argparse.Namespace, attr: str) -> list[str]:
    raw = list(getattr(args, attr, []) or [])
    if getattr(args, "stdin", False) or (not raw and not sys.stdin.isatty()):
        raw += [line.strip() for line in sys.stdin if line.strip()]
    paths: list[str] = []
    for item in raw:
        if item.startswith("@"):
            with open(item[1:], encoding="utf-8") as fh:
                paths += [ln.strip() for ln in fh if ln.strip() and not ln.lstrip().startswith("#")]
        else:
            paths.append(item)
    if not paths:
        raise UsageError("no input files")
    return paths


def _jobs(value: Optional[int], n: int) -> int:
    if value is None:
        return 1
    if value == 0:
        return (os.cpu_count() or 1) if n >= 2 else 1
    return max(1, value)


def cmd_verify(args: argparse.Namespace) -> int:
    """Verify CHECKSUM/DATASUM of every selected HDU; exit 4 if any fails."""
    from ..fits.hdu_index import get_index
    from ..writing.checksum import checksum_status

    def one(path: str) -> list[dict]:
        idx = get_index(path)
        buf = idx.source.buffer()
        out = []
        for i in selected(len(idx), hdus(args.hdu), path):
            entry = idx.entries[i]
            st = checksum_status(buf, entry, idx.header_view(entry))
            out.append({"file": path, "hdu": i, "name": entry.display_name,
                        "ok": st["ok"], "status": st["status"], "datastatus": st["datastatus"],
                        "hdustatus": st["hdustatus"]})
        idx.source.check()
        return out

    paths = _paths(args, "paths")
    with ThreadPoolExecutor(_jobs(args.file_jobs, len(paths))) as pool:
        records = [r for rs in pool.map(one, paths) for r in rs]
    if args.format == "text":
        for r in records:
            if r["status"] == "ok":
                word = "OK"
            elif r["status"] == "no_checksums":
                word = "OK (no checksum keywords)"
            else:
                word = f"FAIL data={r['datastatus']} hdu={r['hdustatus']}"
            print(f"{r['file']}[{r['hdu']}] {r['name']}: {word}")
    else:
        emit(records, args.format)
    return EXIT_CHECKSUM if any(not r["ok"] for r in records) else EXIT_OK


def _typed(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def cmd_setkey(args: argparse.Namespace) -> int:
    """Set, rename or delete keywords in one or more HDUs of each file."""
    from ..fits.hdu_index import get_index
    from ..writing.header_edit import update_header
    from ..errors import KeywordNotFoundError

    if (args.keyword is None) != (args.value is None):
        raise UsageError("-k/--keyword and --value go together")
    if args.keyword is None and not args.rename and not args.delete:
        raise UsageError("nothing to do: give -k KEY --value V, --rename OLD=NEW or --delete KEY")
    rename = {}
    for item in args.rename or []:
        if "=" not in item:
            raise UsageError(f"--rename takes OLD=NEW, not {item!r}")
        old, new = item.split("=", 1)
        rename[old.strip()] = new.strip()
    paths = _paths(args, "inputs")
    if args.out and len(paths) != 1:
        raise UsageError("-o/--out takes one input; use --out-dir for several")

    def one(path: str) -> int:
        dest = path
        if args.out or args.out_dir:
            dest = args.out or os.path.join(args.out_dir, os.path.basename(path))
            shutil.copyfile(path, dest)
        n = len(get_index(dest))
        if args.hdu in (None, ""):
            wanted = [0]
        elif args.hdu == "all":
            wanted = list(range(n))
        else:
            try:
                wanted = [int(x) for x in args.hdu.split(",") if x.strip()]
            except ValueError:
                raise UsageError(f"-e/--hdu takes integers or 'all', not {args.hdu!r}") from None
        for h in wanted:
            if not 0 <= h < n:
                raise UsageError(f"{path}: HDU {h} out of range (file has {n} HDUs)")
            try:
                update_header(dest, h, set={args.keyword: _typed(args.value)} if args.keyword else None,
                              delete=args.delete or (), rename=rename)
            except KeywordNotFoundError as exc:
                raise UsageError(f"{path}[{h}]: {exc}") from None
            except ValueError as exc:
                raise UsageError(f"{path}[{h}]: {exc}") from None
        return EXIT_OK

    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
    with ThreadPoolExecutor(_jobs(args.file_jobs, len(paths))) as pool:
        results = list(pool.map(one, paths))
    return max(results) if results else EXIT_OK


def add_parsers(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Add the ``verify`` and ``setkey`` subcommands to ``sub`` and register them in ``commands``."""
    p = sub.add_parser("verify", help="check CHECKSUM/DATASUM of each HDU (exit 4 on failure)")
    common_options(p)
    p.add_argument("-J", "--file-jobs", type=int, default=None, help="files checked in parallel")
    commands["verify"] = cmd_verify

    p = sub.add_parser("setkey", help="set, rename or delete header keywords (in place or copies)")
    p.add_argument("inputs", nargs="*", help="files, or @list files with one path per line")
    p.add_argument("--stdin", action="store_true", help="read paths from stdin, one per line")
    p.add_argument("-k", "--keyword", help="keyword to set (long names become HIERARCH)")
    p.add_argument("--value", help="value: 12 → int, 1.5 → float, anything else a string")
    p.add_argument("--rename", action="append", metavar="OLD=NEW")
    p.add_argument("--delete", action="append", metavar="KEY")
    p.add_argument("-e", "--hdu", default="0", help="HDU index, comma list, or 'all' (default 0)")
    p.add_argument("-o", "--out", help="write the edited copy here instead of editing in place")
    p.add_argument("--out-dir", help="write edited copies into this directory")
    p.add_argument("-J", "--file-jobs", type=int, default=None, help="files edited in parallel")
    commands["setkey"] = cmd_setkey
