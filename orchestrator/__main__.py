"""`python -m orchestrator` is the same program as the console script."""

from orchestrator.cli import main

if __name__ == "__main__":
    main()
