"""The core: nouns and arithmetic, no I/O. Everything it decides can be tested with plain values."""
