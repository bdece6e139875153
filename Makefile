# Two commands do everything on a fresh machine (see README.md; the guides are the site in docs/, `make docs`):
#   make conformance   the main job: the suite against the reference profile on the local cluster
#   make test          the project's own checks and tests, then the suite
# Both build what is missing first (Python venv, control-plane binaries in ~/.cache/dra-conformance).

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
K8S_VERSION ?= 1.37.2
PROVIDER ?= local
# On kind the reference implementation runs in the cluster, from manifests (see docs/clusters.md "On kind").
PROFILE ?= $(if $(filter kind,$(PROVIDER)),fixtures/profiles/reference-kind.yaml,fixtures/profiles/reference.yaml)
REPORTS ?= reports
PYTEST_ARGS ?=
# Used by the builder only when a module's go directive is newer than the machine's Go.
export DRA_CONFORMANCE_GOTOOLCHAIN ?= go1.27.3
# A patched control plane (docs/clusters.md "A patched control plane"): K8S_PATCHES=DIR applies DIR's *.patch files,
# in name order, to K8S_VERSION's sources; K8S_SOURCE=PATH builds a local checkout as K8S_VERSION. Every target that
# builds or starts a cluster (binaries, conformance, matrix, kind-image, the reproducer's `cluster up`) uses it.
K8S_PATCHES ?=
K8S_SOURCE ?=
export K8S_PATCHES K8S_SOURCE

BIN := $(VENV)/bin
SUITE_ARGS := --provider $(PROVIDER) --k8s-version $(K8S_VERSION) --profile $(PROFILE) \
	$(if $(filter existing,$(PROVIDER)),--kubeconfig $(KUBECONFIG))

.PHONY: all conformance conformance-shapes test test-full unit drivers selftest suite lint binaries venv bench bench-cluster scale clusters-down clean
.PHONY: validate image kind-image kind-config conformance-kind matrix conformance-extra conformance-all conformance-roles chromium html-check soak
.PHONY: docs review docs-match lifecycle

all: test

$(BIN)/.installed: pyproject.toml fake-drivers/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]' -e './fake-drivers[dev]'
	touch $@

venv: $(BIN)/.installed

binaries: venv
	$(BIN)/dra-conformance build --k8s-version $(K8S_VERSION)

# Known upstream defects of the cluster's release (conformance/cluster/known-defects.yaml) this project's own runs
# accept explicitly: kube-scheduler 1.37 allocates a device twice after a binding timeout (fixed in 1.38.0-beta.0),
# which the suite's SCH-9 scenario provokes in every run. SCH-9 still reads failed and the cluster verdict failure in every
# report (docs/upstream/double-allocation-after-binding-timeout.md); accepting it only keeps the exit status for the
# rest of the run. kube-scheduler 1.35-1.38 can also panic in its ResourceSlice tracker when a DeviceTaintRule is deleted
# while its pool grows (SCH-11, shown by chance: docs/upstream/scheduler-panic-in-resourceslice-tracker.md); the local
# cluster starts it again as a kubelet would. ACCEPT_KNOWN_DEFECTS= (empty) makes such a run exit 7.
ACCEPT_KNOWN_DEFECTS ?= double-allocation-after-binding-timeout scheduler-panic-in-resourceslice-tracker
# `dra-conformance run` returns the suite's own exit status (README "Verdicts and exit status") and prints it on its
# last line; make itself exits 2 whenever a recipe fails, so CI that tells partial from failure runs that command.
conformance: binaries
	$(BIN)/dra-conformance run $(SUITE_ARGS) --reports-dir $(REPORTS) \
		$(addprefix --accept known-defect:,$(ACCEPT_KNOWN_DEFECTS)) $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS))

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: venv
	$(BIN)/pytest tests --ignore=tests/selftest --ignore=tests/postrun

# After `make conformance`: README quotes, word for word, the last lines that run printed (its reports' run-status.txt).
docs-match: venv
	DRA_RUN_REPORTS=$(REPORTS) $(BIN)/pytest tests/postrun -q -p no:cacheprovider

# The reference implementation's own tests (fabric manager, node driver, controller); some use a local cluster.
drivers: binaries
	cd fake-drivers && ../$(BIN)/pytest tests

# Tests of the tests: the suite must fail on a deliberately broken cluster (needs the binaries). Each selftest starts
# its own cluster (free ports, own folder) and mostly waits on the KEP's timings (binding timeout, PreBind poll), so
# they can run side by side: SELFTEST_WORKERS processes (pytest-xdist), a test goes to whichever is free. The interrupt
# selftests then run alone: they bound how long a stop takes (20 s), which four suites at once on 2 cores exceed.
# Default 1: side by side (e.g. 4) was measured faster but saw clusters started at once collide (setup errors).
SELFTEST_WORKERS ?= 1
selftest: binaries
	rc=0; $(BIN)/pytest tests/selftest -n $(SELFTEST_WORKERS) --dist worksteal \
		--ignore=tests/selftest/test_interrupts.py || rc=1; \
	$(BIN)/pytest tests/selftest/test_interrupts.py || rc=1; exit $$rc

suite: conformance

# Two tiers (README "Two commands"). `make test` is CI's (.ci/run): what fits in 10 minutes with warm caches: lint,
# unit tests, the docs site, the HTML checks, validation, the reference implementation's tests and the whole suite against the
# reference profile on 1.37.2. `make test-full` is everything: the same, the selftests (the suite against each
# deliberately broken variant), the suite against every reference profile, and the whole suite on the newest release
# (binding conditions GA there); about an hour here. 1.34-1.36 run only in `make matrix` (docs/releases.md "Kubernetes
# versions").
TEST_EXTRA_RELEASES ?= 1.38.0-beta.0
test: lint unit docs html-check validate drivers conformance docs-match
test-full: lint unit docs html-check validate drivers kind-image selftest conformance-all conformance-shapes conformance-extra conformance-kind

# The whole suite on kind (one release, the reference profile), after `kind-image`; reports in $(REPORTS)/kind.
conformance-kind: kind-image
	$(MAKE) --no-print-directory conformance PROVIDER=kind REPORTS=$(REPORTS)/kind

# The whole suite against each reference profile: one per binding model and fabric-entry kind (docs/certify.md,
# "Worked examples"); reports in $(REPORTS)/<profile>/. Every run is tried; the target fails if any did. The stack
# split into three restartable roles (reference-roles.yaml, keep-in-pool: IMP-8 restarts each role at each step, about 6 min
# here) is `make conformance-roles`, left out of `make test` for CI's time.
REFERENCE_PROFILES ?= fixtures/profiles/reference.yaml fixtures/profiles/reference-reschedule.yaml \
	fixtures/profiles/reference-counted.yaml fixtures/profiles/reference-nodelocal.yaml
conformance-roles: binaries
	$(MAKE) --no-print-directory conformance PROFILE=fixtures/profiles/reference-roles.yaml \
		REPORTS=$(REPORTS)/reference-roles
# The stack shapes of issue 27 (docs/certify.md "Per-node daemons with pod-bound credentials", "HTTPS endpoints"):
# the node driver per node with pod-bound tokens and an admission policy, and the fabric manager on HTTPS with the
# run's CA.
SHAPE_PROFILES ?= fixtures/profiles/reference-pernode.yaml fixtures/profiles/reference-https.yaml
conformance-shapes: binaries
	rc=0; for p in $(SHAPE_PROFILES); do \
		$(MAKE) --no-print-directory conformance PROFILE=$$p REPORTS=$(REPORTS)/$$(basename $$p .yaml) || rc=1; \
	done; exit $$rc
conformance-all: binaries
	rc=0; for p in $(REFERENCE_PROFILES); do \
		$(MAKE) --no-print-directory conformance PROFILE=$$p REPORTS=$(REPORTS)/$$(basename $$p .yaml) || rc=1; \
	done; exit $$rc

# Debian's chromium, headless, checks the HTML report (browser builds that download themselves cannot be fetched).
chromium:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

html-check: venv chromium
	$(BIN)/pytest tests/test_timeline_html_bundle.py tests/test_docs_site.py -k chromium

# The documentation site (docs/, mkdocs.yml) into site/, offline: the requirement, profile and protocol references are
# generated from the code by conformance/docs/hook.py; --strict fails on a broken link, a missing page or anchor, and
# on a requirement or profile field without text. `make html-check` then loads it in chromium (tests/test_docs_site.py).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

conformance-extra: venv
	set -e; for v in $(TEST_EXTRA_RELEASES); do \
		$(MAKE) --no-print-directory conformance K8S_VERSION=$$v REPORTS=$(REPORTS)/$$v; done

# The whole suite on every supported release, one at a time (binaries built once where missing, else reused), for
# each binding model's profile, and one matrix report per profile: $(REPORTS)/matrix/<profile>/matrix.{md,html,yaml},
# each release's own reports in $(REPORTS)/matrix/<profile>/<version>/. MATRIX_RELEASES="1.37.2 1.38" narrows it;
# `dra-conformance matrix --report-only --out ...` rebuilds a table from the reports already there.
# A partial matrix (1.34 cannot show SCH-6 and IMP-14: its binding timeout is fixed at 600 s) exits 6 unless
# MATRIX_ACCEPT=partial. The known upstream defects of ACCEPT_KNOWN_DEFECTS are accepted in every release's run, as in
# `make conformance`: a column that failed only on them reads failed and does not fail the exit status.
MATRIX_RELEASES ?=
MATRIX_ACCEPT ?=
MATRIX_PROFILES ?= $(REFERENCE_PROFILES)
matrix: venv
	rc=0; for p in $(MATRIX_PROFILES); do \
		$(BIN)/dra-conformance matrix --profile $$p --out $(REPORTS)/matrix/$$(basename $$p .yaml) \
			$(addprefix --release ,$(MATRIX_RELEASES)) $(addprefix --accept ,$(MATRIX_ACCEPT)) \
			$(addprefix --accept known-defect:,$(ACCEPT_KNOWN_DEFECTS)) \
			$(if $(PYTEST_ARGS),-- $(PYTEST_ARGS)) || rc=1; \
	done; exit $$rc

# The enhancement review's evidence (issue 38): the suite with PROFILE on every supported release, 1.34-1.38
# (REVIEW_RELEASES="1.36.3 1.37.2" narrows it; a release the cache lacks is built first, 10-25 min each on 2 cores:
# a fresh machine builds all five), each run's bundle in $(REPORTS)/review/runs/<version>/, and the lifecycle runs
# (`make lifecycle`, below) of those releases in $(REPORTS)/review/lifecycle/, merged into
# $(REPORTS)/review/review.{html,md,yaml} and review-junit.xml. Bundles of other machines or CI shards merge with
# `dra-conformance review BUNDLE...`; the docs site's "For the enhancement review" page shows
# docs/review-measured.yaml (a copy of review.yaml).
REVIEW_RELEASES ?=
review: venv
	$(BIN)/dra-conformance review --run --build --out $(REPORTS)/review --profile $(PROFILE) \
		$(addprefix --release ,$(REVIEW_RELEASES)) $(addprefix --accept known-defect:,$(ACCEPT_KNOWN_DEFECTS)) \
		$(if $(PYTEST_ARGS),--pytest-args "$(PYTEST_ARGS)")

# The KEP's production-readiness answers on real binaries (issue 38, docs/review.md): DRADeviceBindingConditions
# switched off on kube-scheduler and kube-apiserver of a live cluster of K8S_VERSION and on again (GATE-1..3), then
# upgrade -> downgrade -> upgrade from the minor before on one etcd, its first step the version skew (UPG-1..3,
# SKEW-1; needs that release's cached binaries). Each run restarts the control plane of a cluster of its own, so it is
# not part of `make test`: 209 s and 245 s here (loaded). Reports in $(REPORTS)/lifecycle/.
lifecycle: binaries
	rc=0; $(BIN)/dra-conformance lifecycle gates --k8s-version $(K8S_VERSION) \
		--out $(REPORTS)/lifecycle/gates-$(K8S_VERSION) || rc=1; \
	$(BIN)/dra-conformance lifecycle upgrade --k8s-version $(K8S_VERSION) \
		--out $(REPORTS)/lifecycle/upgrade-$(K8S_VERSION) || rc=1; exit $$rc

# Figures of one full suite run (bring-up, wall time, scenarios, latencies, SCALE-1 with/without conditions),
# kept in reports/bench-history/ and compared with the previous run's: what got slower is printed.
BENCH_SCALE_PODS ?= 100
bench: binaries
	mkdir -p $(REPORTS)/bench
	$(BIN)/pytest conformance/suite $(SUITE_ARGS) -q --reports-dir=$(REPORTS)/bench \
		--scale-pods $(BENCH_SCALE_PODS) $(PYTEST_ARGS) || true
	$(BIN)/dra-conformance figures $(REPORTS)/bench/conformance-report.yaml --history $(REPORTS)/bench-history

# Stability: N consecutive full runs of every reference profile on the local cluster, then KIND_N runs of the kind
# profile on kind (KIND_N=0: none; kind needs Docker and `make kind-image`), each run's reports in
# $(REPORTS)/soak/<i>/<profile>/ (kind: <profile>-kind), its exit status in exit-status there; then per test how
# often it failed and the spread (min/median/max) of every figure. Fails if any run failed (a test, or its exit
# status: `dra-conformance run`'s own, so a partial run counts). Shards side by side (a REPORTS and REFERENCE_PROFILES
# each) merge into one summary: `dra-conformance soak A/soak B/soak ...`.
N ?= 20
KIND_N ?= 5
soak: binaries $(if $(filter-out 0,$(KIND_N)),kind-image)
	rm -rf $(REPORTS)/soak
	failed=0; started=$$(date +%s); soak_one() { \
		run=$(REPORTS)/soak/$$1/$$2; mkdir -p $$run; \
		echo "[soak] round $$1, $$2: $$failed runs failed so far, $$(( $$(date +%s) - started )) s elapsed"; \
		$(BIN)/dra-conformance run --k8s-version $(K8S_VERSION) $$3 --reports-dir $$run \
			$(addprefix --accept known-defect:,$(ACCEPT_KNOWN_DEFECTS)) $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS)); \
		status=$$?; echo $$status > $$run/exit-status; [ $$status -eq 0 ] || failed=$$((failed + 1)); }; \
	for i in $$(seq -w 1 $(N)); do for p in $(REFERENCE_PROFILES); do \
		soak_one $$i $$(basename $$p .yaml) "--provider local --profile $$p"; done; done; \
	for i in $$(seq -w 1 $(KIND_N)); do \
		soak_one $$i reference-kind "--provider kind --profile fixtures/profiles/reference-kind.yaml"; done; \
	echo "[soak] $$failed runs failed, $$(( $$(date +%s) - started )) s"
	$(BIN)/dra-conformance soak $(REPORTS)/soak

# Scalability (issue 39, docs/performance.md "Scalability"): a benchmark, not a test. Per point of SCALE_NODES a local
# cluster of that many kwok nodes, the reference fabric manager and controller on SCALE_FABRICS fabrics reaching them,
# SCALE_PODS pods without binding conditions, then SCALE_PODS pods all waiting in PreBind at once until their attaches
# are released. Prints the table and a closing note (wall time, each point's peak memory; also closing.txt);
# $(REPORTS)/scale/ has scale.json, scale.md and one JSON per point. Each point's cluster is torn down, also on Ctrl-C.
# Measured 2026-12-07 on 2 shared, loaded cores: 2309-2535 s, at most 7.0 GiB (the 5000-node point). `dra-conformance review
# --scale $(REPORTS)/scale/scale.json` cites a fresh run for GA-3 (default: docs/figures/scale.json).
SCALE_NODES ?= 100 1000 5000
SCALE_PODS ?= 1000
SCALE_FABRICS ?= 4
scale: binaries
	$(BIN)/dra-conformance scale --nodes "$(SCALE_NODES)" --pods $(SCALE_PODS) --fabrics $(SCALE_FABRICS) \
		--k8s-version $(K8S_VERSION) --out $(REPORTS)/scale

bench-cluster: binaries
	$(BIN)/dra-conformance bench --k8s-version $(K8S_VERSION) --out $(REPORTS)/bench-cluster.json \
		--history $(REPORTS)/bench-history

clusters-down: venv
	$(BIN)/dra-conformance cluster down --all

clean:
	rm -rf $(VENV) $(REPORTS) .pytest_cache .ruff_cache

# -- kind, container image, manifests (docs/clusters.md "On kind") ----------------------------------------------------
IMAGE ?= dra-fake-drivers:0.1.0
K8S_RELEASES ?= 1.34 1.35 1.36 1.37 1.38

# The reference image, built from fake-drivers/Dockerfile (needs a Docker engine and a registry for its bases).
image:
	docker build -t $(IMAGE) fake-drivers

# With no registry (docs/clusters.md "On kind"): the kind node image of K8S_VERSION (only where kind's own kindest/node cannot
# be pulled) and the reference image, from Debian packages and the Go module proxy; cached by inputs. Starts a
# dockerd for the build where none runs (and stops it). Builds run at nice 15 (KIND_IMAGE_NICE).
KIND_IMAGE_NICE ?= 15
kind-image: binaries
	nice -n $(KIND_IMAGE_NICE) $(BIN)/dra-conformance kind image --k8s-version $(K8S_VERSION)

conformance: $(if $(filter kind,$(PROVIDER)),kind-image)

# kind-config.yaml (and the scheduler config it mounts) for K8S_VERSION, from conformance/versions.py.
kind-config: venv
	$(BIN)/dra-conformance kind-config --k8s-version $(K8S_VERSION)

# Everything about kind, the image and the manifests that can be checked without a Docker engine:
# kind configs with kind's own loader and validator, the kubelet plugin with go vet/build/test, the Dockerfile
# with hadolint, the manifests with a server-side dry-run on a local cluster (tests/selftest/test_kind_manifests.py).
validate: binaries
	$(BIN)/dra-conformance validate-kind-config kind-config.yaml $(addprefix --release ,$(K8S_RELEASES))
	cd fake-drivers/kubelet-plugin && CGO_ENABLED=0 go vet ./... && CGO_ENABLED=0 go build -o /dev/null . && go test ./...
	$(BIN)/hadolint fake-drivers/Dockerfile
	$(BIN)/pytest tests/selftest/test_kind_manifests.py
