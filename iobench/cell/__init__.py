"""One cell, measured in a process of its own (or one process per rank under torchrun): the tier,
the loader, the step loop and its accelerator, the ceilings, telemetry -> the cell's summary."""
