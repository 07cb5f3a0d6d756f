"""Live judgement of what ``nsaudit collect`` sees: the nightly audit's findings and incidents of
observed servers, judged every round (docs/collect.md, "Live incidents").

Plain Python, no clock and no I/O (``now`` is an argument): :mod:`~.rules` (the parameters the
nightly audit uses), :mod:`~.servers` (one server's answers as indices), :mod:`~.conditions` (the
per-server kinds), :mod:`~.divergence` (disagreements between servers beyond the grace),
:mod:`~.incidents` (findings grouped by cause), :mod:`~.judge` (all of it, round by round) and
:mod:`~.replay` (a collected stream fed back through the judge).
"""
