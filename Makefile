# Quill: `make run` (the whole stack, foreground) and `make test` (the whole suite).
# Both install whatever is missing first and are safe to repeat.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
STACK := $(PY) -m quill_stack

# make up BROKERS=1  ->  QUILL_BROKERS=1
ifdef BROKERS
export QUILL_BROKERS := $(BROKERS)
endif
# make up SECURE=1  ->  QUILL_SECURITY=sasl_ssl (SASL_SSL, SCRAM-SHA-512, ACLs: README)
ifeq ($(SECURE),1)
export QUILL_SECURITY := sasl_ssl
endif

PYTEST_FLAGS ?= -p no:cacheprovider -ra --durations=15 --strict-markers
ARGS ?=

.PHONY: help install admin run up down status logs test lint format constraints \
	compose-build compose-up compose-down compose-clean

help:
	@echo "make run      install, then run the whole stack in the foreground (Ctrl-C stops it)"
	@echo "make test     install, then run the whole test suite"
	@echo "make up       start the stack in the background (BROKERS=1 for one broker,"
	@echo "              SECURE=1 for SASL_SSL with ACLs and an admin user)"
	@echo "make down     stop it;  make status | make logs [ARGS='-f broker-1']"
	@echo "make lint     ruff check + format check"
	@echo "make compose-up | compose-down | compose-clean   the stack in containers (README)"

install:
	@scripts/install.sh

# The console's first admin login; prints its password the first time only.
admin: install
	@$(PY) manage.py createadmin

run: install admin
	@$(STACK) run

up: install admin
	@$(STACK) up

down:
	@if [ -x $(PY) ]; then $(STACK) down; else echo "not installed, so not running"; fi

status:
	@$(STACK) status

logs:
	@$(STACK) logs $(ARGS)

test: install
	$(PY) -m pytest $(PYTEST_FLAGS) $(ARGS)

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Pin constraints.txt to the versions in .venv (after `make test` passed with them).
constraints:
	$(PY) scripts/constraints.py > constraints.txt

format:
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The stack in containers (docker-compose.yml); works offline: scripts/base-image.sh
compose-build:
	@scripts/compose.sh build

compose-up:
	@scripts/compose.sh up

compose-down:
	@scripts/compose.sh down

compose-clean:
	@scripts/compose.sh clean
