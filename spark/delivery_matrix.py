"""spark-submit entry point of the audit; the job is `acklab.checker.audit` (see its docstring)."""

from acklab.checker.audit import main

if __name__ == "__main__":
    main()
