"""The fuzzing harness: a seed corpus, a worker that reads files in a child interpreter under an
address-space limit, and a supervisor that detects crashes, hangs and over-allocations.

Contract checked for every mutated file and every read: the read returns data or raises a
``FitsError``; anything else is a finding:

- ``crash``: the child died of a signal (SIGSEGV, SIGBUS, ...);
- ``hang``: one read took longer than the per-read timeout;
- ``memory``: ``MemoryError`` under the address-space limit (an allocation the file's bytes
  cannot justify);
- ``bare``: any exception that is not a ``FitsError`` (no file/HDU context).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .mutators import card_lie_sweep, mutate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEMORY_HEADROOM = 1 << 30  # bytes of address space a read may add to the worker's baseline


# -- seed corpus -------------------------------------------------------------------------------
def build_corpus(directory: str) -> list[str]:
    """Write small valid FITS files of every kind the readers handle; returns their paths."""
    from astropy.io import fits

    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(7)
    out = []

    def save(name: str, hdus: list) -> None:
        path = os.path.join(directory, name)
        fits.HDUList(hdus).writeto(path, overwrite=True)
        out.append(path)

    save("int16_scaled.fits", [fits.PrimaryHDU(rng.integers(-500, 500, (20, 30)).astype(np.int16))])
    with fits.open(out[-1], mode="update") as hl:
        hl[0].header["BSCALE"] = 0.5
        hl[0].header["BZERO"] = 3.0
        hl[0].header["BLANK"] = -7
    save("uint8.fits", [fits.PrimaryHDU(rng.integers(0, 255, (16, 16)).astype(np.uint8))])
    save("mef.fits", [fits.PrimaryHDU(),
                      fits.ImageHDU(rng.standard_normal((8, 9, 10)).astype(np.float32), name="CUBE"),
                      fits.ImageHDU(rng.integers(0, 2**40, (5, 5)).astype(np.int64), name="I64"),
                      fits.ImageHDU(rng.integers(0, 60000, (6, 7)).astype(np.uint16), name="U16")])
    cols = [
        fits.Column(name="ID", format="K", array=np.arange(40)),
        fits.Column(name="FLUX", format="E", array=rng.standard_normal(40).astype(np.float32)),
        fits.Column(name="VEC", format="3D", array=rng.standard_normal((40, 3))),
        fits.Column(name="MAT", format="6I", dim="(3,2)",
                    array=rng.integers(0, 99, (40, 2, 3)).astype(np.int16)),
        fits.Column(name="NAME", format="8A", array=np.array([f"s{i}" for i in range(40)])),
        fits.Column(name="FLAG", format="L", array=rng.random(40) > 0.5),
        fits.Column(name="BITS", format="12X", array=np.zeros((40, 12), bool)),
        fits.Column(name="NUL", format="I", null=-1,
                    array=np.where(np.arange(40) % 5, 3, -1).astype(np.int16)),
        fits.Column(name="VLA", format="PJ()",
                    array=np.array([np.arange(i % 6, dtype=np.int32) for i in range(40)], dtype=object)),
        fits.Column(name="QLA", format="QD()",
                    array=np.array([np.arange(i % 3, dtype=np.float64) for i in range(40)], dtype=object)),
        fits.Column(name="CPX", format="C", array=(np.arange(40) + 1j).astype(np.complex64)),
    ]
    save("bintable.fits", [fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols, name="CAT")])
    with fits.open(out[-1], mode="update") as hl:  # a scaled integer column, set as raw cards
        hl[1].header["TSCAL1"] = 0.25
        hl[1].header["TZERO1"] = 100.0
    acols = [fits.Column(name="A", format="I6", array=np.arange(20)),
             fits.Column(name="B", format="E12.4", array=np.linspace(0, 1, 20)),
             fits.Column(name="C", format="A5", array=np.array(["x"] * 20))]
    save("ascii.fits", [fits.PrimaryHDU(), fits.TableHDU.from_columns(acols, name="ASC")])
    img = rng.integers(0, 1000, (64, 64)).astype(np.int32)
    flt = (rng.standard_normal((64, 64)) * 10).astype(np.float32)
    for codec in ("RICE_1", "GZIP_1", "GZIP_2", "HCOMPRESS_1", "PLIO_1"):
        data = img if codec != "PLIO_1" else (img % 2).astype(np.int32)
        save(f"c_{codec.lower()}.fits",
             [fits.PrimaryHDU(), fits.CompImageHDU(data, compression_type=codec, tile_shape=(16, 64))])
    save("c_rice_float.fits", [fits.PrimaryHDU(), fits.CompImageHDU(
        flt, compression_type="RICE_1", tile_shape=(16, 64), quantize_level=16)])
    save("c_gzip_float_lossless.fits", [fits.PrimaryHDU(), fits.CompImageHDU(
        flt, compression_type="GZIP_2", tile_shape=(32, 32), quantize_level=0)])
    return out


def read_corpus_dirs(dirs: Iterable[str]) -> list[str]:
    paths = []
    for d in dirs:
        if os.path.isdir(d):
            paths += sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith((".fits", ".fit")))
    return paths


# -- the child worker --------------------------------------------------------------------------
WORKER = r'''
import json, os, sys, warnings
warnings.simplefilter("ignore")
import numpy as np
import torchfits
from torchfits.errors import FitsError
from tests.fuzz.reads import limit_address_space, ops

limit_address_space(int(sys.argv[2]))
progress = open(sys.argv[1], "a", buffering=1)
progress.write(json.dumps({"ready": True}) + "\n")

for line in sys.stdin:
    job = json.loads(line)
    path = job["path"]
    for name, op in ops(path):
        progress.write(json.dumps({"i": job["i"], "op": name, "start": True}) + "\n")
        try:
            torchfits.clear_file_cache()
            op()
            res = {"outcome": "ok"}
        except FitsError as exc:
            res = {"outcome": "fits_error", "type": type(exc).__name__}
        except MemoryError as exc:
            res = {"outcome": "memory", "type": "MemoryError", "msg": str(exc)[:300]}
        except RecursionError as exc:
            res = {"outcome": "bare", "type": "RecursionError", "msg": str(exc)[:300]}
        except Exception as exc:
            import traceback
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            res = {"outcome": "bare", "type": type(exc).__name__, "msg": str(exc)[:300],
                   "where": f"{os.path.basename(tb.filename)}:{tb.lineno}"}
        res.update(i=job["i"], op=name)
        progress.write(json.dumps(res) + "\n")
    progress.write(json.dumps({"i": job["i"], "done": True}) + "\n")
'''


@dataclass
class Finding:
    kind: str
    op: str
    detail: str
    notes: list
    data: bytes = field(repr=False)

    def signature(self) -> str:
        return f"{self.kind}:{self.op.split('[')[0]}:{self.detail.split(':')[0]}"


@dataclass
class Stats:
    files: int = 0
    reads: int = 0
    outcomes: dict = field(default_factory=dict)
    findings: list = field(default_factory=list)


class Supervisor:
    """Feeds mutated files to a worker, restarting it after a crash or a hang."""

    def __init__(self, workdir: str, read_timeout: float = 10.0,
                 memory_headroom: int = MEMORY_HEADROOM) -> None:
        self.workdir = workdir
        self.read_timeout = read_timeout
        self.memory_headroom = memory_headroom
        self.proc: subprocess.Popen | None = None
        self.progress_path = os.path.join(workdir, "progress.jsonl")
        self.offset = 0

    def _start(self) -> None:
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   TORCHFITS_THREADS="2")
        open(self.progress_path, "w").close()
        self.offset = 0
        self.stderr_path = os.path.join(self.workdir, "stderr.txt")
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", WORKER, self.progress_path, str(self.memory_headroom)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, text=True,
                env=env, cwd=ROOT)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if any(ev.get("ready") for ev in self._events()):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"fuzz worker failed to start: {self._stderr_tail()}")
            time.sleep(0.01)
        raise RuntimeError("fuzz worker did not start within 300 s")

    def _stderr_tail(self) -> str:
        try:
            with open(self.stderr_path) as fh:
                return fh.read()[-400:]
        except OSError:
            return ""

    def _reap(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            if self.proc.stdin:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
            self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except Exception:
                pass
            self._reap()

    def _events(self) -> list[dict]:
        with open(self.progress_path) as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        lines = chunk.split("\n")
        complete, rest = lines[:-1], lines[-1]
        self.offset += len(chunk) - len(rest)
        return [json.loads(line) for line in complete if line]

    def run_one(self, i: int, data: bytes, notes: list, stats: Stats) -> None:
        path = os.path.join(self.workdir, f"case{i % 2}.fits")
        with open(path, "wb") as fh:
            fh.write(data)
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps({"i": i, "path": path}) + "\n")
        self.proc.stdin.flush()
        stats.files += 1
        current = None
        last = time.monotonic()
        while True:
            for ev in self._events():
                last = time.monotonic()
                if ev.get("done"):
                    return
                if ev.get("start"):
                    current = ev["op"]
                    continue
                stats.reads += 1
                stats.outcomes[ev["outcome"]] = stats.outcomes.get(ev["outcome"], 0) + 1
                if ev["outcome"] in ("memory", "bare"):
                    detail = f"{ev['type']}: {ev.get('msg', '')} @ {ev.get('where', '')}"
                    stats.findings.append(Finding(ev["outcome"], ev["op"], detail, notes, data))
                current = None
            rc = self.proc.poll()
            if rc is not None:
                stats.reads += 1
                stats.outcomes["crash"] = stats.outcomes.get("crash", 0) + 1
                err = self._stderr_tail()
                stats.findings.append(Finding("crash", current or "?", f"rc={rc}: {err}", notes, data))
                self._reap()
                return
            if time.monotonic() - last > self.read_timeout:
                stats.reads += 1
                stats.outcomes["hang"] = stats.outcomes.get("hang", 0) + 1
                stats.findings.append(Finding("hang", current or "?", f"> {self.read_timeout}s",
                                              notes, data))
                self._reap()
                return
            time.sleep(0.002)


def campaign(seeds: list[str], *, budget_s: float, seed: int = 0, workdir: str | None = None,
             read_timeout: float = 10.0, max_rounds: int = 3, sweep: bool = False) -> Stats:
    """Mutate the seeds at random for ``budget_s`` seconds; returns the counts and findings.

    With ``sweep``, first every structural card of every seed takes every interesting value
    (`card_lie_sweep`), then random mutation fills the rest of the budget."""
    rng = random.Random(seed)
    originals = [Path(p).read_bytes() for p in seeds]
    stats = Stats()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        sup = Supervisor(tmp, read_timeout=read_timeout)
        deadline = time.monotonic() + budget_s
        i = 0
        try:
            if sweep:
                for original in originals:
                    for data, note in card_lie_sweep(original):
                        if time.monotonic() >= deadline:
                            break
                        sup.run_one(i, data, [note], stats)
                        i += 1
            while time.monotonic() < deadline:
                data, notes = mutate(rng.choice(originals), rng, rng.randint(1, max_rounds))
                sup.run_one(i, data, notes, stats)
                i += 1
        finally:
            sup.close()
    return stats


# -- the atheris engine ------------------------------------------------------------------------
def atheris_available() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def atheris_campaign(seeds: list[str], *, budget_s: float, seed: int = 0,
                     read_timeout: float = 10.0, workdir: str | None = None) -> Stats:
    """Coverage-guided fuzzing with atheris (libFuzzer) for ``budget_s`` seconds.

    ``tests/fuzz/atheris_target.py`` runs in a child process over a copy of the seeds (the
    corpus grows with every input that reaches new code). libFuzzer stops at the first input
    that breaks the contract and saves it; that input is replayed in the supervised worker,
    which classifies it as a finding (crash, hang, memory, bare), and fuzzing resumes from the
    grown corpus until the budget is spent.
    """
    stats = Stats()
    originals = [Path(p).read_bytes() for p in seeds]
    max_len = max(len(d) for d in originals)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        corpus = os.path.join(tmp, "corpus")
        artifacts = os.path.join(tmp, "artifacts")
        os.makedirs(corpus)
        os.makedirs(artifacts)
        for n, data in enumerate(originals):
            with open(os.path.join(corpus, f"seed{n:03d}.fits"), "wb") as fh:
                fh.write(data)
        counts_path = os.path.join(tmp, "counts.json")
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   TORCHFITS_THREADS="2", TORCHFITS_FUZZ_COUNTS=counts_path,
                   TORCHFITS_FUZZ_HEADROOM=str(MEMORY_HEADROOM))
        sup = Supervisor(os.path.join(tmp, "replay"), read_timeout=read_timeout)
        os.makedirs(sup.workdir)
        deadline = time.monotonic() + budget_s
        seen: set[str] = set()
        run = 0
        totals = {"files": 0, "reads": 0, "ok": 0, "fits_error": 0}
        try:
            while deadline - time.monotonic() > 5:
                remaining = int(deadline - time.monotonic())
                cmd = [sys.executable, "-m", "tests.fuzz.atheris_target",
                       f"-max_total_time={remaining}", f"-timeout={int(3 * read_timeout)}",
                       f"-seed={seed * 1000 + run + 1}", f"-max_len={max_len}",
                       "-rss_limit_mb=4096", f"-artifact_prefix={artifacts}/", corpus]
                log = os.path.join(tmp, f"libfuzzer{run}.log")
                with open(log, "w") as fh:
                    try:
                        subprocess.run(cmd, env=env, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                       timeout=remaining + 120)
                    except subprocess.TimeoutExpired:
                        pass
                run += 1
                if os.path.exists(counts_path):
                    with open(counts_path) as fh:
                        for k, v in json.load(fh).items():
                            totals[k] += v
                    os.remove(counts_path)
                new = sorted(set(os.listdir(artifacts)) - seen)
                seen.update(new)
                if not new and time.monotonic() < deadline - 5:
                    with open(log) as fh:
                        tail = fh.read()[-2000:]
                    raise RuntimeError(f"the atheris target ended without a finding:\n{tail}")
                for name in new:
                    data = Path(os.path.join(artifacts, name)).read_bytes()
                    before = len(stats.findings)
                    replay = Stats()
                    sup.run_one(len(seen), data, [f"atheris {name.split('-')[0]}"], replay)
                    stats.findings += replay.findings
                    if len(stats.findings) == before:
                        # Not reproduced under the supervisor (e.g. an RSS overrun): keep the
                        # libFuzzer verdict.
                        stats.findings.append(Finding(name.split("-")[0], "?", "libFuzzer " + name,
                                                      [f"atheris {name}"], data))
        finally:
            sup.close()
        stats.files = totals["files"]
        stats.reads = totals["reads"]
        stats.outcomes = {"ok": totals["ok"], "fits_error": totals["fits_error"],
                          "findings": len(stats.findings)}
    return stats
