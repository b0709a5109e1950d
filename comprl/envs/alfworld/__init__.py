"""ALFWorld: the built-in household simulator and its scenes, and the adapter to alfworld's own engine (extra)."""
