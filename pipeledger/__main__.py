from pipeledger.cli.app import main

main()
