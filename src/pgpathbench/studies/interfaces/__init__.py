"""interfaces (seed 003): client interfaces and their fetch methods by transport and strategy."""

from .study import Interfaces

__all__ = ["Interfaces"]
