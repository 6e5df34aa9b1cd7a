"""Prints PROBLEM preceded by a function named like the first flash.kernel of
LOWERED, so that lowering PROBLEM again finds that name taken by a non-kernel."""
import re
import sys

lowered, problem = sys.argv[1:]
name = re.search(r"flash\.kernel @(\w+)", open(lowered).read()).group(1)
print(f"func.func private @{name}()")
print(open(problem).read())
