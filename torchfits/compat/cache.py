"""Cache controls (torchfits 1.x API, docs/compatibility.md) over the one real cache: the HDU index.

Pixels and rows are read from the file map on every call, so there is no data cache to go
stale; the configuration objects keep the 1.x surface as policy hints.
"""
from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from .._kernels import _image
from ..fits.hdu_index import cache_stats, clear_index_cache
from ..fits.sources.block_cache import cache_root, clear_remote, remote_cache_root, usage

__all__ = [
    "CacheConfig",
    "CacheManager",
    "cache_root",
    "remote_cache_root",
    "remote_cache_usage",
    "sample_cache_root",
    "clear",
    "clear_cache",
    "clear_all_caches",
    "configure_cache",
    "configure_for_environment",
    "get_cache_manager",
    "get_cache_stats",
    "get_cache_performance",
    "clear_file_cache",
    "get_optimal_cache_config",
    "optimize_for_dataset",
    "stats",
]


def sample_cache_root() -> Path:
    env = os.environ.get("TORCHFITS_SAMPLE_CACHE")
    return Path(env) if env else cache_root() / "samples"


_HPC_VARS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "SGE_JOB_ID")


def _environment() -> str:
    if any(os.environ.get(v) for v in _HPC_VARS):
        return "hpc"
    if any(os.environ.get(v) for v in ("AWS_EXECUTION_ENV", "GOOGLE_CLOUD_PROJECT", "AZURE_HTTP_USER_AGENT")):
        return "cloud"
    if os.environ.get("CUDA_VISIBLE_DEVICES"):
        return "gpu"
    return "local"


def _total_memory_mb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError, AttributeError):  # pragma: no cover - platform dependent
        return 8192


@dataclass
class CacheConfig:
    """Cache policy hints (the engine keeps only a metadata cache; these guide prefetching)."""

    max_files: int = 100
    max_memory_mb: int = 1024
    disk_cache_gb: float = 10
    prefetch_enabled: bool = True

    def copy(self) -> CacheConfig:
        return replace(self)

    @classmethod
    def for_environment(cls) -> CacheConfig:
        return _config_for(_environment()).copy()


@cache
def _config_for(environment: str) -> CacheConfig:
    mem = _total_memory_mb()
    if environment == "hpc":
        return CacheConfig(max_files=1000, max_memory_mb=min(8192, mem // 5), disk_cache_gb=50,
                           prefetch_enabled=True)
    if environment == "cloud":
        return CacheConfig(max_files=500, max_memory_mb=min(4096, mem // 8), disk_cache_gb=20,
                           prefetch_enabled=True)
    if environment == "gpu":
        return CacheConfig(max_files=200, max_memory_mb=min(4096, mem // 8), disk_cache_gb=10,
                           prefetch_enabled=True)
    return CacheConfig(max_files=100, max_memory_mb=min(2048, mem // 10), disk_cache_gb=5,
                       prefetch_enabled=False)


class CacheManager:
    """Holds the cache policy and reports the metadata cache's statistics."""

    def __init__(self, config: CacheConfig | None = None) -> None:
        self.config = config if config is not None else CacheConfig.for_environment()

    def get_stats(self) -> dict[str, Any]:
        return get_cache_stats()

    def clear(self) -> None:
        clear_cache()

    def optimize_for_dataset(self, paths: Iterable[Any], avg_file_size_mb: float = 10.0) -> None:
        n = len(list(paths))
        self.config.max_files = max(self.config.max_files, min(n, 10_000))
        self.config.prefetch_enabled = n > 1 and avg_file_size_mb * n > self.config.max_memory_mb / 4

    def configure_cpp_cache(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn("configure_cpp_cache is deprecated and has no effect", DeprecationWarning,
                      stacklevel=2)


_manager: CacheManager | None = None


def get_cache_manager() -> CacheManager:
    global _manager
    if _manager is None:
        _manager = CacheManager()
    return _manager


def configure_for_environment() -> CacheConfig:
    get_cache_manager().config = CacheConfig.for_environment()
    return get_cache_manager().config


def configure_cache(max_files: int, max_memory_mb: int, disk_cache_gb: float = 10) -> None:
    """Deprecated: the engine sizes its metadata cache itself."""
    warnings.warn("configure_cache is deprecated and has no effect", DeprecationWarning, stacklevel=2)


def get_optimal_cache_config() -> dict[str, Any]:
    env = _environment()
    return {**asdict(_config_for(env)), "environment": env}


def optimize_for_dataset(paths: Iterable[Any], avg_file_size_mb: float = 10.0) -> None:
    get_cache_manager().optimize_for_dataset(paths, avg_file_size_mb)


def get_cache_performance() -> dict[str, Any]:
    """``cache_size``, ``hit_rate``, ``miss_rate``, ``total_requests``, ``hits``, ``misses``."""
    s = cache_stats()
    total = s["hits"] + s["misses"]
    return {
        "cache_size": s["cache_size"],
        "hit_rate": s["hits"] / total if total else 0.0,
        "miss_rate": s["misses"] / total if total else 0.0,
        "total_requests": total,
        "hits": s["hits"],
        "misses": s["misses"],
    }


def get_cache_stats() -> dict[str, Any]:
    perf = get_cache_performance()
    return {
        "hits": perf["hits"],
        "misses": perf["misses"],
        "io_hits": perf["hits"],
        "io_misses": perf["misses"],
        "io_total_requests": perf["total_requests"],
        "cpp_cache_size": 0,
        "config": asdict(get_cache_manager().config),
        "hit_rate": perf["hit_rate"],
    }


def stats() -> dict[str, Any]:
    return {**get_cache_stats(), "io": get_cache_performance()}


def _release_image_memory() -> None:
    _image.release_cutout_memory()
    _image.release_output_memory()


def clear_file_cache(*, data: bool = True, handles: bool = True, meta: bool = True,
                     hdu_types: bool = True, stats: bool = True, cpp: bool = True,
                     cpp_module: Any = None) -> None:
    """Clear in-process caches selectively (``handles`` and ``cpp`` are accepted and ignored);
    ``data`` also frees the memory kept from dropped cutouts and image outputs for reuse."""
    clear_index_cache(stats=stats, entries=meta or hdu_types or data)
    if data:
        _release_image_memory()


def remote_cache_usage() -> dict:
    """The block cache of remote reads: ``{"path", "files", "bytes"}`` (bytes stored on disk)."""
    return usage()


def clear_cache(*, disk: bool = False) -> None:
    """Clear in-process caches; ``disk=True`` also deletes ``cache_root()`` and the remote block
    cache (``remote_cache_root()``, which ``TORCHFITS_REMOTE_CACHE`` may put elsewhere)."""
    clear_index_cache()
    _release_image_memory()
    if disk:
        clear_remote()
        shutil.rmtree(cache_root(), ignore_errors=True)


clear = clear_cache


def clear_all_caches() -> None:
    """In-process caches and the on-disk cache tree."""
    clear_cache(disk=True)
