"""A checkpoint checked against the architecture its config describes before any weight is read into it.

transformers fills every weight a checkpoint lacks with random values and warns in a log that attnlab keeps
quiet; it divides by a head count of 0, allocates what a layer count of 10^9 asks for, and answers a field of
the wrong type with a traceback. Here, before it builds or converts anything: the config's numbers must be
finite, its sizes whole numbers in bounds and its heads must divide its width; the architecture is then built
on the meta device (no memory) and its tensors compared, by name and shape, with the checkpoint's headers
(safetensors, a .bin's pickle index, a GGUF's tensor table), never its data. A missing, unexpected or misshapen
tensor refuses the load with one LoadError line that names the file and the first few tensors.
"""

from __future__ import annotations

import contextlib
import functools
import math
import pickle
import re
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import torch

from attnlab.loading.common import LoadError, first_line, quiet_transformers, refusing
from attnlab.readback import ReadBackError, parse_object, read_record

# Widths, heads and vocabularies above any real model's and below what one allocation could hold.
SIZE_LIMIT = 2**20
# Blocks are built one by one even on the meta device, so a huge count takes minutes; no causal LM has 1,024.
LAYER_LIMIT = 1024
# Some architectures allocate a buffer as long as the context (position ids) that no checkpoint holds.
CONTEXT_LIMIT = 2**24
LIMITS = {
    "vocab_size": SIZE_LIMIT,
    "hidden_size": SIZE_LIMIT,
    "intermediate_size": SIZE_LIMIT,
    "num_hidden_layers": LAYER_LIMIT,
    "num_attention_heads": SIZE_LIMIT,
    "num_key_value_heads": SIZE_LIMIT,
    "head_dim": SIZE_LIMIT,
    "max_position_embeddings": CONTEXT_LIMIT,
}
ROPE_BASES = ("rope_theta", "rope_local_base_freq")
SHOWN = 3  # tensors a refusal names
BLOCK = re.compile(r"blk\.(\d+)\.")  # llama.cpp's name of every per-layer tensor


@dataclass(frozen=True)
class WrongShape:
    """A tensor whose shape in the checkpoint is not the one the architecture built from the config has."""

    name: str
    found: tuple[int, ...]
    needed: tuple[int, ...]


@dataclass(frozen=True)
class Mismatch:
    """How a checkpoint's tensors differ from its architecture's: names it lacks, names it has no place for,
    tensors of another shape; empty when it holds exactly the model."""

    missing: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()
    wrong_shapes: tuple[WrongShape, ...] = ()

    def refusal(self, where: str, arch: str) -> str | None:
        """The one-line reason to refuse the checkpoint at ``where``, or None when nothing differs."""
        if self.missing:
            return (
                f"{where}: {_some(self.missing)} of the {arch} its config describes "
                f"{'is' if len(self.missing) == 1 else 'are'} not in its weights; a checkpoint of another "
                "architecture or with tensors left out is refused, never filled with random values"
            )
        if self.wrong_shapes:
            first = self.wrong_shapes[0]
            more = f" (and {len(self.wrong_shapes) - 1} more)" if len(self.wrong_shapes) > 1 else ""
            return (
                f"{where}: tensor {first.name} has shape {list(first.found)} where the {arch} its config describes "
                f"needs {list(first.needed)}{more}"
            )
        if self.unexpected:
            return (
                f"{where}: its weights hold {_some(self.unexpected)} that the {arch} its config describes has no "
                "place for; a checkpoint of another architecture is refused"
            )
        return None


def _some(names: tuple[str, ...]) -> str:
    shown = ", ".join(names[:SHOWN])
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return f"{len(names)} tensor{'s' if len(names) > 1 else ''} ({shown}{more})"


# --- the config's numbers ---------------------------------------------------------------------------------------


def _numbers(value, path: str) -> Iterator[tuple[str, float]]:
    """Every number in a parsed config, with its dotted path (``rope_parameters.rope_theta``)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _numbers(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{path}[{index}]")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield path, value


def _sections(raw: Mapping) -> Iterator[tuple[Mapping, str | None]]:
    """The config and the language model's config nested in a multimodal one, each with its model_type."""
    yield raw, raw.get("model_type")
    text = raw.get("text_config")
    if isinstance(text, Mapping):
        yield text, text.get("model_type")


def _aliases(model_type) -> Mapping[str, str]:
    """The config's own names of the standard fields (GPT-2 calls hidden_size ``n_embd``)."""
    from transformers import CONFIG_MAPPING

    config_class = CONFIG_MAPPING.get(model_type) if isinstance(model_type, str) else None
    return getattr(config_class, "attribute_map", None) or {}


def check_numbers(raw: Mapping, where: str, labels: Mapping[str, str] | None = None) -> None:
    """Refuse (LoadError naming ``where``) a parsed config whose numbers transformers cannot build a model from:
    any number that is not finite, a rope base not above 0, a size (``LIMITS``) that is not a whole number from 1
    to its limit, heads that do not divide the width or KV heads that do not divide the heads. ``labels`` names a
    field as the file spells it (a GGUF key). Sizes a weight has are checked again against the weights."""
    labels = labels or {}
    for path, value in _numbers(raw, ""):
        field = labels.get(path, path)
        if not math.isfinite(value):
            raise LoadError(f"{where}: {field} is {value}; every number of a config must be finite")
        if path.rsplit(".", 1)[-1] in ROPE_BASES and value <= 0:
            raise LoadError(f"{where}: {field} is {value}; a rope base must be above 0")
    for section, model_type in _sections(raw):
        aliases = _aliases(model_type)
        sizes = {}
        for name, limit in LIMITS.items():
            key = aliases.get(name, name)
            value = section.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
                raise LoadError(
                    f"{where}: {labels.get(key, key)} is {value!r}; it must be a whole number from 1 to {limit:,}"
                )
            sizes[name] = value
        _check_divides(sizes, "num_attention_heads", "hidden_size", where, labels, aliases)
        _check_divides(sizes, "num_key_value_heads", "num_attention_heads", where, labels, aliases)
        _check_pad(section, sizes.get("vocab_size"), where, labels)


def _check_pad(section: Mapping, vocab: int | None, where: str, labels: Mapping) -> None:
    """The padding id names a row of the embedding (torch asserts it does, with a traceback, as it builds one)."""
    pad = section.get("pad_token_id")
    if vocab is not None and isinstance(pad, int) and not isinstance(pad, bool) and not -vocab <= pad < vocab:
        raise LoadError(
            f"{where}: {labels.get('pad_token_id', 'pad_token_id')} is {pad}; it must name one of the "
            f"{vocab} tokens of the vocabulary"
        )


def _check_divides(sizes: dict, part: str, whole: str, where: str, labels: Mapping, aliases: Mapping) -> None:
    if part in sizes and whole in sizes and sizes[whole] % sizes[part]:
        part_name, whole_name = (labels.get(aliases.get(n, n), aliases.get(n, n)) for n in (part, whole))
        raise LoadError(
            f"{where}: {whole_name} ({sizes[whole]}) is not a multiple of {part_name} ({sizes[part]}); "
            "a model splits the one evenly into the other"
        )


def read_config(folder: Path) -> dict:
    """config.json of a checkpoint folder, parsed, with its numbers checked (``check_numbers``)."""
    path = folder / "config.json"
    try:
        raw = parse_object(path.read_bytes(), path, allowed="a JSON object of config fields")
    except OSError as exc:
        raise LoadError(f"{path} is not a readable JSON file: {first_line(exc)}") from None
    except ReadBackError as exc:  # not UTF-8, not JSON, too deep, not an object: it names the file
        raise LoadError(str(exc)) from None
    check_numbers(raw, str(path))
    return raw


# --- the architecture -------------------------------------------------------------------------------------------


def meta_model(config, what: str, trust_remote_code: bool = False):
    """The causal LM ``config`` describes, built on the meta device: its tensors' names and shapes, no memory.
    ``what`` opens the LoadError of a config transformers cannot build one from."""
    from transformers import AutoModelForCausalLM

    with refusing(what), torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)


def _tied_groups(model) -> list[list[str]]:
    """The model's state_dict keys, grouped by the tensor they share: a tied output matrix is the embedding
    itself, so a checkpoint holds it under either name."""
    groups: dict[int, list[str]] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        groups.setdefault(id(tensor), []).append(name)
    return list(groups.values())


def _ignored(patterns: Iterable[str]) -> re.Pattern | None:
    patterns = list(patterns)
    return re.compile("|".join(f"({p})" for p in patterns)) if patterns else None


def _ignored_unexpected(model) -> re.Pattern | None:
    """The checkpoint keys transformers drops without a word: the model's own patterns and the rotary and
    position-id buffers that older checkpoints stored."""
    patterns = set(model._keys_to_ignore_on_load_unexpected or ())
    buffers = [name for name, _ in model.named_buffers()]
    if any(b.endswith("rotary_emb.inv_freq") for b in buffers):
        patterns.add(r"rotary_emb\.inv_freq")
    if any(b.endswith("position_ids") for b in buffers):
        patterns.add(r"(^|\.)position_ids$")
    return _ignored(patterns)


def compare(model, found: Mapping[str, tuple[int, ...]]) -> Mismatch:
    """How ``found`` (a checkpoint's tensor names and shapes) differs from ``model``'s state_dict. Each name is
    renamed as transformers renames it on load (a base-model prefix, the legacy names and fused experts of its
    conversion mapping); a tensor a conversion reshapes is checked by name only."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key

    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    with refusing(f"transformers has no loading rules for {type(model).__name__}"):
        mapping = get_model_conversion_mapping(model)
    renamings = [m for m in mapping if isinstance(m, WeightRenaming)]
    converters = [m for m in mapping if isinstance(m, WeightConverter)]
    prefix = model.base_model_prefix
    skip_unexpected = _ignored_unexpected(model)
    present, unexpected, wrong = set(), [], []
    for key, shape in found.items():
        name, converted = rename_source_key(key, renamings, converters, prefix, expected)
        if name not in expected and key in expected:
            name, converted = rename_source_key(key, [], [], prefix, expected)
        if name in expected:
            present.add(name)
            if converted is None and tuple(shape) != expected[name]:
                wrong.append(WrongShape(key, tuple(shape), expected[name]))
        elif skip_unexpected is None or not skip_unexpected.search(name):
            unexpected.append(key)
    skip_missing = _ignored(model._keys_to_ignore_on_load_missing or ())
    missing = [
        group[0]
        for group in _tied_groups(model)
        if present.isdisjoint(group) and (skip_missing is None or not skip_missing.search(group[0]))
    ]
    return Mismatch(tuple(missing), tuple(unexpected), tuple(wrong))


def from_loading_info(info: Mapping) -> Mismatch:
    """The Mismatch transformers itself reports after a load (``output_loading_info=True``)."""
    wrong = tuple(WrongShape(k, tuple(found), tuple(needed)) for k, found, needed in sorted(info["mismatched_keys"]))
    return Mismatch(tuple(sorted(info["missing_keys"])), tuple(sorted(info["unexpected_keys"])), wrong)


def check_loading_info(info: Mapping, where: str, arch: str) -> None:
    """Refuse a model transformers loaded with tensors missing, left over or of another shape: the check after
    the load, for what ``compare`` could not see before it (a quantized checkpoint, a conversion's tensors)."""
    reason = from_loading_info(info).refusal(where, arch)
    if reason is not None:
        raise LoadError(reason)


PROBE_TOKENS = 8


def check_finite(model, where: str | Path) -> None:
    """Refuse (LoadError) a model that computes NaN or inf: a weight that is not finite, named, or, with finite
    weights, logits of a short input that are not (a config number such as a norm's epsilon of 0 on a zero input).
    Every row such a model gives would be NaN, and an audit of them a table of zeros and dashes read as a result."""
    for name, tensor in model.named_parameters():
        if not bool(torch.isfinite(tensor).all()):
            raise LoadError(f"{where}: weight {name} holds NaN or inf; a model that computes NaN is not audited")
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    if vocab < 1:
        return
    device = next(model.parameters()).device
    ids = (torch.arange(PROBE_TOKENS, device=device) % vocab).unsqueeze(0)
    with torch.no_grad(), refusing(f"{where}: its model fails on a {PROBE_TOKENS}-token input"):
        logits = model(input_ids=ids).logits
    if not bool(torch.isfinite(logits).all()):
        raise LoadError(
            f"{where}: its weights are finite, yet it computes NaN or inf logits on a {PROBE_TOKENS}-token input "
            "(a number of its config, such as a norm epsilon, is not usable); a model that computes NaN is not audited"
        )


# --- a save_pretrained folder -----------------------------------------------------------------------------------


def weight_files(folder: Path) -> list[Path]:
    """The weight files transformers reads from ``folder``, in its order of preference: model.safetensors, the
    shards its index names, pytorch_model.bin, the shards its index names."""
    for single, index in (
        ("model.safetensors", "model.safetensors.index.json"),
        ("pytorch_model.bin", "pytorch_model.bin.index.json"),
    ):
        if (folder / single).is_file():
            return [folder / single]
        if (folder / index).is_file():
            return _shards(folder / index)
    raise LoadError(
        f"{folder} has neither model.safetensors nor pytorch_model.bin, nor an index of their shards; "
        "save the model there with save_pretrained"
    )


@dataclass(frozen=True)
class _ShardIndex:
    """A ``*.index.json`` as transformers' ``save_pretrained`` writes it: each tensor's shard file."""

    weight_map: dict[str, str]


def _shards(index: Path) -> list[Path]:
    try:
        found = read_record(index, _ShardIndex, allowed="a weight-shard index as save_pretrained writes it")
        names = sorted(set(found["weight_map"].values()))
    except ReadBackError as exc:  # not UTF-8 JSON, too deep, no weight_map of names: it names the file
        raise LoadError(str(exc)) from None
    except OSError as exc:
        raise LoadError(f"{index} is not a readable index of weight shards: {first_line(exc)}") from None
    shards = [index.parent / name for name in names if isinstance(name, str) and Path(name).name == name]
    absent = [p.name for p in shards if not p.is_file()]
    if len(shards) != len(names) or absent or not shards:
        raise LoadError(f"{index} names shards that are not files beside it: {', '.join(absent or map(str, names))}")
    return shards


def _safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    from safetensors import safe_open

    with refusing(f"{path} is not a readable safetensors file"), safe_open(path, framework="pt") as f:
        return {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}  # noqa: SIM118 (a handle, not a dict)


def _bin_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """A .bin's tensor names and shapes, mapped to the meta device: its pickle is read, never its data."""
    try:
        with refusing(f"{path} is not a readable PyTorch weight file"):
            state = torch.load(path, map_location="meta", weights_only=True, mmap=zipfile.is_zipfile(path))
    except pickle.UnpicklingError:
        raise LoadError(
            f"could not load a causal LM from {path.parent}: its weights hold Python objects beyond tensors, "
            "which are never unpickled"
        ) from None
    if not isinstance(state, dict):
        raise LoadError(f"{path} holds a {type(state).__name__}, not a state dict of named tensors")
    return {str(k): tuple(v.shape) for k, v in state.items() if isinstance(v, torch.Tensor)}


def checkpoint_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    """Every tensor name and shape in a folder's weight files, read from their headers."""
    shapes: dict[str, tuple[int, ...]] = {}
    for path in weight_files(folder):
        shapes.update(_safetensors_shapes(path) if path.suffix == ".safetensors" else _bin_shapes(path))
    return shapes


def check_folder(folder: Path, trust_remote_code: bool = False) -> None:
    """Refuse (LoadError) a save_pretrained folder whose config.json or weights do not describe one causal LM. A
    quantized checkpoint stores other tensors than the model it becomes: its weights are left to
    ``check_loading_info``."""
    from transformers import AutoConfig

    raw = read_config(folder)
    what = f"could not load a causal LM from {folder}"
    with quiet_transformers():
        with refusing(what):
            config = AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=trust_remote_code)
        if "quantization_config" in raw:
            return
        model = meta_model(config, what, trust_remote_code)
        reason = compare(model, checkpoint_shapes(folder)).refusal(str(folder), type(model).__name__)
    if reason is not None:
        raise LoadError(reason)


# --- a GGUF file ------------------------------------------------------------------------------------------------


def _field(reader, key: str):
    """A GGUF header field's value (a list for an array), or None when absent."""
    from transformers.modeling_gguf_pytorch_utils import read_field

    value = read_field(reader, key)
    return value[0] if len(value) == 1 else value or None


def _gguf_labels(arch: str) -> dict[str, str]:
    """The config fields transformers reads from a GGUF, each named by its key in the file."""
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    fields = GGUF_CONFIG_MAPPING.get(arch, {})
    return {name: f"{arch}.{key}" for key, name in fields.items() if isinstance(name, str)}


def _check_blocks(path: Path, reader, arch: str) -> None:
    """The header's block count must be the blocks whose tensors the file holds, numbered from 0."""
    count = _field(reader, f"{arch}.block_count")
    blocks = sorted({int(m[1]) for t in reader.tensors if (m := BLOCK.match(t.name))})
    if isinstance(count, int) and not isinstance(count, bool) and blocks != list(range(count)):
        held = f"blocks {blocks[0]}-{blocks[-1]} ({len(blocks)} of them)" if blocks else "no block's tensors"
        raise LoadError(f"{path}: its header says {arch}.block_count = {count} but it holds the tensors of {held}")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= LAYER_LIMIT:
        raise LoadError(f"{path}: {arch}.block_count is {count!r}; it must be a whole number from 1 to {LAYER_LIMIT:,}")


def gguf_config(path: Path, reader):
    """The transformers config of a GGUF file (as ``from_pretrained(gguf_file=...)`` derives it), after its
    header is checked: tensors present, block count equal to the blocks held, numbers in range."""
    import gguf
    from transformers import CONFIG_MAPPING
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    if not reader.tensors:
        raise LoadError(f"{path} holds no tensors (its header counts 0); a model without weights is refused")
    arch = _field(reader, "general.architecture")
    if not isinstance(arch, str):
        raise LoadError(f"{path} names no general.architecture in its header")
    _check_blocks(path, reader, arch)
    # transformers would parse the header again, seconds for a vocabulary of 50,000 tokens: it reads this one
    with refusing(f"{path} is not a GGUF checkpoint transformers can read"), quiet_transformers():
        with mock.patch.object(gguf, "GGUFReader", lambda *_: reader):
            raw = load_gguf_checkpoint(str(path), return_tensors=False)["config"]
    check_numbers(raw, str(path), _gguf_labels(arch))
    with refusing(f"{path} describes no config transformers can build"):
        return CONFIG_MAPPING[raw["model_type"]].from_dict(raw)


@contextlib.contextmanager
def shared_name_maps() -> Iterator[None]:
    """gguf's tensor-name map built once per (architecture, block count) while inside: transformers'
    ``get_gguf_hf_weights_map`` builds a new one for every submodule it recurses into, some 400 for a 30-layer
    model, which takes seconds."""
    import gguf

    with mock.patch.object(gguf, "get_tensor_name_map", functools.cache(gguf.get_tensor_name_map)):
        yield


def _dims(shape: Iterable[int]) -> list[int]:
    """A shape as a sorted list of its sizes above 1: a GGUF stores dimensions in reverse, and transformers
    transposes or unsqueezes some tensors (GPT-2's Conv1D, Mamba's conv) as it reads them."""
    return sorted(int(d) for d in shape if int(d) != 1)


def compare_gguf(model, reader, processor) -> Mismatch:
    """How a GGUF's tensors differ from ``model``'s, by the llama.cpp names transformers maps them to (its
    ``get_gguf_hf_weights_map``); shapes compared up to order for a tensor that loads as exactly one."""
    from transformers.modeling_gguf_pytorch_utils import get_gguf_hf_weights_map

    with refusing(f"transformers maps no GGUF tensors to {type(model).__name__}"), shared_name_maps():
        to_hf = get_gguf_hf_weights_map(model, processor)
    held = {t.name: t for t in reader.tensors}
    sources: dict[str, list[str]] = {}
    for gguf_name, hf_name in to_hf.items():
        sources.setdefault(hf_name, []).append(gguf_name)
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    missing, wrong = [], []
    for group in _tied_groups(model):
        if not any(n in held for name in group for n in sources.get(name, ())):
            missing.append(next((n for name in group for n in sources.get(name, ())), group[0]))
    for hf_name, names in sources.items():
        if len(names) == 1 and names[0] in held and hf_name in expected:
            shape = tuple(reversed([int(d) for d in held[names[0]].shape]))
            if _dims(shape) != _dims(expected[hf_name]):
                wrong.append(WrongShape(names[0], shape, expected[hf_name]))
    return Mismatch(tuple(missing), (), tuple(wrong))


def check_gguf(path: Path, reader) -> None:
    """Refuse (LoadError naming ``path``) a GGUF file whose header and tensor table do not describe one causal LM
    transformers can build: checked before a conversion, so nothing of it reaches the cache."""
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor

    config = gguf_config(path, reader)
    model = meta_model(config, f"{path} describes no causal LM transformers can build")
    arch = _field(reader, "general.architecture")
    processor = TENSOR_PROCESSORS.get(arch, TensorProcessor)(config=config.to_dict())
    reason = compare_gguf(model, reader, processor).refusal(str(path), type(model).__name__)
    if reason is not None:
        raise LoadError(reason)
