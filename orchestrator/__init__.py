"""orchestrator: a durable, verifier-gated workflow orchestrator."""

__version__ = "0.1.0"
