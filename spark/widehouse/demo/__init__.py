"""The demo (``make demo`` / ``widehouse demo``): the whole path on the local defaults.

:mod:`widehouse.demo.checks` compares the sinks with the generator's manifest and returns a result
the command renders and tests assert on; :mod:`widehouse.demo.spark` runs the demo.
"""
