"""The ground every layer stands on: errors, options, schemas, the manifest's format, Arrow helpers, files.

Nothing here imports anything above it.
"""
