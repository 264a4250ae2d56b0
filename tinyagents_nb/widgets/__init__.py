"""ipywidgets views of harness runs: the live run dashboard and its panes."""
