"""Outputs: the transaction that writes an output folder, and reading one back."""
