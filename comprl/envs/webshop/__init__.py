"""WebShop-small built in: the synthetic catalogue and goals, DuckDB BM25 search, the WebShop reward, and the text
env."""
