"""The experience extractor: its prompts and the parsing of its replies, the track of its calls, and its CISPO
trainer."""
