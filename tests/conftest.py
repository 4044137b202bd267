"""Loads the project's pytest plugin (the --impl option and the impl/answer fixtures).

When the project is installed (``pip install -r requirements.txt`` does ``pip install -e .``) the
plugin is already registered through its entry point and this line is a no-op.
"""

pytest_plugins = ["rlhf_practice.pytest_plugin"]
