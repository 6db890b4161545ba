"""The pure core: verdicts, plateaus, the state machine. Standard library only."""
