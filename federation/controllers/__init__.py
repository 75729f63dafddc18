"""The hub's async shell around the scheduling core: loops that read, decide and write."""
