"""adapters/kafka layer."""
