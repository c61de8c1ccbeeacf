"""Quill: Apache Kafka's design in Python. Importing the package puts the compiled hot
path's finder in place (broker/hotpath.py): built modules load only while their sources
are unchanged."""

from . import hotpath

hotpath.install()
