"""The extension seam: what the engine (`tick/`) and the features
(`features/`) share, so that neither imports the other. `model.py` is the
vocabulary, `hooks.py` what a feature declares, `ports.py` the part of the
engine a feature may use, `registry.py` how the engine calls the hooks."""
