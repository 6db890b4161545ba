"""The agent runtime: how an agent CLI's output is read, what it reports it
cost, and the budgets that stop a task spending more. What differs from one
agent CLI to another is its kind's, in the registry (`agents.kinds`)."""
