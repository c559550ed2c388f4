"""The registry of named real models where the earlier layout kept it (``register(RealModel(...))`` in
``attnlab.hooks.fetch``); its home is ``attnlab.loading.fetch``."""

from attnlab.loading.fetch import MODELS, FetchError, Payload, RealModel, fetch, fetched, get, model_file, register

__all__ = ["MODELS", "FetchError", "Payload", "RealModel", "fetch", "fetched", "get", "model_file", "register"]
