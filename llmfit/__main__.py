from llmfit.entry import main

main()
