"""Text out: the table, the sentences, the commands and the JSON, computed from a Plan only."""
