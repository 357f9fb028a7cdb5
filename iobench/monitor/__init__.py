"""`iobench monitor`: Prometheus metrics beside a running job or sweep."""
