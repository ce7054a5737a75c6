# Two commands for a fresh machine: `make demo` and `make test`. Each installs what it needs
# (apt packages, the virtualenv, Python packages, the testbed's Go-built binaries) and skips
# what is already in place.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
APT_PACKAGES := redis-server git mmdebstrap umoci chromium chromium-driver
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEMO_DIR := .demo

.PHONY: setup apt venv binaries test lint unit manifests image image-verify demo demo-stop clean

setup: apt venv binaries

apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing apt packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	  for p in redis-server; do $(SUDO) systemctl disable --now $$p >/dev/null 2>&1 || true; done; \
	fi

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bench]'
	@rm -f $(VENV)/.installed-*; touch $(STAMP)

binaries: venv
	$(VENV)/bin/gitfleet testbed build

lint: venv
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: setup lint
	$(VENV)/bin/pytest -q

# deploy/manifests/ from deploy/chart (tests/integration/deploy/test_chart.py fails when they differ).
manifests: binaries
	$(PY) -m deploy.manifests render

unit: venv
	$(VENV)/bin/pytest -q tests/unit

# The OCI image (deploy/image): dist/oci (OCI layout, tag = version) and dist/gitfleet-image.tar
# (docker load). Needs root (mmdebstrap, chroot); stages are cached under .cache/image/.
image: setup
	$(PY) -m deploy.image build --out dist

# Builds the image a second time from the same inputs in an empty cache; fails unless the
# digests are equal.
image-verify: setup
	$(PY) -m deploy.image verify --out dist

demo: setup
	$(PY) -m deploy.demo up --dir $(DEMO_DIR)
	@echo "Reach a cluster: $(abspath .cache/testbed/tools)/kubectl --kubeconfig $(abspath $(DEMO_DIR))/testbed/cluster-1/kubeconfig get pods -A"

demo-stop:
	@test -x $(PY) && $(PY) -m deploy.demo down --dir $(DEMO_DIR) || true

clean: demo-stop
	rm -rf $(VENV) .cache $(DEMO_DIR)
