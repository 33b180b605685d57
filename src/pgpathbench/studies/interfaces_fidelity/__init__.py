"""interfaces-fidelity: the native clients against psql COPY and pgbench."""

from .study import InterfacesFidelity

__all__ = ["InterfacesFidelity"]
