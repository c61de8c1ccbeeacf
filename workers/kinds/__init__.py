"""One module per operation kind; importing this package registers every runner."""

from workers.kinds import elect, reassign

__all__ = ["elect", "reassign"]
