"""The demo (``make demo`` / ``widehouse demo``): the whole path on the local defaults.

:mod:`widehouse.demo.spark` runs the demo and compares the sinks with the generator's manifest
(:mod:`widehouse.demo.batch` finalizes and checks the hours it streamed); it returns a
:class:`~widehouse.demo.result.DemoResult` the command renders and tests assert on.
"""
