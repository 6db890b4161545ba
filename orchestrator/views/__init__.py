"""The read side: what people read about tasks (reports, explain, metrics,
the gate view, sparklines). Nothing here changes state."""
