"""One module per operation kind; importing this package registers every runner."""

from operations.kinds import compact, elect, reassign, restart

__all__ = ["compact", "elect", "reassign", "restart"]
