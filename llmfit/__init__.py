"""llmfit: where a Hugging Face model can run on a GPU fleet, and the command to run it."""

__version__ = "0.1.0"
