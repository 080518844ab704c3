"""``python -m checkpointspec.backends.stdio.bridges`` prints the lite-agent bridge's path,
for ``--process 'node <path> MODULE#FACTORY --declare ...'``."""

from . import LITE_AGENT_BRIDGE

print(LITE_AGENT_BRIDGE)
