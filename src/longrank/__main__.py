from longrank.cli import main

main()
