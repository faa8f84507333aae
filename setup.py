"""Apache Beam's --setup_file entry point; the package's metadata is pyproject.toml's.

    python create_pretraining_data_beam.py ... --runner=DataflowRunner --setup_file=./setup.py

Beam builds a source package from this folder (`python -m build --sdist` if `build` is
installed, else `python setup.py sdist`, which needs this file) and pip-installs it on every
worker, with the dependencies pyproject.toml declares. `pip install .` does not need it.
"""

import setuptools

setuptools.setup()
