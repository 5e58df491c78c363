# azkafka build and test entry points. `make help` lists them.
GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOFILES      = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*')
# Modules of their own beside the core (each has a go.mod and a replace of
# the core): the exporters and the example that uses them.
SUBMODULES   = contrib/prometheus contrib/otel examples/metrics

.PHONY: help test fmt vet staticcheck gotest download conformance ci broker cluster

help:
	@echo "make test         gofmt check, go vet, staticcheck, go test -race ./... in the core and in $(SUBMODULES) (hermetic: no network, no JVM)"
	@echo "make download     go mod download in every module"
	@echo "make conformance  start a real Apache Kafka 4.3.1 broker from Maven Central jars and run conformance/"
	@echo "make ci           test + conformance"
	@echo "make broker       start a real Apache Kafka 4.3.1 broker on loopback and keep it running until Ctrl-C"
	@echo "make cluster      the same for the 3-node cluster with racks az-a, az-b, az-c (= make broker ARGS=--cluster)"

test: fmt vet staticcheck gotest

fmt:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	$(GO) vet -tags conformance ./...
	@for m in $(SUBMODULES); do echo "$(GO) vet ./... in $$m"; (cd $$m && $(GO) vet ./...) || exit 1; done

staticcheck:
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags conformance ./...
	@for m in $(SUBMODULES); do echo "staticcheck ./... in $$m"; (cd $$m && $(GO) run $(STATICCHECK) ./...) || exit 1; done

gotest:
	$(GO) test -race -timeout 10m ./...
	@for m in $(SUBMODULES); do echo "$(GO) test -race ./... in $$m"; (cd $$m && $(GO) test -race -timeout 10m ./...) || exit 1; done

download:
	$(GO) mod download
	@for m in $(SUBMODULES); do (cd $$m && $(GO) mod download) || exit 1; done

conformance:
	./conformance/run.sh

# ARGS: more run.sh flags, e.g. make broker ARGS=--cluster.
broker:
	./conformance/run.sh --broker-only $(ARGS)

cluster:
	./conformance/run.sh --broker-only --cluster

ci: test conformance
