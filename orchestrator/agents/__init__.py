"""The agent runtime: how an agent CLI's output is read, what it reports it
cost, and the budgets that stop a task spending more."""
