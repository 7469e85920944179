"""Adapters from the outside world (cache, Hub, files) into the planner's nouns."""
