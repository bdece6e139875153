"""`python -m conformance.cli`: the same command line as `dra-conformance`."""

from conformance.cli import main

if __name__ == "__main__":
    main()
