import os
import sys

from curriculum.cli import main

code = main()
if sys.getprofile() is not None or sys.gettrace() is not None:
    sys.exit(code)  # a profiler or coverage tool writes its report at a normal exit
# A large build leaves a gigabyte of objects; the system takes the memory back at once,
# where freeing them one by one at exit takes half a second.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
