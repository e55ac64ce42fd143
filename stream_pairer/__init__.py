"""stream-pairer: pairs AI tool calls with their results, in files or as a Kafka sidecar."""

__version__ = "0.1.0"
