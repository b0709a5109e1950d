"""MiniHack tasks as text environments (Room, MazeWalk, KeyRoom, River): the env, its text rendering, and scripted
solvers."""
