"""The runaway guards: their configuration and the watch a tick keeps."""
