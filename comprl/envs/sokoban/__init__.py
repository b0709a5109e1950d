"""Sokoban built in: reverse-play level generation, the puzzle rules, a BFS solver, and the text env."""
