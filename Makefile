# pgpathbench: `make demo` runs the quick demo, `make test` runs the whole test suite.
# Both set up a fresh Debian 12 machine first (scripts/bootstrap is idempotent).
.PHONY: bootstrap demo test clean

PGPATHBENCH = .venv/bin/pgpathbench
DEMO_REPORT = demo-report.html

bootstrap:
	@scripts/bootstrap

# Every study at its quick preset, then one HTML page of the four runs.
demo: bootstrap
	$(PGPATHBENCH) run fdw-overhead --preset quick
	$(PGPATHBENCH) run remote-sampling --preset quick
	$(PGPATHBENCH) run file-fdw-tpch --preset quick
	$(PGPATHBENCH) run interfaces --preset quick
	@echo "HTML report of the four runs:"
	@$(PGPATHBENCH) report latest~3 latest~2 latest~1 latest --html $(DEMO_REPORT)

test: bootstrap
	.venv/bin/python -m pytest -q

clean:
	-$(PGPATHBENCH) clean
