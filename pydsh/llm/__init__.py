"""The model layer: vocabulary, the ``llm`` service, HTTP adapters, retry and keyless testing (spec 04)."""
