"""How well a stage does its job: the judge, the planner, the memory's retrieval."""
