# pgpathbench: `make demo` runs the quick demo, `make test` runs the whole test suite.
# Both set up a fresh Debian 12 machine first (scripts/bootstrap is idempotent).
.PHONY: bootstrap demo test clean

PGPATHBENCH = .venv/bin/pgpathbench

bootstrap:
	@scripts/bootstrap

demo: bootstrap
	$(PGPATHBENCH) run fdw-overhead --preset quick

test: bootstrap
	.venv/bin/python -m pytest -q

clean:
	-$(PGPATHBENCH) clean
