"""``torchfits verify`` (checksums, exit 4 on failure) and ``torchfits setkey`` (edit header
keywords in place or into copies)."""
from __future__ import annotations

import argparse
import os
import shutil
from typing import Any, Callable

__all__ = ["cmd_verify", "cmd_setkey", "add_parsers"]

from .common import (
    EXIT_CHECKSUM,
    Batch,
    Target,
    UsageError,
    check_outputs,
    common_options,
    emit,
    file_jobs_option,
    hdus,
    input_paths,
    jobs,
    progress_enabled,
    progress_options,
    select_hdus,
    targets,
)


def cmd_verify(args: argparse.Namespace) -> int:
    """Verify CHECKSUM/DATASUM of every selected HDU; exit 4 if any fails."""
    from ..fits.hdu_index import get_index
    from ..writing.checksum import checksum_status

    spec = hdus(args.hdu)
    batch = Batch("verify")

    def one(t: Target) -> list[dict[str, Any]]:
        idx = get_index(t.path)
        buf = idx.source.buffer()
        out = []
        for i in select_hdus(idx, t, spec):
            entry = idx.entries[i]
            idx.check_data(entry)  # a truncated HDU is unreadable (exit 3), not "OK"
            header = idx.header_view(entry)
            st = checksum_status(buf, entry, header)
            out.append({"file": t.shown, "hdu": i, "name": entry.display_name,
                        "ok": bool(st["ok"]), "status": st["status"], "datastatus": st["datastatus"],
                        "hdustatus": st["hdustatus"],
                        "message": _checksum_message(st, header, buf, entry)})
        idx.source.check()
        return out

    items = targets(input_paths(args))
    done = batch.run(items, one, name=lambda t: t.shown, workers=jobs(args.file_jobs, len(items)),
                     progress=progress_enabled(args) and len(items) > 1)
    records = [r for _, rs in done for r in rs]
    if args.format == "text":
        for r in records:
            print(f"{r['file']}[{r['hdu']}] {r['name']}: {r['message']}")
    else:
        emit(records, args.format)
    if any(not r["ok"] for r in records):
        return max(EXIT_CHECKSUM, batch.code)
    return batch.code


def _checksum_message(st: dict, header: Any, buf: Any, entry: Any) -> str:
    """What ``verify`` found in one HDU, in words: which card failed, and what it means."""
    from ..fits.layout import padded
    from ..writing.checksum import ones_sum

    data, hdu = st["datastatus"], st["hdustatus"]
    if data == 0 and hdu == 0:
        return "OK (no CHECKSUM or DATASUM card)"
    if st["ok"]:
        if data and hdu:
            return "OK (CHECKSUM and DATASUM verify)"
        return "OK (DATASUM verifies; no CHECKSUM card)" if data else \
            "OK (CHECKSUM verifies; no DATASUM card)"
    problems = []
    if data == -1:
        end = min(len(buf), entry.data_offset + padded(entry.data_size))
        actual = ones_sum(buf[entry.data_offset:end])
        problems.append(f"DATASUM {str(header.get('DATASUM')).strip()!r} does not match the "
                        f"data (their sum is {actual}): the data changed after it was written")
    if hdu == -1:
        if data == 1:
            cause = "the header changed after it was written (DATASUM verifies)"
        elif data == -1:
            cause = "the data changed"
        else:
            cause = "the header or the data changed after it was written (no DATASUM to tell which)"
        problems.append(f"CHECKSUM {str(header.get('CHECKSUM')).strip()!r} does not verify: {cause}")
    return "FAIL: " + "; ".join(problems)


def _typed(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def cmd_setkey(args: argparse.Namespace) -> int:
    """Set, rename or delete keywords in one or more HDUs of each file."""
    from ..errors import KeywordNotFoundError
    from ..fits.hdu_index import get_index
    from ..writing.atomic import atomic_output
    from ..writing.header_edit import update_header

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
    paths = input_paths(args, "inputs")
    if args.out and args.out_dir:
        raise UsageError("give -o/--out or --out-dir, not both")
    if args.out and len(paths) != 1:
        raise UsageError("-o/--out takes one input; use --out-dir for several")
    items = targets(paths)
    outputs: dict[str, str] = {}
    if args.out or args.out_dir:
        outputs = {t.shown: args.out or os.path.join(args.out_dir, os.path.basename(t.path))
                   for t in items}
        if any(o == "-" for o in outputs.values()):
            raise UsageError("FITS output cannot go to stdout (-): give a file name")
        check_outputs(list(outputs.values()), args.overwrite)
    if args.hdu in (None, ""):
        spec: list[Any] | None = [0]
    elif args.hdu.strip().lower() == "all":
        spec = None
    else:
        spec = hdus(args.hdu)
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)

    deleted = {d.upper() for d in args.delete or ()}

    def check(t: Target, index: Any, h: int) -> None:
        """Refuse the whole edit before any byte changes: a keyword to delete or rename that is
        missing, or a rename onto a keyword that exists (astropy refuses it: it hides a card)."""
        header = index.header_view(index.entries[h])
        for key in list(args.delete or ()) + list(rename):
            if key not in header:
                raise UsageError(f"{t.shown}[{h}]: missing keyword {key}")
        for old, new in rename.items():
            if new.upper() != old.upper() and new in header and new.upper() not in deleted:
                raise UsageError(f"{t.shown}[{h}]: cannot rename {old} to {new}: {new} exists "
                                 f"(add --delete {new} to replace it)")

    def edit(t: Target, path: str, h: int) -> None:
        try:
            update_header(path, h, set={args.keyword: _typed(args.value)} if args.keyword else None,
                          delete=args.delete or (), rename=rename)
        except KeywordNotFoundError as exc:
            raise UsageError(f"{t.shown}[{h}]: {exc.args[0] if exc.args else exc}") from None
        except ValueError as exc:
            raise UsageError(f"{t.shown}[{h}]: {exc}") from None

    def one(t: Target) -> None:
        index = get_index(t.path)  # a non-FITS input fails before anything is copied or edited
        # a path suffix names the HDU itself; otherwise -e (None: every HDU)
        wanted = select_hdus(index, t, None if t.hdu is not None else spec)
        for h in wanted:
            check(t, index, h)
        dest = outputs.get(t.shown, t.path)
        if dest == t.path:
            for h in wanted:
                edit(t, dest, h)
            return
        # a copy is edited under the writers' temporary name and appears whole, or not at all
        # (a .gz output is compressed once the edits are done)
        with atomic_output(dest) as sink, open(t.path, "rb") as src:
            shutil.copyfileobj(src, sink.fh)
            sink.fh.flush()
            for h in wanted:
                edit(t, sink.path, h)

    batch = Batch("setkey")
    batch.run(items, one, name=lambda t: t.shown, workers=jobs(args.file_jobs, len(items)))
    return batch.code


def add_parsers(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Add the ``verify`` and ``setkey`` subcommands to ``sub`` and register them in ``commands``."""
    p = sub.add_parser("verify", help="check CHECKSUM/DATASUM of each HDU (exit 4 on failure)")
    common_options(p)
    file_jobs_option(p, "checked")
    progress_options(p)
    commands["verify"] = cmd_verify

    p = sub.add_parser("setkey", help="set, rename or delete header keywords (in place or copies)")
    p.add_argument("inputs", nargs="*", help="files, or @list files with one path per line")
    p.add_argument("--stdin", action="store_true", help="read paths from stdin, one per line")
    p.add_argument("-k", "--keyword", help="keyword to set (long names become HIERARCH)")
    p.add_argument("--value", help="value: 12 → int, 1.5 → float, anything else a string")
    p.add_argument("--rename", action="append", metavar="OLD=NEW")
    p.add_argument("--delete", action="append", metavar="KEY")
    p.add_argument("-e", "--hdu", default="0",
                   help="HDU indices/EXTNAMEs, comma-separated, or 'all' (default 0)")
    p.add_argument("-o", "--out", help="write the edited copy here instead of editing in place")
    p.add_argument("--out-dir", help="write edited copies into this directory")
    p.add_argument("--overwrite", action="store_true", help="replace existing -o/--out-dir outputs")
    file_jobs_option(p, "edited")
    commands["setkey"] = cmd_setkey
