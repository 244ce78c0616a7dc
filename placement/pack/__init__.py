"""`pack`: bin packing of seats onto cards: bounds, greedy, arc-flow and column generation."""
