"""ALFWorld: the official goal lists, the built-in household simulator that plays them, and the adapter to
alfworld's own engine (extra)."""
