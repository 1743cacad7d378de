"""Fixtures of the reliability tests."""

from tests.reliability.shared_workers import memory_workers

__all__ = ["memory_workers"]
