# pgpathbench: `make demo` runs the quick demo, `make test` runs the whole test suite, `make check`
# the fast part of it (lint, unit and CLI tests) before every commit.
# All set up a fresh Debian 12 machine first (scripts/bootstrap is idempotent).
.PHONY: bootstrap demo test check clean

PGPATHBENCH = .venv/bin/pgpathbench
DEMO_REPORT = demo-report.html

bootstrap:
	@scripts/bootstrap

# Every study at its quick preset narrowed to its seed's headline comparison (bench/README.md says
# what each drops and why), the shortest first, then one HTML page of the four runs.
demo: bootstrap
	$(PGPATHBENCH) run file-fdw-tpch --preset quick --layout single
	$(PGPATHBENCH) run remote-sampling --preset quick --rows 100k --fraction 0.01,0.1 --analyze-sampling local,off,auto
	$(PGPATHBENCH) run fdw-overhead --preset quick --workload ro --target local,fdw_local,fdw_external
	$(PGPATHBENCH) run interfaces --preset quick --method normal
	@echo "HTML report of the four runs:"
	@$(PGPATHBENCH) report latest~3 latest~2 latest~1 latest --html $(DEMO_REPORT) --overwrite

# Side by side on TEST_WORKERS workers (pytest-xdist): each module on one worker whole (its module
# fixtures, a run or a server, made once), integration modules first, the longest of them first
# (tests/conftest.py). Three on two cores: 585.8 s against 676-742 s with two, and four no better
# (580.7 s); two suites side by side pass with three each (bench/README.md, "Three workers").
TEST_WORKERS ?= 3
test: bootstrap
	.venv/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

check: bootstrap
	.venv/bin/ruff check src tests bench clients
	.venv/bin/python -m pytest -q -n 2 -p no:cacheprovider -m "not integration" tests/unit tests/cli

clean:
	-$(PGPATHBENCH) clean
