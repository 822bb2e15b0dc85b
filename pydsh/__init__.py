"""pydsh: a light, fast Python implementation of the DeepSeek Harness agent harness."""

__version__ = "0.1.0"
