# Every target does its own set-up, so each works on a fresh machine.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Build outputs live outside the clone, so a fresh clone (as in CI) reuses compiled dependencies
# and the Go-built control plane.
export BUCKET_PROVISIONER_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/bucket-provisioner
export CARGO_TARGET_DIR ?= $(BUCKET_PROVISIONER_CACHE)/target
export CARGO_TERM_COLOR ?= never
CONTROLPLANE_BIN = $(shell tests/controlplane/build.sh)
# helm, built from its pinned Go module into the cache, and promtool (Debian's prometheus
# package), for the chart's tests.
HELM_BIN = $(shell tests/helm/build.sh)
PROMTOOL_BIN = $(shell tests/prometheus/install.sh)
# kubectl, at the control plane's version, for the book's runnable shell examples.
KUBECTL_BIN = $(shell tests/kubectl/build.sh)
# Garage (a distributed S3 store) for the Garage provisioner's tests, pinned in tests/garage/build.sh.
GARAGE_BIN = $(shell tests/garage/build.sh)
# The upstream COSI controller and sidecar (v0.2.2 and main) with their CRDs, for the COSI
# drivers' tests, built from COSI_SOURCE (a git bundle or checkout) or a clone of upstream.
COSI_DIR = $(shell tests/cosi/build.sh)
# moto (S3 + IAM) for the S3 provisioner's tests, pinned in tests/moto/requirements.txt.
export BUCKET_PROVISIONER_MOTO_VENV ?= $(BUCKET_PROVISIONER_CACHE)/moto-venv
# The Go aws-s3-provisioner, which the S3 takeover tests run and then replace, built offline into
# the cache from the source in BUCKET_PROVISIONER_AWS_S3_PROVISIONER_SOURCE (.ci/run sets it).
AWS_S3_PROVISIONER_BIN = $(shell tests/aws-s3-provisioner/build.sh)
# The AWS SDK for Go v2 and the AWS CLI, consumers of keyless claims in the web identity tests.
GO_CONSUMER_BIN = $(shell tests/web-identity/go-consumer/build.sh)
AWSCLI_BIN = $(shell tests/web-identity/awscli/install.sh)
# mdBook and its mermaid preprocessor (the book's diagrams), pinned in tests/mdbook/build.sh and
# built from the Rust package registry into the cache: the directory holding both.
MDBOOK_DIR = $(shell tests/mdbook/build.sh)

# The image: static binaries for this machine's architecture, from the Dockerfile, no registry.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
IMAGE ?= localhost/bucket-provisioner:$(VERSION)
IMAGES_DIR = $(BUCKET_PROVISIONER_CACHE)/images
STATIC_TARGET := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
# `make test` builds the image from unoptimised binaries (profile image-test): they take a third
# of the time of a release build and the tests need them working, not fast.
STATIC_PROFILE ?= release
STATIC_DIR = $(CARGO_TARGET_DIR)/$(STATIC_TARGET)/$(STATIC_PROFILE)
# The test binaries `make e2e` runs on a real node.
E2E_TESTS := --test e2e --test helm --test volume_capacity --test cosi_e2e --test cosi_v1alpha2_e2e
STATIC_RUSTFLAGS_VAR := CARGO_TARGET_$(shell echo '$(STATIC_TARGET)' | tr 'a-z-' 'A-Z_')_RUSTFLAGS

.PHONY: help toolchain controlplane chart-tools chart test lint crds demo bench static image node e2e garage \
	aws-s3-provisioner cosi docs mdbook

help:
	@echo "make demo   - local control plane + hostPath provisioner + a claim + a consumer"
	@echo "make test   - fmt, clippy and every test (unit, real control plane, and make e2e)"
	@echo "make image  - the provisioner image from the Dockerfile, as an archive (no registry)"
	@echo "make e2e    - a real node (root): the image deployed from deploy/ and deploy/cosi/hostpath/,"
	@echo "              pods using claims and COSI accesses"
	@echo "make crds   - regenerate crds/ (and the chart's copy) from crates/bucket-api"
	@echo "make docs   - the book (docs/src/) rendered into docs/book/: open docs/book/index.html"
	@echo "make chart  - lint the Helm chart, check its schema, deploy/ against it, and the alerts"
	@echo "make bench  - measure the S3 endpoint (beside MinIO and versitygw) and the controllers"
	@echo "              at scale (release build); results in bench-results.txt,"
	@echo "              bench-controller-results.txt, bench-cosi-results.txt,"
	@echo "              bench-store-link-results.txt,"
	@echo "              bench-volumes-results.txt and bench-garage-results.txt"

toolchain:
	@command -v cargo >/dev/null || { echo "cargo (Rust) is required"; exit 1; }
	@command -v go >/dev/null || { echo "go is required to build the control plane"; exit 1; }
	@command -v openssl >/dev/null || { echo "openssl is required by the test control plane"; exit 1; }
	@if command -v rustup >/dev/null; then rustup component add rustfmt clippy >/dev/null 2>&1 || true; fi

controlplane: toolchain
	@tests/controlplane/build.sh >/dev/null

# Built from the package registry once (about 15 minutes on two cores), then cached.
garage: toolchain
	@tests/garage/build.sh >/dev/null

# About 30 s, offline (vendored), then cached.
aws-s3-provisioner: toolchain
	@tests/aws-s3-provisioner/build.sh >/dev/null

# Both pinned revisions, offline from their vendor/ (about 70 s each on two cores), then cached.
cosi: toolchain
	@tests/cosi/build.sh >/dev/null

chart-tools: helm promtool

# mdBook and mdbook-mermaid from the package registry once (minutes on two cores), then cached.
mdbook: toolchain
	@tests/mdbook/build.sh >/dev/null

# The book: docs/src/ rendered into docs/book/ (gitignored), with the diagrams' script that
# mdbook-mermaid carries copied beside book.toml first (gitignored too). Its examples and links
# are checked by the tests (tests/docs.rs), not here.
docs: mdbook
	@RUST_LOG=warn "$(MDBOOK_DIR)/mdbook-mermaid" install docs >/dev/null
	PATH="$(MDBOOK_DIR):$$PATH" "$(MDBOOK_DIR)/mdbook" build docs
	@echo "docs: open docs/book/index.html"

.PHONY: helm promtool
helm: toolchain
	@tests/helm/build.sh >/dev/null

promtool:
	@tests/prometheus/install.sh >/dev/null

chart: controlplane chart-tools
	BUCKET_PROVISIONER_CONTROLPLANE_BIN="$(CONTROLPLANE_BIN)" BUCKET_PROVISIONER_HELM_BIN="$(HELM_BIN)" \
		BUCKET_PROVISIONER_PROMTOOL="$(PROMTOOL_BIN)" cargo test --workspace --no-fail-fast --test chart

lint: toolchain
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# Everything `make test` runs is built first (test-builds), then the demo runs and the book is
# rendered (either failing stops `make test`), then the tests, the node tests last; one summary
# line of every test binary's results closes the output.
# Every test binary runs even when an earlier one failed (--no-fail-fast, and make e2e runs after
# a failed workspace run), so one failure never hides the rest; the recipe is one shell so that
# the summary is printed either way and the exit status still says whether anything failed. A
# binary that died without its "test result:" line (a crash, a signal) is named after the summary.
TEST_RUN_LOG = $(BUCKET_PROVISIONER_CACHE)/last-test-run.txt
test: test-builds
	@mkdir -p "$(BUCKET_PROVISIONER_CACHE)"
	@$(MAKE) --no-print-directory demo
	@$(MAKE) --no-print-directory docs
	BUCKET_PROVISIONER_CONTROLPLANE_BIN="$(CONTROLPLANE_BIN)" BUCKET_PROVISIONER_HELM_BIN="$(HELM_BIN)" \
		BUCKET_PROVISIONER_PROMTOOL="$(PROMTOOL_BIN)" BUCKET_PROVISIONER_GARAGE_BIN="$(GARAGE_BIN)" \
		BUCKET_PROVISIONER_AWS_S3_PROVISIONER_BIN="$(AWS_S3_PROVISIONER_BIN)" \
		BUCKET_PROVISIONER_GO_CONSUMER="$(GO_CONSUMER_BIN)" BUCKET_PROVISIONER_AWSCLI="$(AWSCLI_BIN)" \
		BUCKET_PROVISIONER_COSI_DIR="$(COSI_DIR)" BUCKET_PROVISIONER_KUBECTL_BIN="$(KUBECTL_BIN)" \
		cargo test --workspace --no-fail-fast \
		--exclude node-tests 2>&1 | tee "$(TEST_RUN_LOG)" || failed=1; \
	$(MAKE) --no-print-directory e2e STATIC_PROFILE=image-test 2>&1 | tee -a "$(TEST_RUN_LOG)" \
		|| failed=1; \
	tests/test-summary.sh "$(TEST_RUN_LOG)"; \
	exit $${failed:-0}

# What `make test` builds, in four lanes side by side: our crates (one cargo at a time, since they
# share a target directory), the Go-built tools, Garage (a target directory of its own), and
# Debian's packages with moto and mdBook (a target directory of its own too). Alone, each build
# leaves one of two cores idle for long stretches (a crate's last codegen unit, a link, a
# download); side by side they keep both busy, which takes about a quarter off a cold run. Lines
# from the lanes interleave as they come, so a long build always shows progress.
.PHONY: test-builds test-build-crates test-build-go-tools test-build-packages
test-builds:
	@$(MAKE) --no-print-directory -j4 test-build-crates test-build-go-tools garage test-build-packages

# Lint first, then the test binaries of `make test` and `make e2e`, the image's unoptimised static
# binaries and the demo.
test-build-crates: lint
	cargo test --workspace --exclude node-tests --no-run
	cargo test --workspace $(E2E_TESTS) --no-run
	@$(MAKE) --no-print-directory static STATIC_PROFILE=image-test
	@$(MAKE) --no-print-directory demo-build

# One Go build at a time: they share the Go build cache, so the later ones reuse packages the
# earlier compiled (the node's kubelet most of the control plane's).
test-build-go-tools:
	@$(MAKE) --no-print-directory controlplane
	@$(MAKE) --no-print-directory node-programs
	@$(MAKE) --no-print-directory cosi
	@$(MAKE) --no-print-directory aws-s3-provisioner
	@$(MAKE) --no-print-directory helm
	@tests/kubectl/build.sh >/dev/null
	@tests/web-identity/go-consumer/build.sh >/dev/null

test-build-packages: strace volume-tools moto promtool node-packages mdbook
	@tests/web-identity/awscli/install.sh >/dev/null

.PHONY: moto
# strace, for the hostPath durability tests (what a PUT, or a change of tags or CORS rules,
# syncs before its answer).
.PHONY: strace
strace:
	@tests/strace/install.sh >/dev/null

# btrfs-progs, e2fsprogs and xfsprogs (Debian's), for the hostPath volumes' btrfs and loop
# modes and their tests, which make filesystems on loop devices (as root, as CI runs).
.PHONY: volume-tools
volume-tools:
	@tests/volumes/install.sh >/dev/null

moto:
	@command -v python3 >/dev/null || { echo "python3 (with venv) is required for moto"; exit 1; }
	@tests/moto/install.sh >/dev/null

crds: toolchain
	cargo run -q -p bucket-api --bin crdgen -- crds
	cp crds/*.yaml charts/bucket-provisioner/crds/

# The demo's binaries, also built ahead of the tests by test-build-crates.
.PHONY: demo-build
demo-build: toolchain
	cargo build -q -p hostpath-provisioner --bin hostpath-bucket-provisioner --example consumer --example demo

demo: controlplane demo-build
	BUCKET_PROVISIONER_CONTROLPLANE_BIN="$(CONTROLPLANE_BIN)" "$(CARGO_TARGET_DIR)/debug/examples/demo" \
		"$(CARGO_TARGET_DIR)/debug/hostpath-bucket-provisioner" "$(CARGO_TARGET_DIR)/debug/examples/consumer"

# The provisioners and the consumer example, linked statically (glibc), in one build so that
# they share one set of compiled dependencies.
static: toolchain
	$(STATIC_RUSTFLAGS_VAR)="-C target-feature=+crt-static" cargo build --profile $(STATIC_PROFILE) --locked \
		--target $(STATIC_TARGET) -p hostpath-provisioner --bin hostpath-bucket-provisioner \
		--example consumer -p s3-provisioner --bin s3-bucket-provisioner \
		-p hostpath-volume-provisioner --bin hostpath-volume-provisioner \
		-p garage-provisioner --bin garage-bucket-provisioner

# The Dockerfile's context is dist/image/; buildah builds it without a daemon or registry, and
# the archive loads with `ctr images import` or `docker load`.
image: static volume-tools node-packages
	@rm -rf dist/image && mkdir -p dist/image
	@tests/volumes/rootfs.sh dist/image/rootfs
	@cp "$(STATIC_DIR)/hostpath-bucket-provisioner" "$(STATIC_DIR)/s3-bucket-provisioner" \
		"$(STATIC_DIR)/hostpath-volume-provisioner" "$(STATIC_DIR)/garage-bucket-provisioner" \
		/etc/ssl/certs/ca-certificates.crt dist/image/
	@tests/node/oci-build.sh "$(IMAGE)" Dockerfile dist/image "$(IMAGES_DIR)/bucket-provisioner"
	@echo "image: $(IMAGE) in $(IMAGES_DIR)/bucket-provisioner.tar"

# The node's programs (kubelet, kube-proxy, kube-scheduler, CoreDNS, pause) and Debian packages.
node: node-packages node-programs

# Debian's packages the node and the image build need (containerd, runc, CNI, buildah, ...).
.PHONY: node-packages node-programs
node-packages:
	@tests/node/install.sh

# The kubelet and the node's other Go-built programs.
node-programs: toolchain
	@tests/node/build.sh >/dev/null

# A real node running the image, deployed from deploy/ and installed with the Helm chart (each
# test binary starts a node of its own), and COSI (the upstream controller and sidecar, v0.2.2
# and main, with deploy/cosi/hostpath/); needs root. The consumer pods' output is printed.
# --workspace resolves features as `make test` does, so no dependency is rebuilt.
e2e: controlplane chart-tools moto garage node volume-tools cosi image
	@tests/node/images.sh "$$(tests/node/build.sh 2>/dev/null)" "$(STATIC_DIR)" "$(IMAGES_DIR)" "$(COSI_DIR)"
	BUCKET_PROVISIONER_CONTROLPLANE_BIN="$(CONTROLPLANE_BIN)" BUCKET_PROVISIONER_GARAGE_BIN="$(GARAGE_BIN)" \
		BUCKET_PROVISIONER_NODE_BIN="$$(tests/node/build.sh 2>/dev/null)" \
		BUCKET_PROVISIONER_IMAGES="$(IMAGES_DIR)" BUCKET_PROVISIONER_HELM_BIN="$(HELM_BIN)" \
		BUCKET_PROVISIONER_COSI_DIR="$(COSI_DIR)" cargo test --workspace --no-fail-fast $(E2E_TESTS) \
		-- --nocapture \
		|| failed=1; \
	NODE_DIR="$${TMPDIR:-/tmp}/bucket-provisioner-node" tests/node/node.sh wait; \
	exit $${failed:-0}

# BENCH_CLAIMS (default 1000) and BENCH_WORKERS (default 4) size the controller benchmarks,
# BENCH_COSI (default 1000) the COSI driver's.
bench: toolchain controlplane garage
	cargo bench -p s3-endpoint --bench s3_endpoint -- --output "$(CURDIR)/bench-results.txt"
	@# MinIO and versitygw from their pinned Go modules, into the cache; one that cannot be
	@# built is left out of the table, which says so.
	BUCKET_PROVISIONER_MINIO_BIN="$$(tests/minio/build.sh)" \
		BUCKET_PROVISIONER_VERSITYGW_BIN="$$(tests/versitygw/build.sh)" \
		cargo bench -p s3-endpoint --bench s3_side_by_side -- \
		--append "$(CURDIR)/bench-results.txt"
	BUCKET_PROVISIONER_CONTROLPLANE_BIN="$(CONTROLPLANE_BIN)" cargo bench -p hostpath-provisioner \
		--bench controller -- --output "$(CURDIR)/bench-controller-results.txt"
	BUCKET_PROVISIONER_CONTROLPLANE_BIN="$(CONTROLPLANE_BIN)" cargo bench -p hostpath-provisioner \
		--bench cosi -- --output "$(CURDIR)/bench-cosi-results.txt"
	cargo bench -p hostpath-provisioner --bench store_link -- \
		--output "$(CURDIR)/bench-store-link-results.txt"
	BUCKET_PROVISIONER_CONTROLPLANE_BIN="$(CONTROLPLANE_BIN)" cargo bench \
		-p hostpath-volume-provisioner --bench volumes -- \
		--output "$(CURDIR)/bench-volumes-results.txt"
	BUCKET_PROVISIONER_CONTROLPLANE_BIN="$(CONTROLPLANE_BIN)" BUCKET_PROVISIONER_GARAGE_BIN="$(GARAGE_BIN)" \
		cargo bench -p garage-provisioner --bench claims -- \
		--output "$(CURDIR)/bench-garage-results.txt"
