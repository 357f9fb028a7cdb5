"""`iobench probe -- CMD`: the user's own, unmodified training job measured in iobench's terms.

The job runs as given; a sitecustomize on its PYTHONPATH loads hooks (inject/) into every Python
process of it. The hooks write records (session.py follows them), the probe closes a window once it
is long enough, the job's loop then takes its step alone and its loader runs alone (--ceilings),
and the measurements become a run directory (publish.py) and a sweep file (sweepfile.py).
"""
