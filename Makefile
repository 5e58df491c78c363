# azkafka build and test entry points. `make help` lists them.
GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOFILES      = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*')

.PHONY: help test fmt vet staticcheck gotest conformance ci broker cluster

help:
	@echo "make test         gofmt check, go vet, staticcheck, go test -race ./... (hermetic: no network, no JVM)"
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

staticcheck:
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags conformance ./...

gotest:
	$(GO) test -race -timeout 10m ./...

conformance:
	./conformance/run.sh

# ARGS: more run.sh flags, e.g. make broker ARGS=--cluster.
broker:
	./conformance/run.sh --broker-only $(ARGS)

cluster:
	./conformance/run.sh --broker-only --cluster

ci: test conformance
