"""Keeping freed memory for the next large frame (glibc's malloc only).

A frame of a few hundred KB or more (a large or oversized registration) is gathered into a buffer
of its own by the frame decoder, then copied out as the request's body; both are freed once it is
handled. glibc's malloc serves an allocation above its mmap threshold (128 KiB at first, then the
size of the largest mapping freed) from a fresh mapping, and gives the free memory at the top of
its heap back to the kernel once it passes its trim threshold. Each large frame then ran on fresh
pages: a page fault for every 4 KiB of it (about 200 for a 0.8 MB registration), most of what
reading the frame cost the loop. So the server asks malloc to serve every allocation below 32 MiB
(a whole frame is at most 16 MiB) from its heap and to keep up to 64 MiB of freed heap: the pages
of one frame are those of the next. The figures are in bench/README.md ("Registrations over the
caps").
"""

from __future__ import annotations

import ctypes

# glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
MMAP_THRESHOLD_BYTES = 32 << 20
# freed heap kept for reuse before malloc trims it: two frames of the largest size and then some
TRIM_THRESHOLD_BYTES = 64 << 20
_M_TRIM_THRESHOLD = -1  # malloc.h
_M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Ask malloc to keep freed memory for reuse (module docstring), once per process at start.

    Returns:
        Whether malloc took both settings; False (and nothing changed) without glibc.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
