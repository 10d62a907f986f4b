from bench.models.main import main

main()
