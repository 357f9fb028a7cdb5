"""A tiny third-party loader: the torch backend, each batch yielded ``repeat`` times.

It declares its one option, so a sweep file can set it (``{kind: tiny, repeat: 2}``) and a wrong
value is refused before anything runs.
"""

from dataclasses import replace

from loaders import Option, make_loader


class TinyLoader:
    def __init__(self, config):
        self.repeat = config.options["repeat"]
        self.inner = make_loader("torch", replace(config, options={}))
        self.stats = self.inner.stats

    def __iter__(self):
        for batch in self.inner:
            for _ in range(self.repeat):
                yield batch

    def set_epoch(self, epoch):
        self.inner.set_epoch(epoch)

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)


def make(config):
    return TinyLoader(config)


make.options = {"repeat": Option(int, default=1, help="yield each batch this many times")}
