"""Entry of the view builder (`python -I -S view_main.py SPEC`): a script is compiled on every start, a
module's bytecode is cached, so the work lives in `view.py`."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's directory out
import view  # type: ignore[import-not-found]  # the sibling file, found through sys.path

view.main()
