"""`plan`: problem building, greedy placers, the integer program, the planner and moves."""
