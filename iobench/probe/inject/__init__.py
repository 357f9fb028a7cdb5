"""The directory ``iobench probe`` puts first on a job's PYTHONPATH: ``sitecustomize.py`` loads
``_iobench_probe`` (the hooks) into every Python process of the job. Nothing here imports iobench:
the job may run under another interpreter or virtual environment than iobench's own."""
