"""The library face and the human actions (add, approve, reject, halt,
resume, cancel, prune), shared by the CLI, the web page and `Project`."""
