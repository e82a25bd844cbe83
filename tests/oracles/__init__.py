"""Independent implementations the tests compare lbnorm against (not lbnorm code)."""

from __future__ import annotations
