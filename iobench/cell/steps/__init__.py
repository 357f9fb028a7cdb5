"""The step loop: the loader built per epoch, and the training loop that times every step."""
