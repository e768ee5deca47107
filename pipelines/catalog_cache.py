"""The on-disk cache of VarioPath's offline catalogs (paper 000, Section 4.1): the file side of
``collectives/alltoallv/catalog.py``, which builds catalogs as plain data and touches no files.

A catalog is stored as ``<cache_dir>/<topology hash>-<algorithm version>-<search parameters>.json``
(``Catalog.to_json``). The algorithm version is a hash of catalog.py's source, so a catalog cached
by an earlier version of the search is never reused (stale caches once gave 24/32-GPU clusters
catalogs without the layer-seeded families, and VarioPath then emitted hundreds of tiny
activations). ``stats["cache"]`` says what a run found: ``hit``, ``miss`` (built and written) or
``off`` (no cache directory). A file that does not parse as a catalog is rebuilt and overwritten.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from collectives.alltoallv import catalog as catalog_module
from collectives.alltoallv.catalog import Catalog, build_catalog, catalog_key


@functools.lru_cache(maxsize=1)
def algorithm_version() -> str:
    """Hash of the catalog search's source (collectives/alltoallv/catalog.py): part of the file name."""
    return hashlib.sha256(Path(catalog_module.__file__).read_bytes()).hexdigest()[:12]


def catalog_path(cache_dir: str | Path, topology, **params) -> Path:
    thash, _, rest = catalog_key(topology, **params).partition("-")
    return Path(cache_dir) / f"{thash}-{algorithm_version()}-{rest}.json"


def read_catalog(path: Path) -> Catalog | None:
    """The catalog stored at ``path``, or None (absent, or not a catalog of this format)."""
    if not path.exists():
        return None
    try:
        cat = Catalog.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError, json.JSONDecodeError):
        return None  # a stale or foreign file: rebuild and overwrite
    cat.stats["cache"] = "hit"
    return cat


def write_catalog(path: Path, cat: Catalog) -> None:
    """Writes atomically (a temporary file, then a rename), so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cat.to_json()))
    tmp.replace(path)


def cached_catalog(topology, *, cache_dir: str | Path, **params) -> Catalog:
    """``build_catalog(topology, **params)``, read from ``cache_dir`` when stored there, else built and stored."""
    path = catalog_path(cache_dir, topology, **params)
    cat = read_catalog(path)
    if cat is not None:
        return cat
    cat = build_catalog(topology, **params)
    cat.stats["cache"] = "miss"
    write_catalog(path, cat)
    return cat


def catalog_source(cache_dir: str | Path | None):
    """What the scheduler factories take as ``catalogs``: a file-cached builder for ``cache_dir``,
    or None (built in memory, ``cache: off``) when there is no cache directory."""
    return None if cache_dir is None else functools.partial(cached_catalog, cache_dir=cache_dir)
