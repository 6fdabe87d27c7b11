import os
import sys

# The extension built in place (build/python/luminal), unless the package is installed.
_here = os.path.dirname(os.path.abspath(__file__))
_build = os.environ.get("LUMINAL_PYTHON_DIR", os.path.join(_here, "..", "..", "build", "python"))
if os.path.isdir(_build):
    sys.path.insert(0, os.path.abspath(_build))

TEST_DATA = os.path.join(_here, "..", "..", "tests", "data")
