"""Fault injection for the simulator: :class:`FaultInjector` and the fault kinds it strikes."""

from nameserver.sim.faults.injector import FaultInjector

__all__ = ["FaultInjector"]
