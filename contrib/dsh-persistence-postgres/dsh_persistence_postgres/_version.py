"""The numbers fixed with the tables: their version, and the seed of the advisory-lock keys.

Apart from ``_schema`` so that the package's front can export them without importing the driver.
"""

from __future__ import annotations

from typing import Final

__all__ = ["LOCK_SEED", "SCHEMA_VERSION"]

#: the version of the tables this plugin creates and uses
SCHEMA_VERSION: Final = 1

#: seeds ``hashtextextended`` for the advisory-lock keys, keeping them apart from other users'
LOCK_SEED: Final = 0x647368  # "dsh"
