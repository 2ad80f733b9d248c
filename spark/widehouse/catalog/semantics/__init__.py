"""The catalog's semantics in plain Python: how one message is parsed and classified
(:mod:`.parse`) and how accepted events fold into wide-row values (:mod:`.fold`).

This is the production code the streaming transform runs on executors, and what the generator's
manifest is computed with. It is not a test oracle: tests check it against the hand-written golden
fixture in ``tests/golden/``.
"""
