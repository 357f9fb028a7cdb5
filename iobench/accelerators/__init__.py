"""The accelerators a cell feeds: the demand catalog, the models, the emulated accelerator and
its trainer's host work, the step timed alone and its calibration (`iobench calibrate`). Below
the cell: the sweep's checks, recommend and inspect read the catalog too."""
