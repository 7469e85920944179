from llmfit.cli import main

main()
