"""Jupyter notebook adapters for the harness: IPython magics (see ``load_ipython_extension``)."""
