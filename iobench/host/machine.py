"""This machine by name: its CPU model and the name a measurement taken here carries (a figure
measured on another CPU is not this one's)."""

from __future__ import annotations

import platform
import socket


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo; ``platform.processor()`` is empty on most Linux
    systems), else what the platform says, else the architecture."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def this_host() -> str:
    """``hostname (CPU model)``: what a calibration or a measurement names its machine by."""
    return f"{socket.gethostname()} ({cpu_model()})"
