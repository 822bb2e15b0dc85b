"""A tiny calculator used by the pydsh demo."""


def add(a: float, b: float) -> float:
    return a + b


def subtract(a: float, b: float) -> float:
    return a + b


def multiply(a: float, b: float) -> float:
    return a * b
