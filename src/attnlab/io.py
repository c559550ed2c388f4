"""Atomic file output: a reader sees the old file or the new one, never half of one; and the ownership of output
folders, one set of rules for every command: a folder is attnlab's only when its marker says so (``MARKER``), a run
holds its folder from its checks through its writes (``locked``), and nothing is written through a symbolic link
(``check_links``)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from attnlab.errors import ArgumentError, ArgumentTypeError, Error, MissingFileError, UnknownNameError
from attnlab.readback import ReadBackError, parse, parse_object


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then rename it over ``path``.

    The file is fsynced before the rename and the directory after it, so that after a crash or power
    loss ``path`` holds the old content or all of the new, never a renamed but empty file. A ``path`` that is a
    symbolic link, or lies below one inside a folder this process holds, is refused (``check_links``); inside a
    claimed folder, its entry is listed in the marker first (``record``).
    """
    path = Path(path)
    check_links(path)
    _note(path)
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
    of a killed process (``remove_stale``) from a folder another live process is still writing. A ``parent``
    that is a link inside a folder this process holds is refused (``check_links``)."""
    _check_folders(Path(parent))
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))


def swap_in(tmp: str | os.PathLike, final: str | os.PathLike) -> None:
    """Rename the complete folder ``tmp`` to ``final``; an existing ``final`` moves aside first (a folder cannot be
    renamed over a non-empty one) and is deleted only once the new one is in place, so a failure at any point
    leaves the old folder or the new one (a crash between the two renames: the old one at
    ``.<name>.old-XXXXXXXX``). A ``final`` that is a link is refused (``check_links``): renaming it aside would
    move the link, not the folder it names."""
    tmp, final = Path(tmp), Path(final)
    check_links(final)
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
    except (ProcessLookupError, OverflowError):  # gone, or no pid at all (a number too large for one)
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _started(pid: int) -> int | None:
    """When process ``pid`` started (Linux: /proc/<pid>/stat field 22, clock ticks after boot); None where the
    system does not say. With the pid it names one process: a pid is reused, a (pid, start) pair is not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces and brackets
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


def _command(pid: int) -> str | None:
    """Process ``pid``'s command line, lowercased (empty for a zombie); None where the system does not say."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").lower()
    except OSError:
        return None


def _running(pid: int, started: int | None) -> bool:
    """Whether a lock's holder still runs: ``pid`` is alive, started when the lock says (a pid the system gave
    to a later process is not the holder) and, where /proc shows its command line, a Python (attnlab) process:
    a lock naming any other live process (``echo 1 > .attnlab.lock``) must not hold a folder for good."""
    if pid <= 0 or not _alive(pid):  # 0 and below name process groups, never a run
        return False
    now = _started(pid)
    if started is not None and now is not None and now != started:
        return False
    command = _command(pid)
    return command is None or "attnlab" in command or "python" in command


LOCK = ".attnlab.lock"  # JSON: the pid and start time of the run writing into a folder


def _holder(path: Path) -> tuple[int, int | None] | None:
    """The (pid, start time) a lock file names; a bare pid (an older attnlab's lock, or one typed by hand) has
    no start time; None when unreadable (not UTF-8 JSON, too deep: ``readback.parse``), as a live run's lock never
    is (it appears with its content: ``_take``), so that such a file is taken over as stale."""
    try:
        found = parse(path.read_bytes(), path)
    except (OSError, ReadBackError):
        return None
    pid, started = (
        (_int(found.get("pid")), _int(found.get("started"))) if isinstance(found, dict) else (_int(found), None)
    )
    return None if pid is None else (pid, started)


def _int(value: Any) -> int | None:
    """``value`` when it is an int (a bool is not), else None: lock files are typed by hand, too."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _take(path: Path) -> bool:
    """Take the lock file ``path`` for this process: True once taken, False when this process holds it already.
    A live holder is refused (OutputError) in one line naming its pid; a stale one (``_running``) is taken over."""
    mine = path.with_name(f"{LOCK}.{os.getpid()}")
    mine.write_text(json.dumps({"pid": os.getpid(), "started": _started(os.getpid())}), encoding="utf-8")
    try:
        for _ in range(3):
            try:
                os.link(mine, path)  # appears at once with its content, or not at all
                return True
            except FileExistsError:
                holder = _holder(path)
                if holder is not None and holder[0] == os.getpid():
                    return False
                if holder is not None and _running(*holder):
                    raise OutputError(
                        f"{path.parent} is in use by another attnlab run (pid {holder[0]}); wait for it to "
                        "finish, or choose another --out"
                    ) from None
                path.unlink(missing_ok=True)  # its process is gone, or is not an attnlab run
    finally:
        mine.unlink(missing_ok=True)
    raise OutputError(f"{path.parent}: could not take its lock {LOCK}; choose another --out")


# The folders this process holds (``locked``), by absolute path, each with the names it held when taken: writes
# below one are checked for links and recorded in the nearest claimed folder's marker (``_note``).
_HELD: dict[str, frozenset[str]] = {}


def _held_root(path: Path) -> Path | None:
    """The deepest folder this process holds that contains ``path`` (or is it)."""
    target = os.path.abspath(path)
    roots = [r for r in _HELD if target == r or target.startswith(r.rstrip(os.sep) + os.sep)]
    return Path(max(roots, key=len)) if roots else None


@contextlib.contextmanager
def locked(folder: str | os.PathLike) -> Iterator[Path]:
    """Hold ``folder`` (created if need be) for this process while the context is open: another run asking for
    it meanwhile is refused (OutputError) in one line naming the holder's pid, so that two runs never mix their
    files or clean up each other's. A lock whose process is gone, or is not that run (``_running``), is taken
    over; this process asking again (a study that runs a command into its folder) goes on under its first hold.

    A new or empty folder is claimed for attnlab (``claim``) as it is taken; when the hold ends, a folder left
    empty loses its marker and, when the hold created it, is removed with the parents it created, so a run refused
    or failed after taking its folder leaves nothing behind."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"--out {folder} is a file; pass a folder")
    _check_folders(folder)
    made = _make(folder)
    try:
        took = _take(folder / LOCK)
    except BaseException:
        _tidy(folder, made)
        raise
    if not took:
        yield folder
        return
    key = os.path.abspath(folder)
    _HELD[key] = frozenset(os.listdir(folder))
    try:
        if listed(folder) is None and not _visible(folder):
            claim(folder)
        yield folder
    finally:
        del _HELD[key]
        if not _visible(folder):  # what the run listed is gone again (a failed run's staging): an empty folder
            (folder / MARKER).unlink(missing_ok=True)
        (folder / LOCK).unlink(missing_ok=True)
        _tidy(folder, made)


def _make(folder: Path) -> Path | None:
    """Create ``folder`` with its missing parents; returns the outermost one created (None: it existed)."""
    made, probe = None, Path(os.path.abspath(folder))
    while not os.path.lexists(probe) and probe != probe.parent:
        made, probe = probe, probe.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot write to output folder {str(folder)!r}: {exc.strerror or exc}") from None
    return made


def _tidy(folder: Path, made: Path | None) -> None:
    """Remove ``folder`` and its parents up to ``made`` (the outermost that ``_make`` created) while empty."""
    if made is None:
        return
    probe = Path(os.path.abspath(folder))
    while True:
        try:
            probe.rmdir()
        except FileNotFoundError:
            pass
        except OSError:  # something was written there: it stays
            return
        if probe == made or probe == probe.parent:
            return
        probe = probe.parent


def check_links(path: str | os.PathLike) -> None:
    """Refuse (OutputError) to write at ``path`` when it is a symbolic link, or when a folder below the one this
    process holds (``locked``) on the way to it is one: the write would land wherever the link points, outside the
    run's folder (a user's file, replaced). The held folder itself may be a link: --out is the user's choice."""
    path = Path(path)
    if path.is_symlink():
        raise OutputError(
            f"{path} is a symbolic link; attnlab never writes through one: remove it, or choose another --out"
        )
    _check_folders(path.parent)


def _check_folders(folder: Path) -> None:
    """``check_links`` for the folders from ``folder`` up to the held folder containing it (that one excepted)."""
    root = _held_root(folder)
    if root is None:
        return
    probe = Path(os.path.abspath(folder))
    while probe != root and probe != probe.parent:
        if probe.is_symlink():
            raise OutputError(
                f"{probe} is a symbolic link inside the output folder {root}; attnlab never writes through one: "
                "remove it, or choose another --out"
            )
        probe = probe.parent


# A folder is attnlab's when it holds this marker: written (atomically) before a run's first file, it lists the
# entries of the folder that runs wrote there, each before it was created, so a run killed at any point has
# listed all it made. --overwrite deletes only listed entries; a folder without it that holds visible files is a
# user's (or an older attnlab's) and is refused.
MARKER = ".attnlab-run.json"


def _visible(folder: Path) -> list[str]:
    """``folder``'s entries but the hidden ones (locks, the marker, temporary folders), sorted; [] if it is none."""
    return sorted(e.name for e in folder.iterdir() if not e.name.startswith(".")) if folder.is_dir() else []


def _plain(name: Any) -> bool:
    """Whether ``name`` names an entry of the folder itself: a hand-edited marker must never list ../x or a/b."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..", MARKER, LOCK)
        and os.sep not in name
        and (os.altsep is None or os.altsep not in name)
    )


def listed(folder: str | os.PathLike) -> list[str] | None:
    """The entries of ``folder`` that its marker lists as written by attnlab; None when no run claimed it. An
    unreadable marker still claims the folder but lists nothing: nothing is deleted on its word."""
    path = Path(folder) / MARKER
    if not path.is_file():
        return None
    try:
        names = parse_object(path.read_bytes(), path).get("wrote")
    except (OSError, ReadBackError):
        return []
    return sorted({n for n in names if _plain(n)}) if isinstance(names, list) else []


def _write_marker(folder: Path, names: list[str]) -> None:
    write_json(folder / MARKER, {"attnlab": "the entries of this folder that attnlab wrote", "wrote": sorted(names)})


def claim(folder: str | os.PathLike, *, adopt: Sequence[str] = ()) -> None:
    """Mark the existing ``folder`` as attnlab's (``MARKER``) unless it is already. ``adopt``: for an older
    attnlab's run (no marker) that the caller recognised by its config, the names of its entries a run goes on
    writing (a resumed run's checkpoints); those that exist are listed as attnlab's."""
    folder = Path(folder)
    if listed(folder) is None:
        _write_marker(folder, [n for n in adopt if _plain(n) and os.path.lexists(folder / n)])


def record(folder: str | os.PathLike, *names: str) -> None:
    """List ``names`` (entries of ``folder``) in its marker before they are created. A name that exists unlisted
    stays unlisted (a user's file, or an older attnlab's: not this run's to delete later), and a folder that no run
    claimed records nothing."""
    _add(Path(folder), [n for n in names if not os.path.lexists(Path(folder) / n)])


def _add(folder: Path, names: Sequence[str]) -> None:
    """List ``names`` in the marker of ``folder`` (if a run claimed it)."""
    held = listed(folder)
    if held is None:
        return
    new = [n for n in names if _plain(n) and n not in held]
    if new:
        _write_marker(folder, [*held, *new])


def _note(path: Path) -> None:
    """``record`` the entry of the nearest claimed folder that ``path`` is written into, when a folder this process
    holds contains it. Hidden folders on the way are temporary ones (``temp_dir``) whose entries are moved into
    the folder under their own names, so the entry recorded is the first visible part of the path. An entry of the
    held folder made since it was taken (a folder made, then written into) is this run's though it exists."""
    root = _held_root(path)
    if root is None:
        return
    target = Path(os.path.abspath(path))
    folder = target.parent
    while not (folder / MARKER).is_file():
        if folder == root or folder == folder.parent:
            return
        folder = folder.parent
    name = next((part for part in target.relative_to(folder).parts if not part.startswith(".")), None)
    if name is None:
        return
    if folder == root and name not in _HELD[str(root)]:
        _add(folder, [name])
    else:
        record(folder, name)


def clear(folder: str | os.PathLike, names: Sequence[str]) -> list[str]:
    """--overwrite: delete those of ``names`` (what a command writes) that ``folder``'s marker lists, and unlist
    them; every other entry stays, a user's above all. Returns the names deleted."""
    folder = Path(folder)
    held = listed(folder) or []
    gone = [n for n in held if n in names]
    for name in gone:
        remove(folder / name)
    if gone:
        _write_marker(folder, [n for n in held if n not in gone])
    return gone


def unclaimed_error(folder: str | os.PathLike, what: str) -> OutputError:
    """The refusal of a folder that holds visible files and no marker: they are a user's (or an older attnlab's,
    which cannot be told from a user's), and a run there could replace them or, on --overwrite, delete them."""
    names = _visible(Path(folder))
    more = ", ..." if len(names) > 4 else ""
    return OutputError(
        f"{folder} holds files that {what} did not write ({', '.join(names[:4])}{more}); attnlab writes only into a "
        f"new or empty folder or one it made (marked by {MARKER}), even with --overwrite: choose another --out, or "
        "move those files away"
    )


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
    """An output path attnlab must not write: it holds files attnlab did not write for this configuration, is a
    symbolic link, or is held by another run."""


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
    this same configuration: ``out`` may be new, empty (hidden leftovers aside), or attnlab's (``MARKER``) holding
    a finished run whose ``config.json`` agrees with ``config`` on every key of ``config``; ``overwrite`` lifts
    that last condition (files of the same name are replaced, others stay). A folder without the marker that holds
    visible files is refused even with ``overwrite`` (``unclaimed_error``): they may be a user's. Only a config.json
    agreeing with ``config`` tells an older attnlab's run of this configuration, which is claimed and rerun.
    ``what`` names the command, for the message."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file; pass a folder")
    if not out.is_dir():
        return
    config = json.loads(json.dumps(config, default=str))
    try:  # one that does not read back (``readback.parse_object``) tells no run of this configuration
        stored = parse_object((out / "config.json").read_bytes(), out / "config.json")
    except (OSError, ReadBackError):
        stored = None
    differ = [k for k in config if stored.get(k) != config[k]] if isinstance(stored, dict) else None
    if listed(out) is None and _visible(out):
        if not config or differ != []:
            raise unclaimed_error(out, what)
        claim(out)  # its files stay unlisted: a later --overwrite leaves them, as it cannot tell them from a user's
        return
    if overwrite:
        return
    if differ:
        shown = "; ".join(f"{k}: {stored.get(k)!r} there, {config[k]!r} now" for k in differ[:3])
        raise OutputError(
            f"{out} holds the output of {what} with other settings ({shown}); pass --overwrite "
            "to replace it, or choose another --out"
        )
    visible = _visible(out)
    if differ is None and visible:
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
