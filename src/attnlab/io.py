"""Atomic file output: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from attnlab.errors import ArgumentError, ArgumentTypeError, Error, MissingFileError, UnknownNameError


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then rename it over ``path``.

    The file is fsynced before the rename and the directory after it, so that after a crash or power
    loss ``path`` holds the old content or all of the new, never a renamed but empty file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        # mkstemp makes the file private (0600); the result should get the mode any new file would.
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else _new_file_mode())
        fd = os.open(tmp, os.O_RDWR)  # RDWR: Windows cannot flush a read-only handle
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename == tmp:
            # the user knows the path they asked for, not the hidden temporary file beside it
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    fsync_dir(path.parent)
    return path


def _new_file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a directory's entries (new files, a rename) survive a power loss."""
    if os.name == "nt":  # Windows cannot open a directory to flush it
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_dir(parent: str | os.PathLike, prefix: str) -> Path:
    """A new hidden folder ``parent/<prefix><pid>-XXXXXXXX``: the pid lets a later run tell the leftovers
    of a killed process (``remove_stale``) from a folder another live process is still writing."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))


def swap_in(tmp: str | os.PathLike, final: str | os.PathLike) -> None:
    """Rename the complete folder ``tmp`` to ``final``; an existing ``final`` moves aside first (a folder cannot be
    renamed over a non-empty one) and is deleted only once the new one is in place, so a failure at any point
    leaves the old folder or the new one (a crash between the two renames: the old one at
    ``.<name>.old-XXXXXXXX``)."""
    tmp, final = Path(tmp), Path(final)
    old = final.with_name(f".{final.name}.old-{secrets.token_hex(4)}") if final.exists() else None
    if old is not None:
        os.rename(final, old)
    try:
        os.rename(tmp, final)
    except BaseException:
        if old is not None:
            os.rename(old, final)
        raise
    fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


LOCK = ".attnlab.lock"  # holds the pid of the run writing into a folder


@contextlib.contextmanager
def locked(folder: str | os.PathLike) -> Iterator[Path]:
    """Hold ``folder`` (created if need be) for this process while the context is open: another run asking for
    it meanwhile is refused (OutputError) in one line naming the holder's pid, so that two runs never mix their
    files or clean up each other's. A lock whose process is gone (killed) is taken over; this process asking
    again (a study that runs a command into its folder) goes on under its first hold."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    mine = folder / f"{LOCK}.{os.getpid()}"
    mine.write_text(str(os.getpid()), encoding="utf-8")
    try:
        for _ in range(3):
            try:
                os.link(mine, path)  # appears at once with the pid in it, or not at all
            except FileExistsError:
                try:
                    holder = int(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    holder = -1
                if holder == os.getpid():
                    yield folder
                    return
                if holder > 0 and _alive(holder):
                    raise OutputError(
                        f"{folder} is in use by another attnlab run (pid {holder}); wait for it to "
                        "finish, or choose another --out"
                    ) from None
                path.unlink(missing_ok=True)  # its process is gone
                continue
            try:
                yield folder
            finally:
                path.unlink(missing_ok=True)
            return
        raise OutputError(f"{folder}: could not take its lock {LOCK}; choose another --out")
    finally:
        mine.unlink(missing_ok=True)


def remove_stale(parent: str | os.PathLike, marker: str, pattern: str | None = None) -> list[Path]:
    """Remove ``parent``'s entries matching ``pattern`` (default ``<marker>*``) whose name holds
    ``<marker><pid>-`` for a process that is gone: a run killed by SIGKILL or SIGTERM leaves its hidden
    temporary folder behind. An entry without a readable pid predates the pid in the name and is stale too.
    Returns what was removed."""
    parent = Path(parent)
    if not parent.is_dir():
        return []
    removed = []
    for entry in parent.glob(pattern or f"{marker}*"):
        pid = entry.name.split(marker, 1)[-1].split("-", 1)[0]
        if pid.isdigit() and (int(pid) == os.getpid() or _alive(int(pid))):
            continue
        remove(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def remove(path: Path, *, ignore_errors: bool = False) -> None:
    """Delete a file, a link (never what it points to) or a whole folder."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=ignore_errors)
    else:
        path.unlink(missing_ok=True)


class OutputError(Error, ValueError):
    """An output path holds files that attnlab did not write for this configuration."""


def check_writable(out: str | os.PathLike) -> None:
    """Fail early on an output path whose folder cannot be written, without creating anything: a run
    refused later (a bad --model, say) must not leave an empty folder behind."""
    probe = Path(out).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise OutputError(f"cannot write to output folder {str(out)!r}: {str(probe)!r} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        raise OutputError(f"cannot write to output folder {str(out)!r}: {exc.strerror or exc}") from None


def check_output(out: str | os.PathLike, config: dict[str, Any], *, overwrite: bool, what: str) -> None:
    """Refuse, before any work, a run that would replace files in ``out`` that attnlab did not write for
    this same configuration: ``out`` may be new, empty (hidden leftovers aside), or hold a finished run whose
    ``config.json`` agrees with ``config`` on every key of ``config``. ``overwrite`` lifts the refusal.
    ``what`` names the command, for the message."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file; pass a folder")
    if overwrite or not out.is_dir():
        return
    config = json.loads(json.dumps(config, default=str))
    try:
        stored = json.loads((out / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stored = None
    if isinstance(stored, dict):
        differ = [k for k in config if stored.get(k) != config[k]]
        if differ:
            shown = "; ".join(f"{k}: {stored.get(k)!r} there, {config[k]!r} now" for k in differ[:3])
            raise OutputError(
                f"{out} holds the output of {what} with other settings ({shown}); pass --overwrite "
                "to replace it, or choose another --out"
            )
        return
    visible = sorted(e.name for e in out.iterdir() if not e.name.startswith("."))
    if visible:
        more = ", ..." if len(visible) > 4 else ""
        raise OutputError(
            f"{out} holds files that {what} did not write ({', '.join(visible[:4])}{more}); pass "
            "--overwrite to write into it anyway, or choose another --out"
        )


def write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_json(path: str | os.PathLike, payload: Any) -> Path:
    return write_text(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


TENSOR_SUFFIXES = (".npy", ".safetensors", ".pt", ".pth")
PARQUET_META_KEY = b"attnlab"  # where attnlab's Parquet tables keep their run config (as JSON)


def load_tensor(path: str | os.PathLike, key: str | None = None):
    """A tensor from a .npy, .safetensors or .pt/.pth file (never unpickling arbitrary objects).

    A file holding several tensors needs ``key``; the error lists the names it holds.
    """
    import numpy as np
    import torch

    path = Path(path)
    if path.suffix not in TENSOR_SUFFIXES:
        raise ArgumentError(f"{path}: unknown tensor file type {path.suffix!r}; allowed: {', '.join(TENSOR_SUFFIXES)}")
    if not path.is_file():
        raise MissingFileError(f"{path}: no such file")
    if path.suffix == ".npy" and key is not None:  # one unnamed array: silence would hide the mistaken key
        raise ArgumentError(
            f"{path}: an .npy file holds one unnamed array, so --key {key!r} names nothing; drop "
            "--key, or pass the .safetensors or .pt file that holds it"
        )
    try:
        if path.suffix == ".npy":
            return torch.from_numpy(np.load(path, allow_pickle=False))
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            found = load_file(path)
        else:
            found = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # each reader has its own errors (SafetensorError, UnpicklingError, zipfile's...)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if path.suffix in (".pt", ".pth") and "weights_only" in str(exc):
            reason = "it holds Python objects beyond tensors, which attnlab never unpickles"
        raise ArgumentError(f"{path}: not a readable {path.suffix} tensor file ({reason[:200]})") from None
    if isinstance(found, torch.Tensor):
        found = {"": found}
    if not isinstance(found, dict) or not all(isinstance(v, torch.Tensor) for v in found.values()):
        raise ArgumentTypeError(f"{path}: expected a tensor or a dict of tensors, got {type(found).__name__}")
    if key is None:
        if len(found) != 1:
            raise ArgumentError(f"{path} holds {len(found)} tensors {sorted(found)}; choose one with --key")
        return next(iter(found.values()))
    if key not in found:
        raise UnknownNameError(f"{path} has no tensor {key!r}; it holds {sorted(found)}")
    return found[key]


def write_parquet(path: str | os.PathLike, frame, metadata: dict | None = None) -> Path:
    """Write a DataFrame as Parquet atomically, with ``metadata`` as JSON under the key b"attnlab"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    if metadata is not None:
        table = table.replace_schema_metadata(
            {**(table.schema.metadata or {}), PARQUET_META_KEY: json.dumps(metadata, default=str).encode()}
        )
    return atomic_write(path, lambda tmp: pq.write_table(table, tmp))


def to_markdown(table, digits: int = 4) -> str:
    """A GitHub Markdown table (written by hand: pandas needs the optional tabulate for this)."""
    import numpy as np
    import pandas as pd

    def cell(v) -> str:
        if isinstance(v, (bool, np.bool_)):
            return "yes" if v else "no"
        if isinstance(v, (float, np.floating)):
            return "-" if np.isnan(v) else f"{v:.{digits}f}"
        return str(v).replace("|", "\\|")

    numeric = [pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in table.dtypes]
    head = "| " + " | ".join(map(str, table.columns)) + " |"
    rule = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([head, rule, *body]) + "\n"


def write_table(stem: str | os.PathLike, table) -> dict[str, Path]:
    """Write a DataFrame as ``stem.csv`` and ``stem.md``, each atomically; returns {"csv": .., "md": ..}."""
    stem = Path(stem)
    return {
        "csv": atomic_write(stem.with_suffix(".csv"), lambda tmp: table.to_csv(tmp, index=False)),
        "md": write_text(stem.with_suffix(".md"), to_markdown(table)),
    }
