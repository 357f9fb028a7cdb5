"""This host: crash-safe writes, the page cache, sysfs, byte units, usable cores, block devices."""
